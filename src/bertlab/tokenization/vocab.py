"""The WordPiece vocabulary: ``vocab.txt``, one token per line, id = line number - 1.

Loading follows google-research/bert's ``load_vocab`` (each line is ``str.strip()``-ed), but is
strict where google's is lenient: an empty file, a duplicated token (google silently keeps the
first and shifts every later id) or bytes that are not UTF-8 (google drops them) raise a
``ValueError`` naming the file and the line, because each of them silently corrupts ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..io import atomic_write, read_input

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"

# What a vocabulary file (vocab.txt, vocab.json, merges.txt, chars.json) may hold, checked before
# it is decoded: the largest released vocabularies have about 250,000 tokens (a few MB of file;
# BERT's vocab.txt is 230 KB, GPT-2's vocab.json 1 MB), and a crafted file of millions of tokens
# would be turned into Python strings and dicts many times its size before anything else is checked.
MAX_VOCAB_BYTES = 32 << 20
MAX_VOCAB_TOKENS = 1 << 20


def check_vocab_count(count: int, path, what: str = "tokens"):
    """Refuse a vocabulary file of more than MAX_VOCAB_TOKENS entries, naming it."""
    if count > MAX_VOCAB_TOKENS:
        raise ValueError(f"{path}: {count:,} {what}, more than a vocabulary may hold ({MAX_VOCAB_TOKENS:,}; the "
                         "largest released vocabularies have about 250,000)")


class Vocab:
    """Tokens <-> ids. ``token_to_id`` and ``id_to_token`` are plain dict / list for speed."""

    def __init__(self, tokens: Iterable[str], source: str = "<in-memory vocab>"):
        self.source = source
        self.id_to_token: list[str] = list(tokens)
        if not self.id_to_token:
            raise ValueError(f"{source}: the vocabulary is empty")
        self.token_to_id: dict[str, int] = {}
        duplicates: dict[str, list[int]] = {}
        for i, token in enumerate(self.id_to_token):
            first = self.token_to_id.setdefault(token, i)
            if first != i:
                duplicates.setdefault(token, [first]).append(i)
        if duplicates:
            listed = "; ".join(
                f"{token!r} on lines {', '.join(str(i + 1) for i in ids)}"
                for token, ids in list(duplicates.items())[:10])
            more = f" (and {len(duplicates) - 10} more)" if len(duplicates) > 10 else ""
            raise ValueError(f"{source}: duplicate tokens: {listed}{more}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocab":
        data = read_input(path, MAX_VOCAB_BYTES, what="vocabulary file")  # a regular file, size capped
        check_vocab_count(data.count(b"\n") + (not data.endswith(b"\n")), path, "lines")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise ValueError(
                f"{path}: line {line} is not valid UTF-8 ({e.reason} at byte {e.start})") from None
        lines = text.split("\n")
        if lines[-1] == "":  # the newline that ends the last line
            lines.pop()
        return cls((line.strip() for line in lines), source=str(path))

    @classmethod
    def from_dict(cls, token_to_id: Mapping[str, int], source: str = "<in-memory vocab>") -> "Vocab":
        """From a mapping whose ids are exactly 0..n-1."""
        ids = sorted(token_to_id.values())
        if ids != list(range(len(ids))):
            raise ValueError(f"{source}: ids must be exactly 0..{len(ids) - 1}, each once")
        return cls(sorted(token_to_id, key=token_to_id.__getitem__), source=source)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``vocab.txt`` atomically (a temporary file in the same folder, then rename)."""
        for i, token in enumerate(self.id_to_token):
            if token != token.strip() or "\n" in token:
                raise ValueError(f"token {i} ({token!r}) would not survive a round trip through "
                                 "vocab.txt (leading/trailing whitespace or a newline)")
        atomic_write(path, lambda f: f.write("".join(token + "\n" for token in self.id_to_token)))

    def special_id(self, token: str, needed_for: str) -> int:
        """The id of a special token, or a ValueError saying which file lacks it and why it is needed."""
        try:
            return self.token_to_id[token]
        except KeyError:
            raise ValueError(f"{self.source}: the vocabulary has no {token} token, "
                             f"which {needed_for} needs") from None

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.token_to_id[t] for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token[i] for i in ids]

    def __len__(self) -> int:
        return len(self.id_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self.token_to_id

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens from {self.source})"
