"""BERT pretraining as google-research/bert does it: a WordPiece vocabulary (vocab.py), masked and
paired instances written as memory-mapped shards (instances.py, shards.py), and the masked-LM +
next-sentence objective trained together (objective.py; the loss is models/losses.py); ALBERT,
ELECTRA (electra.py), span masking and UniLM pretraining (unilm.py) are its other objectives;
job.py is `bertlab pretrain`."""
