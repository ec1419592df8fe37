"""BERT's basic tokenizer: clean text, isolate CJK ideographs, split on whitespace, lower-case
and strip accents, split off punctuation. Exactly google-research/bert's ``BasicTokenizer``.

The per-character predicates below are google's, kept readable; the tokenizer itself runs on
regular-expression character classes built from them once (by scanning every code point), so
that the per-character work happens inside ``re`` and ``str`` methods written in C.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

# google's "Chinese character" ranges: the CJK Unified Ideographs blocks (not Hangul/kana).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return or any Unicode space separator (Zs)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """Control or format character (Cc, Cf), except tab/newline/CR, which count as whitespace."""
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char: str) -> bool:
    """All non-alphanumeric printable ASCII ("$", "^", "`" too) and every Unicode P* category."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _char_class(code_points: list[int]) -> str:
    """A regex character class body for sorted code points, as compact ranges."""
    parts, i = [], 0
    while i < len(code_points):
        j = i
        while j + 1 < len(code_points) and code_points[j + 1] == code_points[j] + 1:
            j += 1
        parts.append("\\U%08x" % code_points[i] if i == j
                     else "\\U%08x-\\U%08x" % (code_points[i], code_points[j]))
        i = j + 1
    return "".join(parts)


@functools.lru_cache(maxsize=None)
def char_classes() -> dict[str, str]:
    """Character classes of this Python's Unicode database, built once (~0.4 s)."""
    removed, punct, mn = [], [], []
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))
        if cat == "Cc" or cat == "Cf":
            if cp not in (9, 10, 13):
                removed.append(cp)
        elif cat[0] == "P" or 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            punct.append(cp)
        elif cat == "Mn":
            mn.append(cp)
    removed.append(0xFFFD)  # NUL is already Cc
    return {"removed": _char_class(sorted(removed)), "punct": _char_class(punct),
            "mn": _char_class(mn), "cjk": "".join("\\U%08x-\\U%08x" % r for r in CJK_RANGES)}


class BasicTokenizer:
    """Text -> basic tokens (words and punctuation), before WordPiece.

    ``split_words`` gives the whitespace-separated words (after cleaning and CJK isolation);
    ``word_to_tokens`` turns one such word into basic tokens. A word's basic tokens depend on the
    word alone -- google lower-cases each whitespace token on its own -- which is what makes a
    per-word cache exact.
    """

    def __init__(self, do_lower_case: bool = True):
        self._do_lower_case = bool(do_lower_case)
        classes = char_classes()
        self.needs_cleaning = re.compile(f"[{classes['removed']}{classes['cjk']}]").search
        self._removed = re.compile(f"[{classes['removed']}]+")
        self._has_cjk = re.compile(f"[{classes['cjk']}]").search
        self._cjk_word = re.compile(f"[{classes['cjk']}]|[^\\s{classes['cjk']}]+")
        self._punct_split = re.compile(f"[{classes['punct']}]|[^{classes['punct']}]+").findall
        self._mn = re.compile(f"[{classes['mn']}]+")

    @property
    def do_lower_case(self) -> bool:
        return self._do_lower_case

    def tokenize(self, text: str) -> list[str]:
        tokens = []
        for word in self.split_words(text):
            tokens += self.word_to_tokens(word)
        return tokens

    def split_words(self, text: str) -> list[str]:
        """Clean, isolate CJK ideographs, split on whitespace (``str.split()`` semantics)."""
        if not self.needs_cleaning(text):
            return text.split()
        text = self._removed.sub("", text)
        # Whitespace needs no mapping to " ": every Zs character is whitespace to str.split too.
        return self._cjk_word.findall(text) if self._has_cjk(text) else text.split()

    def normalize(self, word: str) -> str:
        """Lower-case and strip accents (when do_lower_case), as google does per word."""
        if not self._do_lower_case:
            return word
        word = word.lower()
        if word.isascii():
            return word
        return self._mn.sub("", unicodedata.normalize("NFD", word))

    def word_to_tokens(self, word: str) -> list[str]:
        """One whitespace-free word -> basic tokens (punctuation split off, one token per mark)."""
        return self._punct_split(self.normalize(word))

    def word_to_tokens_normalized(self, normalized_word: str) -> list[str]:
        """``word_to_tokens`` for a word already through ``normalize``."""
        return self._punct_split(normalized_word)

    def positions(self, text: str) -> list[tuple[str, list[int] | int]]:
        """The words of ``split_words`` with where they sit in ``text``.

        Each word comes with its start offset when its characters are contiguous in ``text``
        (nothing was deleted inside it), else with the list of each character's offset.
        """
        if not self.needs_cleaning(text):
            return [(m.group(), m.start()) for m in re.finditer(r"\S+", text)]
        if self._removed.search(text):
            removed = self._removed.match
            kept = [i for i, c in enumerate(text) if not removed(c)]
            cleaned = "".join(text[i] for i in kept)
        else:
            kept, cleaned = range(len(text)), text
        finder = self._cjk_word if self._has_cjk(cleaned) else re.compile(r"\S+")
        out = []
        for m in finder.finditer(cleaned):
            a, b = m.span()
            index = kept[a:b]
            out.append((m.group(), index[0] if index[-1] - index[0] == b - a - 1 else index))
        return out

    def normalize_with_spans(self, word: str) -> tuple[str, list[int], list[int]]:
        """``normalize(word)`` plus, for each output character, the span [start, end) of the
        word's characters it came from. Nonspacing marks that vanish are given to the character
        before them, so "e" + U+0301 yields one "e" spanning both."""
        norm = self.normalize(word)
        n = len(word)
        lowered = word.lower() if self._do_lower_case else word
        if norm == lowered and len(lowered) == n:  # one output character per input character
            return norm, list(range(n)), list(range(1, n + 1))
        if len(lowered) == n:
            chunks = list(lowered)
        else:  # only U+0130 lower-cases to two characters; Final_Sigma never changes a length
            chunks, pos = [], 0
            for c in word:
                k = len(c.lower())
                chunks.append(lowered[pos:pos + k])
                pos += k
        pieces, starts, ends = [], [], []
        for i, chunk in enumerate(chunks):
            piece = self._mn.sub("", unicodedata.normalize("NFD", chunk))
            pieces.append(piece)
            if piece:
                starts += [i] * len(piece)
                ends += [i + 1] * len(piece)
            elif ends:
                ends[-1] = i + 1
        if "".join(pieces) != norm:
            # Canonical reordering moved marks across characters: give every character the word.
            return norm, [0] * len(norm), [n] * len(norm)
        return norm, starts, ends
