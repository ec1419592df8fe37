"""Static word vectors: the word2vec text format, nearest neighbours and analogies.

The format is word2vec.c's `-binary 0` output, which gensim's KeyedVectors.load_word2vec_format,
fastText and most tools read: a header line "<words> <dimensions>", then one line per word, the
word and its numbers separated by single spaces.

Similarity is the cosine; an analogy a : b :: c : ? is the word closest to b - a + c over unit
vectors (3CosAdd, Mikolov et al. 2013), the question's own words excluded, as gensim's
most_similar(positive=[b, c], negative=[a]) computes it.
"""
import os

import numpy as np

from ..io import atomic_write, decode_lines


class WordVectors:
    def __init__(self, words: list[str], vectors: np.ndarray, path: str = "vectors"):
        self.words, self.vectors, self.path = list(words), np.asarray(vectors, dtype=np.float32), path
        self.index = {w: i for i, w in enumerate(self.words)}
        norms = np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self.unit = self.vectors / np.maximum(norms, 1e-12)

    def __contains__(self, word):
        return word in self.index

    def vector(self, word: str) -> np.ndarray:
        if word not in self.index:
            raise ValueError(f"{self.path}: {word!r} is not in the vocabulary ({len(self.words):,} words)")
        return self.vectors[self.index[word]]

    def similarity(self, a: str, b: str) -> float:
        self.vector(a), self.vector(b)
        return float(self.unit[self.index[a]] @ self.unit[self.index[b]])

    def nearest(self, query: np.ndarray, k: int = 10, exclude=()) -> list[tuple[str, float]]:
        """The k words whose vectors are closest (cosine) to `query`, without the words `exclude`."""
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        scores = self.unit @ query
        for word in exclude:
            scores[self.index[word]] = -np.inf
        top = np.argsort(-scores, kind="stable")[:k]
        return [(self.words[i], float(scores[i])) for i in top if np.isfinite(scores[i])]

    def neighbours(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        self.vector(word)
        return self.nearest(self.unit[self.index[word]], k, exclude=[word])

    def analogy(self, a: str, b: str, c: str, k: int = 5) -> list[tuple[str, float]]:
        """a is to b as c is to ...: the words nearest to unit(b) - unit(a) + unit(c)."""
        for word in (a, b, c):
            self.vector(word)
        query = self.unit[self.index[b]] - self.unit[self.index[a]] + self.unit[self.index[c]]
        return self.nearest(query, k, exclude={a, b, c})


def save_word2vec(path, words: list[str], vectors: np.ndarray):
    """Write the word2vec text format atomically (a reader never sees half a file). Numbers are
    written with 8 significant digits: float32 round-trips to within 1e-7 relative."""
    vectors = np.asarray(vectors, dtype=np.float32)
    bad = next((w for w in words if not w or any(ch.isspace() for ch in w)), None)
    if bad is not None:
        raise ValueError(f"{path}: the word {bad!r} is empty or holds whitespace, which the format cannot store")

    def write(f):
        f.write(f"{len(words)} {vectors.shape[1]}\n")
        for word, row in zip(words, vectors):
            f.write(word + " " + " ".join(f"{x:.8g}" for x in row.tolist()) + "\n")
    atomic_write(path, write)


def load_word2vec(path) -> WordVectors:
    """Read the word2vec text format (a run folder: its vectors.txt). Bad input is a ValueError
    naming the file and line."""
    if os.path.isdir(path):
        path = os.path.join(path, "vectors.txt")
    with open(path, "rb") as f:
        lines = decode_lines(f.read(), path)
    header = lines[0].split()
    if len(header) != 2 or not all(h.isdigit() for h in header):
        raise ValueError(f"{path}:1: expected the header '<words> <dimensions>', got {lines[0][:60]!r} "
                         "(not a word2vec text file)")
    count, dim = map(int, header)
    if len(lines) - 1 != count:
        raise ValueError(f"{path}: the header promises {count} words, the file has {len(lines) - 1} lines after it")
    words, vectors = [], np.empty((count, dim), dtype=np.float32)
    for number, line in enumerate(lines[1:], 2):
        parts = line.rstrip().split(" ")
        if len(parts) != dim + 1:
            raise ValueError(f"{path}:{number}: {len(parts) - 1} numbers after the word, the header says {dim}")
        try:
            vectors[number - 2] = [float(x) for x in parts[1:]]
        except ValueError:
            raise ValueError(f"{path}:{number}: a value of {parts[0]!r} is not a number") from None
        words.append(parts[0])
    return WordVectors(words, vectors, os.fspath(path))
