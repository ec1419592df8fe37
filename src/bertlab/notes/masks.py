"""The notes' two masks (file 000, "Mask": "Padding Mask", "Sequence mask"; file 002, "2 Multi-Head
Attention"): padding hidden from every query of a batch of unequal sentences, and the decoder's
lower-triangular sequence mask for "<bos> i love machine learning"."""
import torch

from ..core import attention, causal_mask, padding_mask
from . import Shown, rounded

SOURCES = [["我", "爱", "中国"], ["我", "爱", "机器", "学习"]]  # the notes' sentences, by word
TARGET = ["<bos>", "i", "love", "machine", "learning"]
NOTES_SEQUENCE_MASK = [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
PAD = "<pad>"


def masks() -> Shown:
    shown = Shown("padding mask and sequence mask",
                  "000, Mask (Padding Mask, Sequence mask); 002, Multi-Head Attention")
    width = max(map(len, SOURCES))
    batch = [s + [PAD] * (width - len(s)) for s in SOURCES]
    real = torch.tensor([[token != PAD for token in row] for row in batch], dtype=torch.long)
    pad = padding_mask(real)  # (batch, 1, 1, len): True where a key may be attended to
    shown.say("a batch padded to its longest sentence: " + " | ".join(" ".join(row) for row in batch))
    shown.compare("padding mask", "a bool tensor, False where padding is (notes 000)",
                  [[int(v) for v in row] for row in pad[:, 0, 0].tolist()])
    # what the mask does: all-zero queries and keys give equal scores; the padded key gets nothing
    zeros = torch.zeros(len(batch), 1, width, 1)  # (batch, heads, len, d_k)
    _, weights = attention(zeros, zeros, zeros, mask=pad)
    shown.compare("softmax, equal scores", "padding -> a very negative bias -> ~0 after softmax (notes 002)",
                  rounded(weights[:, 0, 0], 4))
    seq = causal_mask(len(TARGET))
    shown.compare("sequence mask", NOTES_SEQUENCE_MASK, [[int(v) for v in row] for row in seq.tolist()])
    for i, token in enumerate(TARGET):
        seen = [t for t, ok in zip(TARGET, seq[i].tolist()) if ok]
        shown.say(f"  query {token!r:<11} sees {', '.join(seen)}")
    shown.say("decoder self-attention uses both: causal_mask(n) & padding_mask(...), as the notes add the two")
    shown.values.update(padding=pad, sequence=seq, padded_weights=weights)
    return shown
