"""word2vec's data side (Mikolov et al. 2013; the notes' word2vec section, file 001, and the lineage
Word2Vec -> Transformer -> BERT of file 004): a vocabulary cut at a minimum count, the subsampling
of frequent words, and the unigram^0.75 noise distribution of negative sampling. The examples a random window around
each word gives are drawn where they are trained, in kernels.py.

The corpus is plain text, one sentence (or paragraph) per line, words separated by whitespace; a
window never crosses a line. Words under the minimum count are dropped before the windows are
drawn, as word2vec.c and gensim drop them, so a window reaches past them.
"""
import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..io import read_lines


@dataclass
class Vocabulary:
    words: list[str]     # most frequent first (ties: first seen first), as word2vec.c sorts them
    counts: np.ndarray   # int64, one per word

    @property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def fingerprint(self) -> str:
        text = "\n".join(f"{w} {c}" for w, c in zip(self.words, self.counts.tolist()))
        return hashlib.sha256(text.encode()).hexdigest()


def corpus_sentences(path, lowercase: bool = False) -> list[list[str]]:
    """Every non-empty line of `path` as its list of words (ValueError naming the file for an empty
    file or bytes that are not UTF-8)."""
    lines = read_lines(path)
    return [words for line in lines if (words := (line.lower() if lowercase else line).split())]


def build_vocabulary(sentences: list[list[str]], min_count: int, path="the corpus") -> Vocabulary:
    """The words seen at least `min_count` times. No such word: a ValueError naming the file, how
    many words it has and the count asked for (a tiny file, or a min_count meant for a big one)."""
    counts = Counter(w for s in sentences for w in s)
    kept = sorted(((w, c) for w, c in counts.items() if c >= min_count), key=lambda wc: -wc[1])  # stable: ties by first sight
    if not kept:
        most = max(counts.values(), default=0)
        raise ValueError(f"{path}: no word occurs at least {min_count} times (min_count {min_count}); the corpus has "
                         f"{sum(counts.values()):,} words, {len(counts):,} distinct, the most frequent {most} times: "
                         "give a bigger corpus or a smaller --min-count")
    return Vocabulary([w for w, _ in kept], np.array([c for _, c in kept], dtype=np.int64))


def encode(sentences: list[list[str]], vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """(word ids, sentence number of each) of the in-vocabulary words, in corpus order."""
    index = vocab.index
    ids, sentence = [], []
    for number, words in enumerate(sentences):
        known = [index[w] for w in words if w in index]
        ids += known
        sentence += [number] * len(known)
    return np.array(ids, dtype=np.int64), np.array(sentence, dtype=np.int64)


def keep_probability(counts: np.ndarray, sample: float) -> np.ndarray:
    """The chance that subsampling keeps each occurrence of a word: word2vec.c's
    (sqrt(f / t) + 1) * t / f with f the word's count and t = sample x the corpus's words, capped at 1
    (0 < sample: no subsampling). Mikolov et al.'s paper writes 1 - sqrt(t / f); the code, which
    gensim follows, keeps a little more."""
    counts = np.asarray(counts, dtype=np.float64)
    if sample <= 0:
        return np.ones_like(counts)
    threshold = sample * counts.sum()
    return np.minimum(1.0, (np.sqrt(counts / threshold) + 1) * threshold / counts)


def noise_distribution(counts: np.ndarray, power: float = 0.75) -> np.ndarray:
    """Negative sampling's noise: the unigram distribution raised to 3/4 and renormalised, which
    draws rare words more often than their share (Mikolov et al. 2013, section 2.2)."""
    weights = np.asarray(counts, dtype=np.float64) ** power
    return weights / weights.sum()
