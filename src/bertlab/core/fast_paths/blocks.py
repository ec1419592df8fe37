"""The CPU speed paths of multi-head attention and the encoder block: what
models.accelerate.accelerate(model) turns core.attention.MultiHeadAttention, core.blocks'
SublayerConnection and EncoderBlock, nn.Linear and nn.Dropout into. Each class is a subclass of the
plain one with the same parameters; the outputs are the plain ones (tests/test_accelerate.py).

- FastMultiHeadAttention: Q, K and V as one matmul against the stacked weights (15-35% faster than
  three on a CPU at BERT sizes), kept stacked between calls while the weights stay the same; the
  padding packed away (unpadding.Packing), rows of similar length attended together (buckets),
  the output projection run for chosen rows alone; numpy's dropout masks; linears that can use
  MKL-prepacked weights while decoding (mkl_prepacking).
- FastSublayerConnection: dropout and the residual sum in one pass (numpy_dropout_add).
- FastEncoderBlock: a block over packed tokens, for chosen query rows or chosen output rows.
"""
import torch
from torch import nn

from ..attention import MultiHeadAttention, scaled_dot_product_attention
from ..blocks import EncoderBlock, SublayerConnection
from ..kv_cache import KVCache
from . import onednn_linear
from .mkl_prepacking import PrepackableLinear
from .numpy_dropout import NumpyDropout, numpy_dropout, numpy_dropout_add
from .unpadding import select_rows
from .weight_stamp import weight_stamp


def swap_class(module: nn.Module, fast: type) -> None:
    """Make `module` an instance of `fast` (a subclass of its plain class), in place: the same
    parameters, buffers and names, the fast class's methods."""
    if not isinstance(module, fast):
        module.__class__ = fast


def accelerate_linear(linear: nn.Linear) -> None:
    """An nn.Linear computes through oneDNN while training and an MKL-prepacked weight while decoding."""
    if type(linear) is nn.Linear:
        swap_class(linear, PrepackableLinear)


def accelerate_dropout(dropout: nn.Dropout) -> None:
    """An nn.Dropout draws its CPU mask with numpy (numpy_dropout)."""
    if type(dropout) is nn.Dropout:
        swap_class(dropout, NumpyDropout)


