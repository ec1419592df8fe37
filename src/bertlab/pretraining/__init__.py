"""BERT pretraining as google-research/bert does it: a WordPiece vocabulary (vocab.py), masked and
paired instances written as memory-mapped shards (instances.py, shards.py), and the masked-LM +
next-sentence objective trained together (loss.py, trainer.py)."""
