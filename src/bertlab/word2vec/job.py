"""`bertlab word2vec train` as a function a notebook can call: the corpus read into a vocabulary
and word ids (data.py), the run folder claimed, and objective.Word2VecObjective trained."""
import os

from ..training.checkpoint import check_resume
from ..training.engine import fit
from .data import build_vocabulary, corpus_sentences, encode
from .objective import Word2VecObjective, Word2VecSettings


def train_word2vec(corpus, s: Word2VecSettings, overwrite: bool = False) -> dict:
    """Train word vectors on the text file `corpus` (one sentence per line, words separated by
    whitespace) into the run folder s.out: OUT/vectors.txt in the word2vec text format, with the
    engine's metrics.jsonl, curves.png and summary.json. Returns the summary (the trained model
    under "model")."""
    if not os.path.isfile(corpus):
        raise FileNotFoundError(f"{corpus}: no such corpus file")
    sentences = corpus_sentences(corpus, s.lowercase)
    vocab = build_vocabulary(sentences, s.min_count, corpus)
    ids, sentence = encode(sentences, vocab)
    del sentences
    check_resume(s.out, s.resume, overwrite, outputs=("vectors.txt",), command="word2vec train")
    return fit(Word2VecObjective(s, vocab, ids, sentence), s)