class FastMultiHeadAttention(MultiHeadAttention):
    """MultiHeadAttention with the CPU speed paths (module docstring)."""

    def heads_qkv(self, x, packing=None):
        """Self-attention's three projections as one matmul against the stacked weights. With
        `packing`, x holds the real tokens only and Q, K, V come out in the padded layout."""
        qkv = self.project_qkv(x)
        if packing is not None:
            qkv = packing.unpack(qkv)
        qkv = qkv.view(qkv.size(0), qkv.size(1), 3, self.num_heads, self.d_head)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)

    def project_qkv(self, x):
        """x [W_q; W_k; W_v]^T + biases: (..., 3 * d_model). After inference.int8.quantize_int8,
        through the int8 copy of the stacked weights it registered as the submodule `int8_qkv`."""
        int8 = self._modules.get("int8_qkv")
        if int8 is not None:
            return int8(x)
        weight, bias = self.stacked_qkv()
        return onednn_linear.linear(x, weight, bias)

    def stacked_qkv(self):
        """[W_q; W_k; W_v] and their biases. Without autograd the stack is kept until a weight
        changes: restacking every batch cost 8% of inference time (fresh pages on every call)."""
        params = [self.query.weight, self.key.weight, self.value.weight]
        params += [] if self.query.bias is None else [self.query.bias, self.key.bias, self.value.bias]
        # inference tensors keep no version; a trace (torch.jit, export) must read the weights themselves
        if torch.is_grad_enabled() or params[0].is_inference() or torch.jit.is_tracing():
            return torch.cat(params[:3]), torch.cat(params[3:]) if len(params) > 3 else None
        stamp = [(weight_stamp(p), p.device, p.dtype) for p in params]
        if getattr(self, "_stacked", None) is None or self._stacked[0] != stamp:
            self._stacked = (stamp, torch.cat(params[:3]), torch.cat(params[3:]) if len(params) > 3 else None)
        return self._stacked[1], self._stacked[2]

    def attend(self, q, k, v, mask, p, need_weights, relative):
        return scaled_dot_product_attention(q, k, v, mask, p, need_weights, relative, dropout=numpy_dropout)

    def forward(self, x, memory=None, mask=None, cache: KVCache | None = None, need_weights=False, layer: int = 0,
                packing=None, rows=None):
        """As MultiHeadAttention.forward, and:

        packing (core.fast_paths.Packing): the keys' and values' source (`memory`, or else `x`) holds
        only the real tokens of a padded batch, (tokens, d_model); the output is packed like x.
        rows (with packing, self-attention): the packed rows to return, (n,): the output projection
        runs for those alone."""
        if packing is None and rows is None:
            return super().forward(x, memory, mask, cache, need_weights, layer)
        if cache is not None:
            raise ValueError("packed inputs are for whole sequences; a key/value cache is for decoding")
        if rows is not None and (packing is None or memory is not None):
            raise ValueError("rows picks rows of a packed self-attention's output: give packing, no memory")
        # the bucketed path lays rows out anew: relative models keep the one padded layout
        if memory is None and packing.buckets and not need_weights and self.relative_positions is None:
            out, weights = self.bucketed_self_attention(x, packing), None
        else:
            out, weights = self.packed_attention(x, memory, mask, need_weights, packing)
        if rows is not None:
            out = select_rows(out, rows)
        return self.output(out), weights

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
            out, _ = self.attend(q, k, v, bucket.mask, p, False, None)
            outs.append(bucket.pack(out.transpose(1, 2)))
        return torch.cat(outs).view(len(x), -1)

    def packed_attention(self, x, memory, mask, need_weights, packing):
        """Attention in the padded (batch, len) layout with packed inputs, before the output
        projection: (output packed like x, probabilities or None)."""
        if memory is None:
            q, k, v = self.heads_qkv(x, packing)
        else:
            q = self.split_heads(self.query(x))
            k, v = packing.unpack(self.key(memory)), packing.unpack(self.value(memory))
            k, v = self.split_heads(k), self.split_heads(v)
        p = self.dropout if self.training else 0.0
        relative = None if self.relative_positions is None else self.relative_positions(q.size(2), k.size(2))
        out, weights = self.attend(q, k, v, mask, p, need_weights, relative)
        out = self.merge_heads(out)
        return (packing.pack(out) if memory is None else out), weights


class FastSublayerConnection(SublayerConnection):
    """The residual sum takes the dropout mask in the same pass (numpy_dropout_add)."""

    def after(self, x, sublayer_out):
        y = numpy_dropout_add(sublayer_out, x, self.dropout.p, self.dropout.training)
        return y if self.norm_first else self.norm(y)


class FastEncoderBlock(EncoderBlock):
    """An encoder block over packed tokens, or for some query rows or output rows only."""

    def forward(self, x, mask=None, need_weights=False, queries=None, packing=None, rows=None):
        """queries: (batch, n, d_model) rows of x to compute outputs for (default: all of x); the
        keys and values still come from all of x. A model whose heads read a few positions of the
        last layer (BERT pretraining: 21 of 128) computes only those there.

        packing (core.fast_paths.Packing): x is (tokens, d_model), the real tokens of a padded batch
        only; every sublayer but attention works position by position, so padding costs nothing.
        rows (with packing): the packed rows of x to compute outputs for, (n,): attention runs over all
        of x, and from its output projection on the block works on those rows alone (token
        classification scores the labelled word pieces only)."""
        if queries is None and packing is None:
            return super().forward(x, mask, need_weights)
        if queries is None:
            a, weights = self.attention(self.attention_sublayer.before(x), mask=mask, need_weights=need_weights,
                                        packing=packing, rows=rows)
            x = self.attention_sublayer.after(x if rows is None else select_rows(x, rows), a)
        else:
            a, weights = self.attention(self.attention_sublayer.before(queries), self.attention_sublayer.before(x),
                                        mask=mask, need_weights=need_weights, packing=packing)
            x = self.attention_sublayer.after(queries, a)
        x = self.feed_forward_sublayer.after(x, self.feed_forward(self.feed_forward_sublayer.before(x)))
        return x, weights
