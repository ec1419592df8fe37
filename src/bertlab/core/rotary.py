"""Rotary position embeddings (RoPE, Su et al. 2021): a position is a rotation of each pair of
query/key features, so q_i . k_j depends on i - j alone and no position table caps the length.

ModernBERT gives each kind of layer its own base: global layers a large one (slow rotations that
tell far positions apart), local layers a small one."""
import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension: the 90-degree turn of each pair."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., len, d_head) rotated by the angles whose cos and sin are (len, d_head)."""
    return (x.float() * cos + rotate_half(x.float()) * sin).to(x.dtype)


class RotaryEmbedding(nn.Module):
    """cos and sin of the angle position * base^(-2i/d_head) for each feature pair i."""

    def __init__(self, d_head: int, base: float = 10000.0):
        super().__init__()
        self.base = base
        inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor):
        """positions (len,) or (batch, len) -> cos, sin of shape (..., len, d_head)."""
        angles = positions.float()[..., None] * self.inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()
