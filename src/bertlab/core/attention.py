"""Scaled dot-product attention and multi-head attention, shared by BERT, the Transformer and GPT."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from . import fast_paths
from .fast_paths import PrepackableLinear, numpy_dropout, select_rows, weight_stamp
from .kv_cache import KVCache
from .masks import CAUSAL, causal_mask
from .relative_positions import RelativeTerms, relative_scores


def attention(query, key, value, mask=None, dropout_p=0.0, relative: RelativeTerms | None = None):
    """The notes' formula, softmax(Q K^T / sqrt(d_k) + M) V over (..., len, d_k) tensors, and the
    probabilities (before dropout). M is 0 where `mask` is True (allowed), very negative elsewhere.

    relative (core.relative_positions): Shaw et al.'s relative positions, q_i . a^K_ij / sqrt(d_k)
    added to the scores and, where given, sum_j p_ij a^V_ij to the output (NEZHA)."""
    scale = 1.0 / math.sqrt(query.size(-1))
    # scaling Q rather than the scores: len x d_k multiplications instead of len x len
    query = query * scale
    scores = query @ key.transpose(-2, -1)
    if relative is not None:
        scores = scores + relative_scores(query, key, relative, scale)
    if mask is not None:
        scores = scores + additive_mask(mask, scores)
    weights = scores.softmax(dim=-1)
    dropped = numpy_dropout(weights, dropout_p)
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
                                 relative: RelativeTerms | None = None):
    """`attention`, through PyTorch's fused kernel where that is faster: (output, probabilities or None).

    Without dropout, and on GPUs also with it, the fused kernel is the fast path (on an H100 the
    plain formula cost a sixth of a bf16 BERT-base pretraining step: 60 -> 50 ms). With dropout on
    a CPU no fused kernel applies, and the plain formula with numpy's dropout is cheaper than
    PyTorch's own fallback (which scales Q and K apart and guards every row against being fully
    masked): 15-20% less time for attention forward + backward at BERT sizes, measured.
    `need_weights=True` also returns the probabilities (batch, heads, query_len, key_len).
    mask may be core.masks.CAUSAL: a whole sequence's causal mask, which the fused kernel applies
    itself (is_causal) and the plain formula builds.
    Relative positions (`relative`) take the plain formula: the fused kernel has no place for them.
    """
    causal = mask is CAUSAL
    if relative is None and not need_weights and (not dropout_p or query.device.type != "cpu"):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=None if causal else mask,
                                              dropout_p=dropout_p, is_causal=causal), None
    if causal:
        mask = causal_mask(query.size(-2), key.size(-2), query.device)
    out, weights = attention(query, key, value, mask, dropout_p, relative)
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
        self.query = PrepackableLinear(d_model, d_model, bias=bias)
        self.key = PrepackableLinear(d_model, d_model, bias=bias)
        self.value = PrepackableLinear(d_model, d_model, bias=bias)
        self.output = PrepackableLinear(d_model, d_model, bias=bias)
        self.relative_positions = relative_positions

    def split_heads(self, x):  # (batch, len, d_model) -> (batch, heads, len, d_head)
        return x.view(x.size(0), x.size(1), self.num_heads, self.d_head).transpose(1, 2)

    def fused_qkv(self, x, packing=None):
        """Self-attention's three projections as one matmul against the stacked weights: one large
        GEMM instead of three runs 15-35% faster on a CPU for BERT-sized inputs (measured). With
        `packing`, x holds the real tokens only and Q, K, V come out in the padded layout."""
        qkv = self.project_qkv(x)
        if packing is not None:
            qkv = packing.unpack(qkv)
        qkv = qkv.view(qkv.size(0), qkv.size(1), 3, self.num_heads, self.d_head)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)

    def bucketed_self_attention(self, x, packing):
        """Self-attention over packed tokens, bucket by bucket (core.fast_paths.unpadding.Bucket):
        each bucket's rows are padded only to its longest row; (tokens, d_model), packed like x."""
        qkv = self.project_qkv(x)
        p = self.dropout if self.training else 0.0
        outs = []
        # split, not slices: the gradient of a split is one concatenation, where each slice's is a
        # zero-filled copy of all of qkv's gradient, summed bucket after bucket
        pieces = qkv.split([bucket.end - bucket.start for bucket in packing.buckets])
        for bucket, piece in zip(packing.buckets, pieces):
            part = bucket.unpack_own(piece).view(bucket.rows, bucket.length, 3, self.num_heads, self.d_head)
            q, k, v = part.permute(2, 0, 3, 1, 4).unbind(0)
            out, _ = scaled_dot_product_attention(q, k, v, bucket.mask, p)
            outs.append(bucket.pack(out.transpose(1, 2)))
        return torch.cat(outs).view(len(x), -1)

    def project_qkv(self, x):
        """x [W_q; W_k; W_v]^T + biases: (..., 3 * d_model). After inference.int8.quantize_int8,
        through the int8 copy of the stacked weights it registered as the submodule `int8_qkv`."""
        int8 = self._modules.get("int8_qkv")
        if int8 is not None:
            return int8(x)
        weight, bias = self.stacked_qkv()
        return fast_paths.linear(x, weight, bias)

    def stacked_qkv(self):
        """[W_q; W_k; W_v] and their biases. Without autograd the stack is kept until a weight
        changes: restacking every batch cost 8% of inference time (fresh pages on every call)."""
        params = [self.query.weight, self.key.weight, self.value.weight]
        params += [] if self.query.bias is None else [self.query.bias, self.key.bias, self.value.bias]
        # inference tensors keep no version; a trace for export must read the weights themselves
        if torch.is_grad_enabled() or params[0].is_inference() or fast_paths.in_plain_path():
            return torch.cat(params[:3]), torch.cat(params[3:]) if len(params) > 3 else None
        stamp = [(weight_stamp(p), p.device, p.dtype) for p in params]
        if getattr(self, "_stacked", None) is None or self._stacked[0] != stamp:
            self._stacked = (stamp, torch.cat(params[:3]), torch.cat(params[3:]) if len(params) > 3 else None)
        return self._stacked[1], self._stacked[2]

    def forward(self, x, memory=None, mask=None, cache: KVCache | None = None, need_weights=False, packing=None,
                layer: int = 0, rows=None):
        """Queries from `x`; keys and values from `memory` (encoder-decoder attention) or `x`.

        cache: this is layer `layer` of the decoder the cache is for.
        packing (core.fast_paths.Packing): the keys' and values' source (`memory`, or else `x`) holds
        only the real tokens of a padded batch, (tokens, d_model); the output is packed like x.
        rows (with packing, self-attention): the packed rows to return, (n,): the output projection
        runs for those alone."""
        if packing is not None and cache is not None:
            raise ValueError("packed inputs are for whole sequences; a key/value cache is for decoding")
        if rows is not None and (packing is None or memory is not None):
            raise ValueError("rows picks rows of a packed self-attention's output: give packing, no memory")
        if self.relative_positions is not None and (memory is not None or cache is not None):
            raise ValueError("relative positions are for self-attention over whole sequences: the queries' "
                             "positions must be 0..len-1 of the keys'")
        # the bucketed path lays rows out anew: relative models keep the one padded layout
        if memory is None and packing is not None and packing.buckets and not need_weights \
                and self.relative_positions is None:
            out, weights = self.bucketed_self_attention(x, packing), None
        else:
            out, weights = self.padded_attention(x, memory, mask, cache, need_weights, packing, layer)
        if rows is not None:
            out = select_rows(out, rows)
        return self.output(out), weights

    def padded_attention(self, x, memory, mask, cache, need_weights, packing, layer):
        """forward()'s attention in the padded (batch, len) layout, before the output projection:
        (output, packed like x where `packing` is given; probabilities or None)."""
        if memory is None:  # self-attention: one matmul for Q, K, V, then the cache appends K, V
            q, k, v = self.fused_qkv(x, packing)
            if cache is not None:
                k, v = cache.append(layer, k, v)
        else:
            q = self.split_heads(self.query(x))
            if cache is not None and cache.memory[layer] is not None:
                k, v = cache.memory[layer]
            else:
                k, v = self.key(memory), self.value(memory)
                if packing is not None:
                    k, v = packing.unpack(k), packing.unpack(v)
                k, v = self.split_heads(k), self.split_heads(v)
                if cache is not None:
                    cache.memory[layer] = k, v
        p = self.dropout if self.training else 0.0
        relative = None if self.relative_positions is None else self.relative_positions(q.size(2), k.size(2))
        out, weights = scaled_dot_product_attention(q, k, v, mask, p, need_weights, relative)
        out = out.transpose(1, 2).reshape(q.size(0), q.size(2), -1)
        if packing is not None and memory is None:
            out = packing.pack(out)
        return out, weights
