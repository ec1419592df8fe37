"""Relative position representations inside self-attention: Shaw et al. (2018) as HF BERT learns
them (position_embedding_type "relative_key" / "relative_key_query"), and NEZHA's functional
(fixed sinusoidal) relative positions (Wei et al., 2019; notes 001, "BERT 的改进", NEZHA).

Self-attention with relative positions (Shaw et al., eq. 3-5), for query i and key j:

    e_ij = (x_i W^Q) . (x_j W^K + a^K_ij) / sqrt(d)          a^K_ij depends on the distance only
    z_i  = sum_j softmax_j(e_ij) (x_j W^V + a^V_ij)           NEZHA also adds a^V_ij to the values

Because a_ij is a function of the distance between i and j, shifting every position by the same
amount changes nothing: the model has no absolute position at all (NEZHA keeps no position table,
so it runs on sequences longer than any it saw).
"""
from typing import NamedTuple

import torch
from torch import nn

from .embeddings import sinusoidal_positions

RELATIVE_TYPES = ("relative_key", "relative_key_query", "nezha")


class RelativeTerms(NamedTuple):
    """What attention() adds for one (query length, key length): a^K (q_len, k_len, d_head) for the
    scores, a^V (or None) for the values, and whether the keys also meet a^K (relative_key_query)."""
    key: torch.Tensor
    value: torch.Tensor | None = None
    key_query: bool = False


def relative_distances(q_len: int, k_len: int, device=None) -> torch.Tensor:
    """(q_len, k_len) matrix of i - j, query position minus key position."""
    return (torch.arange(q_len, device=device)[:, None] - torch.arange(k_len, device=device)[None, :])


class LearnedRelativePositions(nn.Module):
    """Shaw et al.'s a^K_ij as HF's BertSelfAttention learns it: one d_head vector per distance
    i - j in (-max_len, max_len), shared by the heads of a layer (parameter `distance_embedding`,
    HF's name). With key_query the keys meet a^K too (HF's relative_key_query; Huang et al. 2020).
    Distances are not clipped, so a sequence may be at most max_len long."""

    def __init__(self, max_len: int, d_head: int, key_query: bool = False):
        super().__init__()
        self.max_len, self.key_query = max_len, key_query
        self.distance_embedding = nn.Embedding(2 * max_len - 1, d_head)

    def forward(self, q_len: int, k_len: int) -> RelativeTerms:
        if max(q_len, k_len) > self.max_len:
            raise ValueError(f"sequence of {max(q_len, k_len)} tokens exceeds max_position_embeddings "
                             f"{self.max_len} (learned relative positions know distances below it only)")
        index = relative_distances(q_len, k_len, self.distance_embedding.weight.device) + self.max_len - 1
        return RelativeTerms(self.distance_embedding(index), None, self.key_query)


class SinusoidalRelativePositions(nn.Module):
    """NEZHA's functional relative positions: a^K_ij = a^V_ij = the sinusoid table (the paper's
    PositionalEncoding formula) at the distance j - i clipped to [-k, k], shifted by k (row
    j - i + k, as NEZHA's released code indexes it). Fixed: no parameters, any length."""

    def __init__(self, d_head: int, max_relative_position: int = 64):
        super().__init__()
        self.k = max_relative_position
        self.register_buffer("table", sinusoidal_positions(2 * max_relative_position + 1, d_head), persistent=False)

    def forward(self, q_len: int, k_len: int) -> RelativeTerms:
        distance = -relative_distances(q_len, k_len, self.table.device)  # j - i
        embedded = self.table[distance.clamp(-self.k, self.k) + self.k]
        return RelativeTerms(embedded, embedded, False)


def make_relative_positions(kind: str, d_head: int, max_position_embeddings: int,
                            max_relative_position: int = 64) -> nn.Module | None:
    """The relative-position module of a config's position_embedding_type (None for "absolute")."""
    if kind == "absolute":
        return None
    if kind in ("relative_key", "relative_key_query"):
        return LearnedRelativePositions(max_position_embeddings, d_head, key_query=kind == "relative_key_query")
    if kind == "nezha":
        return SinusoidalRelativePositions(d_head, max_relative_position)
    raise ValueError(f"unknown position_embedding_type {kind!r}; choose absolute or one of {RELATIVE_TYPES}")


def relative_scores(query, key, terms: RelativeTerms, scale: float):
    """The scores' relative part, (..., q_len, k_len): q_i . a^K_ij (query already scaled), plus
    k_j . a^K_ij * scale for relative_key_query."""
    scores = torch.einsum("bhqd,qkd->bhqk", query, terms.key.to(query.dtype))
    if terms.key_query:
        scores = scores + torch.einsum("bhkd,qkd->bhqk", key, terms.key.to(key.dtype)) * scale
    return scores
