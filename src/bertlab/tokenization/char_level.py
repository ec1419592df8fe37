"""A character-level tokenizer for tiny demos: one id per character seen in the training text."""
import json
import os

from ..io import atomic_write_text, read_json
from .vocab import MAX_VOCAB_BYTES, check_vocab_count

UNK = "\ufffd"  # characters not seen in training


class CharTokenizer:
    kind = "char"

    def __init__(self, chars):
        self.chars = [UNK] + sorted(set(chars) - {UNK})
        self.index = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, texts) -> "CharTokenizer":
        seen = set()
        for text in texts:
            seen.update(text)
        return cls(seen)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    eos_token_id = None

    def encode(self, text: str) -> list[int]:
        return [self.index.get(c, 0) for c in text]

    def decode(self, ids) -> str:
        try:
            return "".join(self.chars[int(i)] for i in ids)
        except IndexError:
            bad = next(i for i in ids if not 0 <= int(i) < len(self.chars))
            raise ValueError(f"token id {bad} is not in the vocabulary of {len(self.chars)}") from None

    def save(self, folder):
        atomic_write_text(os.path.join(folder, "chars.json"), json.dumps(self.chars, ensure_ascii=False) + "\n")

    @classmethod
    def from_folder(cls, folder) -> "CharTokenizer":
        """chars.json as save() writes it; any other list would shift every id the model learned."""
        path = os.path.join(folder, "chars.json")
        chars = read_json(path, expect=list, max_bytes=MAX_VOCAB_BYTES, what="vocabulary file")
        check_vocab_count(len(chars), path, "characters")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or cls(chars).chars != chars:
            raise ValueError(f"{path}: not a character list as gpt-train writes it ({UNK!r} first, then single "
                             "characters in sorted order, each once)")
        return cls(chars)


def load_gpt_tokenizer(folder):
    """The tokenizer saved beside a GPT: vocab.json + merges.txt (byte-level BPE) or chars.json."""
    from .bpe import ByteLevelBPETokenizer
    if os.path.exists(os.path.join(folder, "merges.txt")):
        return ByteLevelBPETokenizer.from_folder(folder)
    if os.path.exists(os.path.join(folder, "chars.json")):
        return CharTokenizer.from_folder(folder)
    raise FileNotFoundError(f"{folder}: no tokenizer (vocab.json + merges.txt, or chars.json)")
