"""Positional information: the paper's fixed sinusoids (BERT and GPT learn theirs as nn.Embedding)."""
import math

import torch
from torch import nn


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same): (max_len, d_model)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return pe


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to (batch, len, d_model) inputs, starting at position `start`."""

    def __init__(self, d_model: int, max_len: int = 4096):
        super().__init__()
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, x, start: int = 0):
        if start + x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence of {start + x.size(1)} positions exceeds max_len {self.pe.size(0)}")
        return x + self.pe[start : start + x.size(1)]
