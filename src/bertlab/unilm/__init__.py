"""UniLM fine-tuning for generation: objective.py masks target tokens under the sequence-to-sequence
mask on the one engine, job.py is `bertlab unilm-train`. UniLM pretraining is an objective of
pretraining/ (pretraining/unilm.py); decoding is inference/unilm.py."""
