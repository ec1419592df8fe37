"""Static word vectors: the word2vec text format, nearest neighbours and analogies.

The format is word2vec.c's `-binary 0` output, which gensim's KeyedVectors.load_word2vec_format,
fastText and most tools read: a header line "<words> <dimensions>", then one line per word, the
word and its numbers separated by single spaces.

Similarity is the cosine; an analogy a : b :: c : ? is the word closest to b - a + c over unit
vectors (3CosAdd, Mikolov et al. 2013), the question's own words excluded, as gensim's
most_similar(positive=[b, c], negative=[a]) computes it.
"""
import os
import re

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
    naming the file and line: a header that is not two counts, or whose counts the file cannot
    hold (checked on the file's size, and the memory checked, before the table is allocated); rows
    of another width than the header's; values that are not numbers or not finite (NaN, infinity,
    or beyond float32); a word that is empty or that appears twice (the second row would shadow
    the first, or the first the second, depending on the tool)."""
    from .. import validate
    from ..io import open_input
    if os.path.isdir(path):
        path = os.path.join(path, "vectors.txt")
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        first = f.readline(200)
        count, dim = _header(first, path)
        rows_bytes = size - len(first)
        # every row is a word, then dim numbers each with its separating space, then a newline:
        # at least 2 x (dim + 1) bytes, so a header that promises more than that is a lie
        if count * 2 * (dim + 1) > rows_bytes:
            raise ValueError(f"{path}: the header promises {count:,} words of {dim:,} numbers, more than the "
                             f"{rows_bytes:,} bytes after it can hold")
        validate.check_memory(f"{path}: {count:,} words x {dim:,} dimensions (the vectors and their unit copies, "
                              "float32)", 2 * count * dim * 4, advice="pass --max-model-gb to allow it")
        lines = decode_lines(first + f.read(), path)
    if len(lines) - 1 != count:
        raise ValueError(f"{path}: the header promises {count} words, the file has {len(lines) - 1} lines after it")
    words, vectors, seen = [], np.empty((count, dim), dtype=np.float32), {}
    for number, line in enumerate(lines[1:], 2):
        parts = line.rstrip().split(" ")  # word2vec.c ends each row with a space; a CRLF file with "\r"
        if len(parts) != dim + 1:
            raise ValueError(f"{path}:{number}: {len(parts) - 1} numbers after the word, the header says {dim}")
        word = parts[0]
        if not word:
            raise ValueError(f"{path}:{number}: the row starts with a space: its word is empty")
        if word in seen:
            raise ValueError(f"{path}:{number}: the word {word!r} appears twice (lines {seen[word]} and {number}); "
                             "each word has one vector")
        seen[word] = number
        try:
            row = np.array([float(x) for x in parts[1:]], dtype=np.float64)
        except ValueError:
            raise ValueError(f"{path}:{number}: a value of {word!r} is not a number") from None
        finite = np.isfinite(row) & (np.abs(row) <= FLOAT32_MAX)
        if not finite.all():
            raise ValueError(f"{path}:{number}: the vector of {word!r} holds {parts[1 + int(np.argmin(finite))]} "
                             "(NaN, infinity, or beyond float32's range); word vectors must be finite")
        vectors[number - 2] = row
        words.append(word)
    return WordVectors(words, vectors, os.fspath(path))


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _header(first: bytes, path) -> tuple[int, int]:
    """(words, dimensions) of a word2vec header line "<words> <dimensions>", both whole numbers of
    at least 1 written in ASCII digits."""
    if not first:
        raise ValueError(f"{path}: the file is empty")
    text = first.decode("utf-8", "replace").strip()
    if not re.fullmatch(r"[0-9]+[ \t]+[0-9]+", text):
        raise ValueError(f"{path}:1: expected the header '<words> <dimensions>', got {text[:60]!r} "
                         "(not a word2vec text file)")
    count, dim = map(int, text.split())
    if count < 1 or dim < 1:
        raise ValueError(f"{path}:1: the header says {count} words of {dim} dimensions; both must be at least 1")
    return count, dim
