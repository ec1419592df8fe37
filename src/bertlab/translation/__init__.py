"""The encoder-decoder Transformer for translation: objective.py is label-smoothed teacher forcing
on token-count batches (data.parallel) on the one engine, job.py is `bertlab translate-train`."""
