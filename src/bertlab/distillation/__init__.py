"""Knowledge distillation, DistilBERT's way: a student initialised from every other layer of its
teacher, trained on soft targets, hard labels and the teacher's hidden states (objective.py), for a
fine-tuned task or as general masked-LM distillation (job.py)."""
