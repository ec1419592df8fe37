"""word2vec's data side (Mikolov et al. 2013; the notes' word2vec section, file 001, and the lineage
Word2Vec -> Transformer -> BERT of file 004): a vocabulary cut at a minimum count, the subsampling
of frequent words, the unigram^0.75 noise distribution of negative sampling, and the (input, target)
training examples that a random window around each word gives.

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


def skipgram_pairs(ids, sentence, window: int, rng: np.random.Generator):
    """(inputs, targets): each target word with every word of its window as an input, the window's
    half-width drawn uniformly from 1..window for each target (word2vec.c's "reduced window", which
    weights near words more). As in word2vec.c and gensim, the input vector is the context word's
    and the output vector the centre word's."""
    reach = rng.integers(1, window + 1, size=len(ids))
    inputs, targets = [np.empty(0, dtype=ids.dtype)], [np.empty(0, dtype=ids.dtype)]
    for d in range(1, min(window, len(ids) - 1) + 1):  # no pair lies farther apart than the batch is long
        same = sentence[d:] == sentence[:-d]
        right = same & (reach[:-d] >= d)  # the word d to the right, inside the left word's window
        left = same & (reach[d:] >= d)    # the word d to the left, inside the right word's window
        inputs += [ids[d:][right], ids[:-d][left]]
        targets += [ids[:-d][right], ids[d:][left]]
    return np.concatenate(inputs), np.concatenate(targets)


def cbow_contexts(ids, sentence, window: int, rng: np.random.Generator):
    """(contexts, targets): for each word with at least one neighbour in its window, the ids of that
    window's words, (n, 2 x window) padded with -1 (CBOW averages them to predict the word)."""
    n = len(ids)
    reach = rng.integers(1, window + 1, size=n)
    context = np.full((n, 2 * window), -1, dtype=np.int64)
    for d in range(1, min(window, n - 1) + 1):  # d >= n: no neighbour (and n - d would slice from the end)
        inside = reach[:n - d] >= d
        same = sentence[d:] == sentence[:-d]
        context[:n - d, window + d - 1] = np.where(inside & same, ids[d:], -1)  # right neighbours
        inside = reach[d:] >= d
        context[d:, window - d] = np.where(inside & same, ids[:-d], -1)          # left neighbours
    has = (context >= 0).any(1)
    return context[has], ids[has]
