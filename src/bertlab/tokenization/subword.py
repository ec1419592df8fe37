"""Subword vocabulary for translation: byte-pair encoding over SentencePiece-style words.

Text is first normalised -- whitespace runs become one space, the ends are stripped -- and then cut
into words that carry their own spacing: a space becomes "▁" at the start of the next word (and
the text starts with one, as in SentencePiece, so a word looks the same first or later), every CJK
ideograph (BERT's ranges, ``basic.CJK_RANGES``) and every punctuation mark is a word of its own.
BPE merges apply inside words. Decoding joins the pieces and turns "▁" back into spaces, so
``decode(encode(text)) == normalize(text)`` exactly -- Chinese comes back without spaces between
characters, "Datei: %s" with its spacing -- as long as every character was seen in training.

Characters never seen in training are <unk> (one per character; decoded as "⁇"). Training keeps
every character of the training text in the vocabulary (no alphabet limit), so this only happens
on characters new to the model. Specials: <pad>=0, <unk>=1, <s>=2, </s>=3.

Learning the merges is the `tokenizers` library's BpeTrainer, fed our words; encoding and decoding
are ours (``bpe.apply_merges``, shared with GPT-2's byte-level BPE). The folder holds vocab.json
(token -> id) and merges.txt (one merge a line, best first), the files GPT-2 uses too.
"""

from __future__ import annotations

import functools
import json
import os
import re

from ..io import atomic_write_text
from .basic import char_classes
from .bpe import apply_merges, learned_model, read_merges, read_vocab

SPACE = "\u2581"  # "▁", SentencePiece's visible space
PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
UNKNOWN_TEXT = "\u2047"  # "⁇": what an <unk> decodes to, as in SentencePiece


def normalize(text: str) -> str:
    """The text ``decode(encode(text))`` gives back: whitespace runs (and "▁") become one space."""
    return " ".join(text.replace(SPACE, " ").split())


@functools.lru_cache(maxsize=1)
def _word_pattern():
    classes = char_classes()
    alone = classes["punct"] + classes["cjk"]  # characters that are always words of their own
    return re.compile(f"{SPACE}?[{alone}]|{SPACE}?[^{alone}{SPACE}]+")


def split_words(text: str) -> list[str]:
    """Normalised text as words, a space written as "▁" at the start of the word after it."""
    return _word_pattern().findall(SPACE + normalize(text).replace(" ", SPACE))


def learn_bpe(texts, vocab_size: int = 8000, min_frequency: int = 2):
    """A `tokenizers` BPE model trained on our words (the words joined by spaces, split back by
    its WhitespaceSplit: words never hold whitespace), with the specials first."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIALS), show_progress=False)
    tokenizer.train_from_iterator((" ".join(split_words(t)) for t in texts), trainer=trainer)
    return tokenizer


class SubwordTokenizer:
    """encode(text) -> ids (no <s>/</s>) and decode(ids) -> normalised text."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        for i, token in enumerate(SPECIALS):
            if vocab.get(token) != i:
                raise ValueError(f"not a subword vocabulary: {token} must have id {i}, has {vocab.get(token)}")
        if sorted(vocab.values()) != list(range(len(vocab))):
            raise ValueError("vocabulary ids must be 0 .. size-1, each once")
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.pieces = sorted(self.vocab, key=self.vocab.get)  # id -> piece
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = range(len(SPECIALS))
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.vocab)

    def _word_ids(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            ids = [self.vocab.get(p, self.unk_id) for p in apply_merges(list(word), self.ranks)]
            if len(self._cache) < 500_000:
                self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        return [i for word in split_words(text) for i in self._word_ids(word)]

    def decode(self, ids) -> str:
        """Text of the ids: <pad>, <s> and </s> are skipped, <unk> shows as "⁇"."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.pieces):
                raise ValueError(f"token id {i} is not in the vocabulary of {len(self)}")
            if i == self.unk_id:
                out.append(UNKNOWN_TEXT)
            elif i > self.eos_id:
                out.append(self.pieces[i])
        return " ".join("".join(out).replace(SPACE, " ").split())

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``encode`` as strings, for reading."""
        return [self.pieces[i] for i in self.encode(text)]

    def save(self, folder):
        """vocab.json and merges.txt in ``folder`` (created), each written atomically."""
        atomic_write_text(os.path.join(folder, "vocab.json"), json.dumps(self.vocab, ensure_ascii=False) + "\n")
        atomic_write_text(os.path.join(folder, "merges.txt"),
                          "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in self.merges))

    @classmethod
    def load(cls, folder) -> "SubwordTokenizer":
        path = os.path.join(folder, "vocab.json")
        if not os.path.exists(path):
            raise ValueError(f"{folder}: no vocab.json (a subword vocabulary folder holds vocab.json "
                             "and merges.txt)")
        vocab = read_vocab(path)
        merges = read_merges(os.path.join(folder, "merges.txt"))
        unknown = next((m for m in merges if m[0] not in vocab or m[1] not in vocab), None)
        if unknown:
            raise ValueError(f"{folder}/merges.txt: merge {' '.join(unknown)!r} uses a piece not in vocab.json")
        try:
            return cls(vocab, merges)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def train(cls, texts, vocab_size: int = 8000, min_frequency: int = 2) -> "SubwordTokenizer":
        """Learn merges from an iterable of texts (both languages' for a joint vocabulary).

        ``vocab_size`` counts specials, characters and merges; when the characters alone are more
        (a few thousand Chinese ones), every character is kept and the vocabulary is larger."""
        return cls(*learned_model(learn_bpe(texts, vocab_size, min_frequency)))
