"""Scaled dot-product attention and multi-head attention, shared by BERT, the Transformer and GPT.

These are the notes' formulas as they read. The CPU speed paths (Q, K and V as one matmul, the
padding packed away, rows of similar length attended together, numpy's dropout masks) are
core.fast_paths.attention's, swapped in by models.accelerate.accelerate(model)."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .kv_cache import KVCache
from .masks import CAUSAL, causal_mask
from .relative_positions import RelativeTerms, relative_scores


def attention(query, key, value, mask=None, dropout_p=0.0, relative: RelativeTerms | None = None, dropout=None):
    """The notes' formula, softmax(Q K^T / sqrt(d_k) + M) V over (..., len, d_k) tensors, and the
    probabilities (before dropout). M is 0 where `mask` is True (allowed), very negative elsewhere.

    relative (core.relative_positions): Shaw et al.'s relative positions, q_i . a^K_ij / sqrt(d_k)
    added to the scores and, where given, sum_j p_ij a^V_ij to the output (NEZHA).
    dropout(x, p): the dropout drawn on the probabilities, F.dropout unless given (the fast paths
    draw it with numpy)."""
    scale = 1.0 / math.sqrt(query.size(-1))
    # scaling Q rather than the scores: len x d_k multiplications instead of len x len
    query = query * scale
    scores = query @ key.transpose(-2, -1)
    if relative is not None:
        scores = scores + relative_scores(query, key, relative, scale)
    if mask is not None:
        scores = scores + additive_mask(mask, scores)
    weights = scores.softmax(dim=-1)
    dropped = (dropout or F.dropout)(weights, dropout_p) if dropout_p else weights
    out = dropped @ value
    if relative is not None and relative.value is not None:
        out = out + torch.einsum("bhqk,qkd->bhqd", dropped, relative.value.to(dropped.dtype))
    return out, weights


def additive_mask(mask, scores):
    """M of the formula for a boolean `mask`, in the dtype of `scores` (a floating mask is M already). A large finite
    negative rather than -inf: a query allowed no key at all (e.g. a left-padded position under a causal mask)
    averages the values instead of spreading NaN, as HF's does."""
    if mask.is_floating_point():
        return mask.to(scores.dtype)
    # one pass over the mask (zeros, ~mask, then masked_fill_ made three)
    return torch.where(mask, scores.new_zeros(()), torch.finfo(scores.dtype).min)


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, need_weights=False,
                                 relative: RelativeTerms | None = None, dropout=None):
    """`attention`, through PyTorch's fused kernel where that is faster: (output, probabilities or None).

    Without dropout, and on GPUs also with it, the fused kernel is the fast path (on an H100 the
    plain formula cost a sixth of a bf16 BERT-base pretraining step: 60 -> 50 ms). With dropout on
    a CPU no fused kernel applies, and the plain formula with numpy's dropout (`dropout`, which the
    fast paths pass) is cheaper than PyTorch's own fallback (which scales Q and K apart and guards
    every row against being fully masked): 15-20% less time for attention forward + backward at
    BERT sizes, measured. `need_weights=True` also returns the probabilities (batch, heads,
    query_len, key_len). mask may be core.masks.CAUSAL: a whole sequence's causal mask, which the
    fused kernel applies itself (is_causal) and the plain formula builds. Relative positions
    (`relative`) take the plain formula: the fused kernel has no place for them.
    """
    causal = mask is CAUSAL
    if relative is None and not need_weights and (not dropout_p or query.device.type != "cpu"):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=None if causal else mask,
                                              dropout_p=dropout_p, is_causal=causal), None
    if causal:
        mask = causal_mask(query.size(-2), key.size(-2), query.device)
    out, weights = attention(query, key, value, mask, dropout_p, relative, dropout)
    return out, weights if need_weights else None


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention over learned projections, concatenated, projected.

    Parameter names (query/key/value/output) follow the BERT checkpoint so loading is a name table.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 relative_positions: nn.Module | None = None):
        """relative_positions (core.relative_positions): self-attention with relative positions."""
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.num_heads, self.d_head, self.dropout = num_heads, d_model // num_heads, dropout
        self.query = nn.Linear(d_model, d_model, bias=bias)
        self.key = nn.Linear(d_model, d_model, bias=bias)
        self.value = nn.Linear(d_model, d_model, bias=bias)
        self.output = nn.Linear(d_model, d_model, bias=bias)
        self.relative_positions = relative_positions

    def split_heads(self, x):  # (batch, len, d_model) -> (batch, heads, len, d_head)
        return x.view(x.size(0), x.size(1), self.num_heads, self.d_head).transpose(1, 2)

    def merge_heads(self, x):  # (batch, heads, len, d_head) -> (batch, len, d_model)
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)

    def heads_qkv(self, x):
        """Self-attention's Q, K and V of x, each (batch, heads, len, d_head)."""
        return self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))

    def forward(self, x, memory=None, mask=None, cache: KVCache | None = None, need_weights=False, layer: int = 0):
        """Queries from `x`; keys and values from `memory` (encoder-decoder attention) or `x`:
        (output (batch, len, d_model), probabilities or None).

        cache: this is layer `layer` of the decoder the cache is for; self-attention appends its
        keys and values, encoder-decoder attention projects the memory once and keeps it."""
        if self.relative_positions is not None and (memory is not None or cache is not None):
            raise ValueError("relative positions are for self-attention over whole sequences: the queries' "
                             "positions must be 0..len-1 of the keys'")
        q, k, v = self.queries_keys_values(x, memory, cache, layer)
        p = self.dropout if self.training else 0.0
        relative = None if self.relative_positions is None else self.relative_positions(q.size(2), k.size(2))
        out, weights = self.attend(q, k, v, mask, p, need_weights, relative)
        return self.output(self.merge_heads(out)), weights

    def attend(self, q, k, v, mask, p, need_weights, relative):
        """The formula over the heads: (output, probabilities or None)."""
        return scaled_dot_product_attention(q, k, v, mask, p, need_weights, relative)

    def queries_keys_values(self, x, memory, cache, layer):
        """Q from x; K, V from memory or x, through the cache where there is one."""
        if memory is None:  # self-attention: then the cache appends K, V
            q, k, v = self.heads_qkv(x)
            if cache is not None:
                k, v = cache.append(layer, k, v)
            return q, k, v
        q = self.split_heads(self.query(x))
        if cache is not None and cache.memory[layer] is not None:
            k, v = cache.memory[layer]
        else:
            k, v = self.split_heads(self.key(memory)), self.split_heads(self.value(memory))
            if cache is not None:
                cache.memory[layer] = k, v
        return q, k, v
