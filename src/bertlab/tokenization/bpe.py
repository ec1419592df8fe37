"""GPT-2's byte-level byte-pair encoding, and a character-level tokenizer for tiny demos.

Text is split into words by GPT-2's pre-tokenization pattern, each word's UTF-8 bytes are written
as printable stand-in characters (so every byte string is a string over 256 symbols and nothing is
ever unknown), and the merges learned from a corpus are applied to each word in order of rank.
The files are GPT-2's own: vocab.json (token -> id) and merges.txt (one merge a line, by rank).
Encoding and decoding are ours; learning the merges uses the `tokenizers` library's trainer.
"""
import json
import os
from functools import lru_cache

import regex

from ..io import atomic_write_text, read_json
from .vocab import MAX_VOCAB_BYTES, check_vocab_count

EOT = "<|endoftext|>"
INF = float("inf")
# GPT-2's pre-tokenizer: English contractions, words with an optional leading space, numbers,
# punctuation runs, and whitespace (a run of spaces before a word gives its last space to the word).
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """Byte -> printable character: printable Latin-1 bytes stand for themselves, the other 68
    (control characters, space, soft hyphen...) are moved to code points 256 and up."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, shifted = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


class ByteLevelBPETokenizer:
    """encode(text) -> ids and decode(ids) -> text with a GPT-2 vocab.json/merges.txt pair."""

    kind = "bpe"

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], special_tokens=(EOT,)):
        self.vocab = dict(vocab)
        self.inverse = {i: t for t, i in self.vocab.items()}
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.merges = list(merges)
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        missing = [c for c in self.byte_encoder.values() if c not in self.vocab]
        if missing:
            raise ValueError(f"vocab lacks {len(missing)} of the 256 byte symbols (e.g. {missing[0]!r}): "
                             "not a byte-level BPE vocabulary")
        self.special = {t: self.vocab[t] for t in special_tokens if t in self.vocab}
        self._special_re = regex.compile("|".join(regex.escape(t) for t in self.special)) if self.special else None
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return max(self.vocab.values()) + 1

    @property
    def eos_token_id(self):
        return self.special.get(EOT)

    def _bpe(self, word: str) -> list[int]:
        """The ids of one pre-tokenized word (already in byte symbols)."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids = [self.vocab[p] for p in apply_merges(list(word), self.ranks)]
        if len(self._cache) < 200_000:
            self._cache[word] = ids
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        ids = []
        for word in PATTERN.findall(text):
            ids.extend(self._bpe("".join(self.byte_encoder[b] for b in word.encode("utf-8"))))
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids; special tokens written in the text (<|endoftext|>) become their own id."""
        if self._special_re is None:
            return self._encode_ordinary(text)
        ids, start = [], 0
        for m in self._special_re.finditer(text):
            ids += self._encode_ordinary(text[start:m.start()])
            ids.append(self.special[m.group()])
            start = m.end()
        return ids + self._encode_ordinary(text[start:])

    def decode(self, ids) -> str:
        """Text of the ids; a multi-byte character cut in half becomes U+FFFD, as in GPT-2."""
        data = bytearray()
        for i in ids:
            token = self.inverse.get(int(i))
            if token is None:
                raise ValueError(f"token id {i} is not in the vocabulary of {self.vocab_size}")
            if token in self.special:
                data += token.encode("utf-8")
            else:
                data += bytes(self.byte_decoder[c] for c in token)
        return data.decode("utf-8", errors="replace")

    @classmethod
    def from_files(cls, vocab_file, merges_file) -> "ByteLevelBPETokenizer":
        """Errors name the file: JSON that is not a {token: id} object, a merge whose pieces or
        result the vocabulary lacks (encoding would fail on the first word that uses it)."""
        vocab = read_vocab(vocab_file)
        merges = read_merges(merges_file)
        for number, (a, b) in enumerate(merges, 1):
            missing = next((p for p in (a, b, a + b) if p not in vocab), None)
            if missing is not None:
                raise ValueError(f"{merges_file}: merge {number} ({a} {b}) needs {missing!r}, which "
                                 f"{vocab_file} lacks; the two files are not one tokenizer's")
        try:
            return cls(vocab, merges)
        except ValueError as e:
            raise ValueError(f"{vocab_file}: {e}") from None

    @classmethod
    def from_folder(cls, folder) -> "ByteLevelBPETokenizer":
        return cls.from_files(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))

    def save(self, folder):
        """vocab.json and merges.txt in GPT-2's format, each written atomically."""
        atomic_write_text(os.path.join(folder, "vocab.json"), json.dumps(self.vocab, ensure_ascii=False) + "\n")
        atomic_write_text(os.path.join(folder, "merges.txt"),
                          "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in self.merges))

    @classmethod
    def train(cls, texts, vocab_size: int = 8000, min_frequency: int = 2, show_progress=False):
        """Learn merges from an iterable of strings with the `tokenizers` library's BPE trainer
        (GPT-2 pre-tokenization, all 256 bytes in the initial alphabet, <|endoftext|> special)."""
        if vocab_size < 257:  # the trainer would quietly make the 257 it needs
            raise ValueError(f"vocab_size {vocab_size}: a byte-level BPE needs at least 257 tokens (the 256 bytes "
                             "and <|endoftext|>)")
        from tokenizers import ByteLevelBPETokenizer as Trainer
        trainer = Trainer(add_prefix_space=False)
        trainer.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=min_frequency,
                                    special_tokens=[EOT], show_progress=show_progress)
        return cls(*learned_model(trainer._tokenizer))


