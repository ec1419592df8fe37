"""word2vec before it all: data.py reads a corpus into a vocabulary and word ids, objective.py is
skip-gram or CBOW with negative sampling on the one engine, job.py is `bertlab word2vec train`."""
