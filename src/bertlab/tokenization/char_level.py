"""A character-level tokenizer for tiny demos: one id per character seen in the training text."""
import json
import os

from ..io import atomic_write_text, read_json

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
        return "".join(self.chars[int(i)] for i in ids)

    def save(self, folder):
        atomic_write_text(os.path.join(folder, "chars.json"), json.dumps(self.chars, ensure_ascii=False) + "\n")

    @classmethod
    def from_folder(cls, folder) -> "CharTokenizer":
        return cls(read_json(os.path.join(folder, "chars.json"), expect=list))


def load_gpt_tokenizer(folder):
    """The tokenizer saved beside a GPT: vocab.json + merges.txt (byte-level BPE) or chars.json."""
    from .bpe import ByteLevelBPETokenizer
    if os.path.exists(os.path.join(folder, "merges.txt")):
        return ByteLevelBPETokenizer.from_folder(folder)
    if os.path.exists(os.path.join(folder, "chars.json")):
        return CharTokenizer.from_folder(folder)
    raise FileNotFoundError(f"{folder}: no tokenizer (vocab.json + merges.txt, or chars.json)")