def learned_model(tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab, merges by rank) of a trained `tokenizers` BPE model."""
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


def apply_merges(parts: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """One word's symbols after BPE: repeatedly merge the adjacent pair of best (lowest) rank,
    every occurrence of it, left to right -- the order the merges were learned in."""
    while len(parts) > 1:
        pair = min(zip(parts, parts[1:]), key=lambda p: ranks.get(p, INF))
        if pair not in ranks:
            break
        first, second = pair
        merged, i = [], 0
        while i < len(parts):
            if i < len(parts) - 1 and parts[i] == first and parts[i + 1] == second:
                merged.append(first + second)
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return parts


def read_vocab(path) -> dict[str, int]:
    """vocab.json: {token: id} with the ids 0 .. size-1, each once (GPT-2's and the subword
    vocabulary's; a gap would make a model of the largest id's size). The file and its token count
    are capped (vocab.MAX_VOCAB_BYTES, MAX_VOCAB_TOKENS)."""
    vocab = read_json(path, max_bytes=MAX_VOCAB_BYTES, what="vocabulary file")
    check_vocab_count(len(vocab), path)
    bad = next((t for t, i in vocab.items() if isinstance(i, bool) or not isinstance(i, int) or i < 0), None)
    if bad is not None:
        raise ValueError(f"{path}: token {bad!r} has id {vocab[bad]!r}; ids must be whole numbers from 0")
    if len(set(vocab.values())) != len(vocab):
        raise ValueError(f"{path}: two tokens share an id")
    beyond = next((t for t, i in vocab.items() if i >= len(vocab)), None)
    if beyond is not None:
        raise ValueError(f"{path}: token {beyond!r} has id {vocab[beyond]:,}, but the file has {len(vocab):,} tokens; "
                         f"ids must be 0 to {len(vocab) - 1}, each once")
    return vocab


def read_merges(path) -> list[tuple[str, str]]:
    """merges.txt: an optional '#version' line, then 'left right' per line, best first (CRLF line
    ends read as line ends; the file and its merges capped as a vocabulary is)."""
    from .files import text_lines
    lines = text_lines(path, allow_empty_file=True, max_bytes=MAX_VOCAB_BYTES, what="merges file")
    check_vocab_count(len(lines), path, "lines")
    merges = []
    for number, line in enumerate(lines, 1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected two symbols separated by one space, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges
