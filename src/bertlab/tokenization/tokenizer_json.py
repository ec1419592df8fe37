"""A byte-level BPE saved as HF `tokenizers`' tokenizer.json (ModernBERT's, RoBERTa's): read with
our own code and encoded token for token as `tokenizers` does.

The BPE itself is bpe.py's (GPT-2's byte symbols, pre-tokenization pattern and merges by rank);
tokenizer.json adds around it, in the order `tokenizers` runs them:
1. added tokens matched in the raw text (those not `normalized`, e.g. [CLS], [MASK]), longest
   first at each place, `lstrip`/`rstrip` taking the whitespace beside them;
2. the normalizer (Unicode NFC/NFKC/NFD/NFKD) on the text between them, then the added tokens
   that are matched in normalized text (ModernBERT's runs of spaces);
3. ByteLevel pre-tokenization (an optional prefix space, GPT-2's pattern) and the merges;
4. the post-processor's template: [CLS] $A [SEP].
"""
import json
import os
import unicodedata

import regex

from ..io import atomic_write_text, read_json
from .bpe import PATTERN, ByteLevelBPETokenizer
from .vocab import MAX_VOCAB_BYTES

NORMALIZERS = ("NFC", "NFKC", "NFD", "NFKD")


class TokenizerJson:
    kind = "bpe"

    def __init__(self, spec: dict, source="tokenizer.json"):
        self.spec, self.source = spec, source
        model = spec.get("model") or {}
        if model.get("type") != "BPE":
            raise ValueError(f"{source}: model type {model.get('type')!r}; bertlab reads byte-level BPE tokenizer.json")
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self.added = sorted(spec.get("added_tokens") or [], key=lambda t: -len(t["content"]))
        vocab = dict(model.get("vocab") or {})
        vocab.update({t["content"]: t["id"] for t in self.added})
        self.bpe = ByteLevelBPETokenizer(vocab, merges, special_tokens=())
        self.normalizers = _normalizers(spec.get("normalizer"), source)
        self.prefix_space, self.use_regex = _byte_level(spec.get("pre_tokenizer"), source)
        self.template = _template(spec.get("post_processor"), source)
        self._raw = _added_pattern([t for t in self.added if not t.get("normalized", False)])
        self._normalized = _added_pattern([t for t in self.added if t.get("normalized", False)])
        self._ids = {t["content"]: t["id"] for t in self.added}
        self.special_ids = {t["id"] for t in self.added if t.get("special")}

    @classmethod
    def from_file(cls, path) -> "TokenizerJson":
        spec = read_json(path, max_bytes=MAX_VOCAB_BYTES, what="tokenizer file")
        if not isinstance(spec, dict):
            raise ValueError(f"{path}: holds a {type(spec).__name__}, not a tokenizer.json object")
        return cls(spec, path)

    def save(self, folder):
        """tokenizer.json as read (every setting kept), written atomically."""
        atomic_write_text(os.path.join(folder, "tokenizer.json"), json.dumps(self.spec, ensure_ascii=False) + "\n")

    # the ids the commands ask for by role
    def _id(self, *names):
        return next((self._ids[n] for n in names if n in self._ids), None)

    @property
    def cls_token_id(self):
        return self._id("[CLS]", "<s>")

    @property
    def sep_token_id(self):
        return self._id("[SEP]", "</s>")

    @property
    def pad_token_id(self):
        return self._id("[PAD]", "<pad>", "<|padding|>")

    @property
    def mask_token_id(self):
        return self._id("[MASK]", "<mask>")

    @property
    def unk_token_id(self):
        return self._id("[UNK]", "<unk>")

    @property
    def vocab_size(self) -> int:
        return self.bpe.vocab_size

    def encode(self, text: str) -> list[int]:
        """The ids of `text`, without the template's [CLS]/[SEP]."""
        ids = []
        for _, _, piece, token in _split(text, self._raw):
            if token is not None:
                ids.append(token)
                continue
            for _, _, part, added in _split(self._normalize(piece), self._normalized):
                ids += [added] if added is not None else self._pre_tokenized(part)
        return ids

    # what the commands written for BERT's tokenizer call (fine-tuning's tasks, fill-mask)
    def tokenize_ids(self, text: str) -> list[int]:
        return self.encode(text)

    def tokenize_ids_batch(self, texts, add_special_tokens: bool = True) -> list[list[int]]:
        """The ids of every text, in the template ([CLS] ... [SEP]) when add_special_tokens."""
        return [self.with_template(self.encode(t)) if add_special_tokens else self.encode(t) for t in texts]

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of `text` (no template) and each token's (start, end) in `text`, the space a
        byte-level token carries before its word left out (as RoBERTa's trim_offsets does), so an
        answer span or a word's text is the characters themselves."""
        tokens = self.tokenize_with_words(text)
        return [t[0] for t in tokens], [(t[2], t[3]) for t in tokens]

    def tokenize_with_words(self, text: str) -> list[tuple[int, int, int, int]]:
        """(token id, word number, start, end) of each token of `text`: the same ids as `encode`,
        a word being one piece of the ByteLevel pre-tokenizer (or one added token), and
        text[start:end] the characters the token came from, without the space before its word."""
        out, words = [], 0
        for start, end, piece, token in _split(text, self._raw):
            if token is not None:
                out.append((token, words, start, end))
                words += 1
                continue
            normalized, where = _normalize_with_map(piece, self.normalizers)
            for n_start, n_end, part, added in _split(normalized, self._normalized):
                spans = [(added, 0, 0, n_end - n_start)] if added is not None else self._pre_tokenized_spans(part)
                for token_id, word, s, e in spans:
                    if e > s:
                        s, e = _trim(text, start + where[n_start + s][0], start + where[n_start + e - 1][1])
                    else:  # no characters of its own: the prefix space added before a word
                        s = e = start + where[n_start + s][0]
                    out.append((token_id, words + word, s, e))
                words += 1 + max((w for _, w, _, _ in spans), default=-1)
        return out

    def _pre_tokenized_spans(self, text) -> list[tuple[int, int, int, int]]:
        """(id, word, start, end) in `text` of `_pre_tokenized(text)`'s tokens: each token's bytes
        counted back to the characters they encode."""
        shift = 1 if self.prefix_space and text and not text.startswith(" ") else 0
        text = " " * shift + text
        out = []
        for word, match in enumerate(PATTERN.finditer(text) if self.use_regex else [regex.match(r".*", text, regex.S)]):
            piece = match.group()
            char_of_byte = [i for i, c in enumerate(piece) for _ in c.encode("utf-8")]
            byte = 0
            for token_id in self._pre_tokenized_word(piece):
                n = len(self.bpe.inverse[token_id])  # one byte symbol per byte
                s, e = match.start() + char_of_byte[byte], match.start() + char_of_byte[byte + n - 1] + 1
                out.append((token_id, word, max(s - shift, 0), max(e - shift, 0)))
                byte += n
        return out

    def _normalize(self, text):
        return _normalized(text, self.normalizers)

    def _pre_tokenized(self, text) -> list[int]:
        if not text:
            return []
        if self.prefix_space and not text.startswith(" "):
            text = " " + text
        ids = []
        for word in PATTERN.findall(text) if self.use_regex else [text]:
            ids += self._pre_tokenized_word(word)
        return ids

    def _pre_tokenized_word(self, word) -> list[int]:
        symbols = "".join(self.bpe.byte_encoder[b] for b in word.encode("utf-8"))
        if self.ignore_merges and symbols in self.bpe.vocab:
            return [self.bpe.vocab[symbols]]
        return self.bpe._bpe(symbols)

    def with_template(self, ids: list[int]) -> list[int]:
        """[CLS] ids [SEP], or what the post-processor's single template says."""
        out = []
        for item in self.template:
            out += ids if item is None else [item]
        return out

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self.bpe.inverse[int(i)] for i in ids]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Text of the ids (byte symbols back to UTF-8; added tokens as written)."""
        out, run = [], []
        for i in ids:
            i = int(i)
            if i in self.special_ids and skip_special_tokens:
                continue
            token = self.bpe.inverse.get(i)
            if token is None:
                raise ValueError(f"token id {i} is not in the vocabulary of {self.vocab_size}")
            if token in self._ids:
                out.append(self.bpe.decode(run)) if run else None
                out.append(token)
                run = []
            else:
                run.append(i)
        if run:
            out.append(self.bpe.decode(run))
        return "".join(out)


def _normalizers(spec, source) -> list[str]:
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        return [form for part in spec.get("normalizers", []) for form in _normalizers(part, source)]
    if spec.get("type") in NORMALIZERS:
        return [spec["type"]]
    raise ValueError(f"{source}: normalizer {spec.get('type')!r} is not read (only {NORMALIZERS} and Sequences of them)")


def _byte_level(spec, source) -> tuple[bool, bool]:
    if spec is None or spec.get("type") != "ByteLevel":
        raise ValueError(f"{source}: pre_tokenizer {None if spec is None else spec.get('type')!r}; "
                         "a byte-level BPE's is ByteLevel")
    return bool(spec.get("add_prefix_space", False)), bool(spec.get("use_regex", True))


def _template(spec, source) -> list:
    """The single-sequence template as a list of ids, None where the text goes."""
    if spec is None:
        return [None]
    if spec.get("type") != "TemplateProcessing":
        raise ValueError(f"{source}: post_processor {spec.get('type')!r} is not read (only TemplateProcessing)")
    specials = {name: token["ids"] for name, token in (spec.get("special_tokens") or {}).items()}
    out = []
    for item in spec.get("single", []):
        if "Sequence" in item:
            out.append(None)
        else:
            out += specials[item["SpecialToken"]["id"]]
    return out


def _added_pattern(tokens):
    """One regex for the added tokens, longest first (so the longest match wins at each place);
    lstrip / rstrip take the whitespace before / after into the match."""
    if not tokens:
        return None
    alternatives = []
    for t in tokens:
        body = regex.escape(t["content"])
        if t.get("single_word"):
            body = r"(?<![\w])" + body + r"(?![\w])"
        alternatives.append((r"\s*" if t.get("lstrip") else "") + f"(?P<t{t['id']}>{body})"
                            + (r"\s*" if t.get("rstrip") else ""))
    return regex.compile("|".join(alternatives))


def _split(text, pattern):
    """(start, end, piece, None) for the text between added tokens and (start, end, "", id) for
    each added token (start, end: where the token itself stands, without what lstrip/rstrip took)."""
    if pattern is None:
        return [(0, len(text), text, None)] if text else []
    out, start = [], 0
    for m in pattern.finditer(text):
        if m.start() > start:
            out.append((start, m.start(), text[start:m.start()], None))
        out.append((m.start(m.lastgroup), m.end(m.lastgroup), "", int(m.lastgroup[1:])))
        start = m.end()
    if start < len(text):
        out.append((start, len(text), text[start:], None))
    return out


def _normalized(text, forms):
    for form in forms:
        text = unicodedata.normalize(form, text)
    return text


def _normalize_with_map(text, forms) -> tuple[str, list[tuple[int, int]]]:
    """(text normalized by `forms`, for each of its characters the (start, end) in `text` it came
    from). Normalization composes or decomposes a character with the marks after it, so each
    starter and its combining marks are normalized as one group and map to the whole group; where
    that would differ from normalizing the whole text (a rare composition across groups), every
    character maps to the whole text."""
    whole = _normalized(text, forms)
    if whole == text:
        return text, [(i, i + 1) for i in range(len(text))]
    groups, where, out = [], [], []
    for i, c in enumerate(text):
        if groups and unicodedata.combining(c):
            groups[-1][1] = i + 1
        else:
            groups.append([i, i + 1])
    for start, end in groups:
        part = _normalized(text[start:end], forms)
        out.append(part)
        where += [(start, end)] * len(part)
    if "".join(out) != whole:
        return whole, [(0, len(text))] * len(whole)
    return whole, where


def _trim(text, start, end) -> tuple[int, int]:
    """(start, end) without the whitespace at either side, unless the token is whitespace alone."""
    piece = text[start:end]
    if not piece.strip():
        return start, end
    return start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())
