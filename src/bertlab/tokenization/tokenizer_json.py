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
        for piece, token in _split(text, self._raw):
            if token is not None:
                ids.append(token)
                continue
            for part, added in _split(self._normalize(piece), self._normalized):
                ids += [added] if added is not None else self._pre_tokenized(part)
        return ids

    def _normalize(self, text):
        for form in self.normalizers:
            text = unicodedata.normalize(form, text)
        return text

    def _pre_tokenized(self, text) -> list[int]:
        if not text:
            return []
        if self.prefix_space and not text.startswith(" "):
            text = " " + text
        ids = []
        for word in PATTERN.findall(text) if self.use_regex else [text]:
            symbols = "".join(self.bpe.byte_encoder[b] for b in word.encode("utf-8"))
            if self.ignore_merges and symbols in self.bpe.vocab:
                ids.append(self.bpe.vocab[symbols])
            else:
                ids += self.bpe._bpe(symbols)
        return ids

    def with_template(self, ids: list[int]) -> list[int]:
        """[CLS] ids [SEP], or what the post-processor's single template says."""
        out = []
        for item in self.template:
            out += ids if item is None else [item]
        return out

    def tokenize_ids_batch(self, texts) -> list[list[int]]:
        return [self.with_template(self.encode(t)) for t in texts]

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
    """(piece, None) for the text between added tokens and ("", id) for each added token."""
    if pattern is None:
        return [(text, None)] if text else []
    out, start = [], 0
    for m in pattern.finditer(text):
        if m.start() > start:
            out.append((text[start:m.start()], None))
        out.append(("", int(m.lastgroup[1:])))
        start = m.end()
    if start < len(text):
        out.append((text[start:], None))
    return out
