"""Fine-tuning, as run_classifier.py and run_squad.py lay it out: a Task per kind of problem
(task.py, tasks.py: classification, NER, SQuAD, multiple choice, relations), objective.py the
fine-tuning objective on the one engine, job.py `bertlab finetune`, predict.py `bertlab predict`.
The model folder it writes is interop/finetuned.py's format."""
