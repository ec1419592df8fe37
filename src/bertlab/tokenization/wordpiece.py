"""WordPiece: greedy longest-match-first segmentation of one word into vocabulary pieces."""

from __future__ import annotations

from collections.abc import Mapping

from .vocab import UNK


class WordpieceTokenizer:
    """Splits words into pieces: "unaffable" -> ["un", "##aff", "##able"].

    A word with no complete segmentation, or longer than ``max_input_chars_per_word``
    characters, becomes a single ``unk_token``.
    """

    def __init__(self, vocab: Mapping[str, int], unk_token: str = UNK,
                 max_input_chars_per_word: int = 100):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No piece is longer than the longest vocabulary entry, so the search can start there;
        # this only skips substrings that cannot match, so the result is unchanged.
        self._longest = max((len(t) for t in vocab), default=0)

    def tokenize(self, text: str) -> list[str]:
        """Whitespace-split ``text`` (already through BasicTokenizer) and segment every word."""
        pieces: list[str] = []
        for word in text.split():
            pieces += self.split_word(word) or [self.unk_token]
        return pieces

    def split_word(self, word: str) -> list[str] | None:
        """The pieces of one word, or None when it has to become the unknown token."""
        n = len(word)
        if n > self.max_input_chars_per_word:
            return None
        vocab, longest = self.vocab, self._longest
        pieces, start = [], 0
        while start < n:
            end = min(n, start + longest)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return None
            pieces.append(piece)
            start = end
        return pieces
