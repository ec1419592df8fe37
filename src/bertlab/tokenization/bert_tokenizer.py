"""BertTokenizer: google-research/bert's FullTokenizer (basic tokenizer + WordPiece), exact, fast
and with character offsets, plus the [CLS] A [SEP] B [SEP] input layout.

Speed comes from a per-word cache. google lower-cases, strips accents, splits punctuation and
runs WordPiece on each whitespace-separated word on its own, so a word's ids depend only on the
word; real text is Zipfian, so after the first few thousand lines almost every word is a
dictionary hit. The per-character work that remains (finding control characters and CJK
ideographs, splitting on whitespace) runs inside ``re``/``str`` methods written in C.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path

from .basic import BasicTokenizer
from .encoding import PADDING, BatchEncoding, Encoding, Offset, pad_batch, truncate_seq_pair
from .vocab import CLS, MASK, PAD, SEP, UNK, Vocab
from .wordpiece import WordpieceTokenizer
from ..io import atomic_write_text, read_json

VOCAB_FILE, CONFIG_FILE = "vocab.txt", "tokenizer_config.json"


# tokenizer_config.json's fields as HF and bertlab write them. A field of another type is refused
# naming the file and the field: "do_lower_case": "no" would otherwise read as true (a non-empty
# string), and a never_split of a string would add each of its characters as a special token.
# A special token may be a string or HF's AddedToken object; unknown fields are left alone.
CONFIG_FIELDS = {"do_lower_case": bool, "model_max_length": int, "max_len": int, "tokenize_chinese_chars": bool,
                 "strip_accents": (bool, type(None)), "never_split": (list, type(None)),
                 "do_basic_tokenize": bool, "clean_up_tokenization_spaces": bool, "padding_side": str,
                 "truncation_side": str, "tokenizer_class": (str, type(None)),
                 **{name: (str, dict, type(None)) for name in ("unk_token", "sep_token", "pad_token", "cls_token",
                                                               "mask_token", "bos_token", "eos_token")}}


def tokenizer_config(folder: str | os.PathLike) -> dict:
    """The folder's tokenizer_config.json ({} when it has none), its fields typed (CONFIG_FIELDS); a
    garbled one, or a field of the wrong type, is an error naming the file and the field."""
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.exists(path):
        return {}
    settings = read_json(path, fields=CONFIG_FIELDS)
    for name in ("model_max_length", "max_len"):
        if name in settings and settings[name] < 1:
            raise ValueError(f"{path}: {name} {settings[name]}: must be at least 1")
    bad = next((t for t in settings.get("never_split") or [] if not isinstance(t, str) or not t.strip()
                or t != t.strip() or any(c.isspace() for c in t)), None)
    if bad is not None:
        raise ValueError(f"{path}: never_split holds {bad!r}; it must be a list of tokens (non-empty strings "
                         "without whitespace)")
    return settings


class BertTokenizer:
    """WordPiece tokenizer identical to google-research/bert's ``tokenization.FullTokenizer``.

    ``vocab`` is a path to ``vocab.txt``, a ``Vocab``, or a token -> id mapping (ids 0..n-1).
    Settings are read-only because the word cache depends on them.
    """

    def __init__(self, vocab: str | os.PathLike | Vocab | Mapping[str, int],
                 do_lower_case: bool = True, *, max_input_chars_per_word: int = 100,
                 cache_size: int = 1 << 20, never_split: Sequence[str] = (), model_max_length: int | None = None):
        # the most tokens the checkpoint is meant to read (a sentence-transformers model's own
        # max_seq_length); embed_texts truncates there unless told otherwise
        self.model_max_length = model_max_length
        if isinstance(vocab, Vocab):
            self._vocab = vocab
        elif isinstance(vocab, Mapping):
            self._vocab = Vocab.from_dict(vocab)
        else:
            self._vocab = Vocab.load(vocab)
        self._basic = BasicTokenizer(do_lower_case)
        self._wordpiece = WordpieceTokenizer(self._vocab.token_to_id, UNK, max_input_chars_per_word)
        self._cache_size = cache_size
        self._ids_cache: dict[str, list[int]] = {}
        self._spans_cache: dict[str, tuple[list[int], list[int], list[int]]] = {}
        self._never_split: list[str] = []
        self._never_split_re = None
        if never_split:
            self.add_special_tokens(never_split)

    # -- construction and saving ------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, do_lower_case: bool | None = None,
                        **kwargs) -> "BertTokenizer":
        """Read ``folder/vocab.txt`` and, if present, ``do_lower_case`` from
        ``folder/tokenizer_config.json``; an explicit ``do_lower_case`` wins; default True."""
        folder = Path(folder)
        settings = tokenizer_config(folder)
        if do_lower_case is None:
            do_lower_case = settings.get("do_lower_case", True)
        return cls(folder / VOCAB_FILE, do_lower_case, never_split=settings.get("never_split", []), **kwargs)

    def tokenizer_json(self) -> dict:
        """This tokenizer in the `tokenizers` library's tokenizer.json format (WordPiece model, BERT
        normalizer and pre-tokenizer, [CLS] A [SEP] B [SEP] template): what transformers 5's
        AutoTokenizer needs to read a ModernBERT folder, which it will not read from vocab.txt."""
        vocab = self._vocab.token_to_id
        specials = [t for t in (PAD, UNK, CLS, SEP, MASK, *self._never_split) if t in vocab]
        added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for t in dict.fromkeys(specials)]

        def special(token, type_id):
            return {"SpecialToken": {"id": token, "type_id": type_id}}

        def sequence(name, type_id):
            return {"Sequence": {"id": name, "type_id": type_id}}
        lower = self._basic.do_lower_case
        return {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                           "strip_accents": None, "lowercase": lower},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [special(CLS, 0), sequence("A", 0), special(SEP, 0)],
                "pair": [special(CLS, 0), sequence("A", 0), special(SEP, 0), sequence("B", 1), special(SEP, 1)],
                "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in (CLS, SEP)}},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": UNK, "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": self._wordpiece.max_input_chars_per_word, "vocab": vocab},
        }

    def save_pretrained(self, folder: str | os.PathLike) -> None:
        """Write ``vocab.txt`` and set ``do_lower_case`` in ``tokenizer_config.json`` (other keys
        already in that file are kept)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._vocab.save(folder / VOCAB_FILE)
        settings = tokenizer_config(folder)
        settings["do_lower_case"] = self.do_lower_case
        if self._never_split:
            settings["never_split"] = self._never_split
        atomic_write_text(folder / CONFIG_FILE, json.dumps(settings, indent=2) + "\n")

    @property
    def vocab(self) -> Vocab:
        return self._vocab

    @property
    def do_lower_case(self) -> bool:
        return self._basic.do_lower_case

    @property
    def basic_tokenizer(self) -> BasicTokenizer:
        return self._basic

    @property
    def wordpiece_tokenizer(self) -> WordpieceTokenizer:
        return self._wordpiece

    def __len__(self) -> int:
        return len(self._vocab)

    def __repr__(self) -> str:
        return f"BertTokenizer({self._vocab!r}, do_lower_case={self.do_lower_case})"

    # Special token ids; each raises a ValueError naming the vocab file when the token is missing.
    @property
    def unk_token_id(self) -> int:
        return self._vocab.special_id(UNK, "a word that WordPiece cannot split")

    @property
    def cls_token_id(self) -> int:
        return self._vocab.special_id(CLS, "encoding with special tokens")

    @property
    def sep_token_id(self) -> int:
        return self._vocab.special_id(SEP, "encoding with special tokens")

    @property
    def pad_token_id(self) -> int:
        return self._vocab.special_id(PAD, "padding")

    @property
    def mask_token_id(self) -> int:
        return self._vocab.special_id(MASK, "masking")

    def add_special_tokens(self, tokens: Sequence[str]) -> int:
        """Tokens never split, lower-cased or broken into pieces, wherever they stand in the text
        (e.g. entity markers [S-PER] [E-PER] for relation extraction). Tokens the vocabulary lacks
        are appended to it; returns how many were appended (the model's embedding table must grow
        by as many rows)."""
        import re
        added = 0
        for token in tokens:
            if not token or token != token.strip() or any(c.isspace() for c in token):
                raise ValueError(f"special token {token!r}: must be non-empty and contain no whitespace")
            if token not in self._vocab.token_to_id:
                self._vocab.token_to_id[token] = len(self._vocab.id_to_token)
                self._vocab.id_to_token.append(token)
                added += 1
            if token not in self._never_split:
                self._never_split.append(token)
        longest_first = sorted(self._never_split, key=len, reverse=True)
        self._never_split_re = re.compile("|".join(map(re.escape, longest_first)))
        self.clear_cache()
        return added

    @property
    def special_tokens(self) -> list[str]:
        """The tokens added with add_special_tokens (never split)."""
        return list(self._never_split)

    def _segments(self, word: str):
        """(segment, start, is_special): the word cut around its never-split tokens."""
        pos = 0
        for m in self._never_split_re.finditer(word):
            if m.start() > pos:
                yield word[pos:m.start()], pos, False
            yield m.group(), m.start(), True
            pos = m.end()
        if pos < len(word):
            yield word[pos:], pos, False

    def _has_special(self, word: str) -> bool:
        return self._never_split_re is not None and self._never_split_re.search(word) is not None

    def clear_cache(self) -> None:
        """Forget the cached words (only useful to measure the cold-cache speed)."""
        self._ids_cache.clear()
        self._spans_cache.clear()

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return self._vocab.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return self._vocab.convert_ids_to_tokens(ids)

    # -- text -> tokens / ids ---------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of ``text``, exactly as google's ``FullTokenizer.tokenize``."""
        tokens: list[str] = []
        for word in self._basic.split_words(text):
            segments = self._segments(word) if self._has_special(word) else [(word, 0, False)]
            for segment, _, special in segments:
                if special:
                    tokens.append(segment)
                    continue
                for basic_token in self._basic.word_to_tokens(segment):
                    tokens += self._wordpiece.split_word(basic_token) or [UNK]
        return tokens

    def _word_ids(self, word: str) -> list[int]:
        """Ids of one whitespace-separated word (cache miss)."""
        ids: list[int] = []
        token_to_id = self._vocab.token_to_id
        if self._has_special(word):
            for segment, _, special in self._segments(word):
                ids += [token_to_id[segment]] if special else self._word_ids(segment)
            self._ids_cache[word] = ids
            return ids
        for basic_token in self._basic.word_to_tokens(word):
            pieces = self._wordpiece.split_word(basic_token)
            if pieces is None:
                ids.append(self.unk_token_id)
            else:
                ids += [token_to_id[p] for p in pieces]
        if len(self._ids_cache) >= self._cache_size:
            self._ids_cache.clear()
        self._ids_cache[word] = ids
        return ids

    def tokenize_ids(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens."""
        return self.tokenize_ids_batch([text], add_special_tokens=False)[0]

    def tokenize_ids_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[list[int]]:
        """The fast bulk path: ids of every text, with ``[CLS] ... [SEP]`` around each one when
        ``add_special_tokens`` (the default, the same ids as ``encode_batch``'s ``input_ids``),
        without truncation or padding."""
        cached, miss = self._ids_cache.get, self._word_ids
        needs_cleaning, split_words = self._basic.needs_cleaning, self._basic.split_words
        head, tail = ([self.cls_token_id], [self.sep_token_id]) if add_special_tokens else ([], [])
        out = []
        for text in texts:
            words = split_words(text) if needs_cleaning(text) else text.split()
            pieces = list(map(cached, words))
            if None in pieces:
                pieces = [p if p is not None else miss(w) for p, w in zip(pieces, words)]
            out.append([*head, *chain.from_iterable(pieces), *tail])
        return out

    def _word_spans(self, word: str) -> tuple[list[int], list[int], list[int]]:
        """Ids of one word with each token's [start, end) in the word's characters (cache miss)."""
        if self._has_special(word):
            ids, starts, ends = [], [], []
            for segment, at, special in self._segments(word):
                if special:
                    ids.append(self._vocab.token_to_id[segment]), starts.append(at), ends.append(at + len(segment))
                    continue
                seg_ids, seg_starts, seg_ends = self._word_spans(segment)
                ids += seg_ids
                starts += [at + x for x in seg_starts]
                ends += [at + x for x in seg_ends]
            self._spans_cache[word] = result = (ids, starts, ends)
            return result
        norm, char_starts, char_ends = self._basic.normalize_with_spans(word)
        token_to_id = self._vocab.token_to_id
        ids, starts, ends = [], [], []
        pos = 0
        for basic_token in self._basic.word_to_tokens_normalized(norm):
            pieces = self._wordpiece.split_word(basic_token)
            if pieces is None:
                ids.append(self.unk_token_id)
                starts.append(char_starts[pos])
                ends.append(char_ends[pos + len(basic_token) - 1])
            else:
                p = pos
                for j, piece in enumerate(pieces):
                    n = len(piece) - 2 if j else len(piece)
                    ids.append(token_to_id[piece])
                    starts.append(char_starts[p])
                    ends.append(char_ends[p + n - 1])
                    p += n
            pos += len(basic_token)
        if len(self._spans_cache) >= self._cache_size:
            self._spans_cache.clear()
        self._spans_cache[word] = result = (ids, starts, ends)
        return result

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` (no special tokens) and each token's ``(start, end)`` in ``text``:
        ``text[start:end]`` holds exactly the original characters the token came from (accents
        and deleted control characters inside a word included)."""
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        cache = self._spans_cache
        for word, where in self._basic.positions(text):
            word_ids, starts, ends = cache.get(word) or self._word_spans(word)
            ids += word_ids
            if isinstance(where, int):
                offsets += [(where + s, where + e) for s, e in zip(starts, ends)]
            else:
                offsets += [(where[s], where[e - 1] + 1) for s, e in zip(starts, ends)]
        return ids, offsets

    # -- model inputs -----------------------------------------------------------------------

    def encode(self, text: str, pair: str | None = None, *, max_length: int | None = None,
               padding: str = "none", return_offsets: bool = False) -> Encoding:
        """One example; see ``encode_batch``."""
        return self.encode_batch([text], None if pair is None else [pair], max_length=max_length,
                                 padding=padding, return_offsets=return_offsets)[0]

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None, *,
                     max_length: int | None = None, padding: str | bool = "none",
                     return_offsets: bool = False) -> BatchEncoding:
        """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` for every text (and pair).

        ``max_length`` truncates: a single text to ``max_length - 2`` tokens, a pair longest
        first (``truncate_seq_pair``) to ``max_length - 3``. ``padding``: "none", "longest"
        (True) or "max_length", with ``[PAD]`` on the right. ``return_offsets`` adds ``offsets``
        and ``sequence_ids`` (see ``bertlab.tokenization.encoding``).
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of texts; use encode() for one text")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        padding = {True: "longest", False: "none", None: "none"}.get(padding, padding)
        if padding not in PADDING:
            raise ValueError(f"padding must be one of {PADDING}, not {padding!r}")
        if padding == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length")
        n_special = 2 if pairs is None else 3
        if max_length is not None and max_length < n_special:
            raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
        cls_id, sep_id = self.cls_token_id, self.sep_token_id
        a_ids, a_offsets = self._pieces(texts, return_offsets)
        if pairs is not None:
            b_ids, b_offsets = self._pieces(pairs, return_offsets)
        batch = BatchEncoding([], [], [], [] if return_offsets else None,
                              [] if return_offsets else None)
        for i, a in enumerate(a_ids):
            b = None if pairs is None else b_ids[i]
            if max_length is not None:
                if b is not None:
                    truncate_seq_pair(a, b, max_length - 3)
                else:
                    del a[max_length - 2:]
            if b is None:
                ids = [cls_id, *a, sep_id]
                types = [0] * len(ids)
            else:
                ids = [cls_id, *a, sep_id, *b, sep_id]
                types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            batch.input_ids.append(ids)
            batch.token_type_ids.append(types)
            batch.attention_mask.append([1] * len(ids))
            if return_offsets:
                offsets: list[Offset] = [None, *a_offsets[i][:len(a)], None]
                sequence_ids = [None, *[0] * len(a), None]
                if b is not None:
                    offsets += [*b_offsets[i][:len(b)], None]
                    sequence_ids += [*[1] * len(b), None]
                batch.offsets.append(offsets)
                batch.sequence_ids.append(sequence_ids)
        if padding != "none" and batch.input_ids:
            length = max_length if padding == "max_length" else max(map(len, batch.input_ids))
            pad_batch(batch, length, self.pad_token_id)
        return batch

    __call__ = encode_batch

    def _pieces(self, texts: Sequence[str], with_offsets: bool
                ) -> tuple[list[list[int]], list[list[tuple[int, int]]] | None]:
        if not with_offsets:
            return self.tokenize_ids_batch(texts, add_special_tokens=False), None
        both = [self.tokenize_with_offsets(text) for text in texts]
        return [ids for ids, _ in both], [offsets for _, offsets in both]
