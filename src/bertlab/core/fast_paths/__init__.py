"""The core's CPU speed paths. Each computes what the plain PyTorch it stands in for computes
(tests/test_core_speed.py), faster on this project's CPUs; on other devices each falls back to
the plain path. The formulas of the notes are in the modules beside this folder.

- numpy_dropout: dropout whose CPU mask numpy draws (F.dropout's distribution and torch's seeds).
- mkl_prepacking: nn.Linear whose weight MKL reorders once for the row count of decoding steps.
- onednn_linear: a linear layer's three products through oneDNN while training (5-10% faster here).
- linear_cross_entropy: a language model's output layer and loss as one step, logits never kept.
- unpadding: the real tokens of a padded batch as one matrix, so position-wise layers skip padding.
- weight_stamp: tells a copy derived from a weight (prepacked, stacked Q/K/V) that it is stale.

Attention keeps its two speed paths beside its plain formula (core/attention.py): PyTorch's fused
kernel, and the Q/K/V projections as one matmul against the stacked weights.

`plain_path()` switches off the speed paths that decide on the data or keep state between calls
(unpadding: BERT packs the padding away only when a batch has some; attention's stacked Q/K/V
kept while the weights' storage and version stay the same): a graph traced for ONNX must hold the
padded computation, valid for every batch, and read the weights themselves (inference.onnx_export).
"""
import contextlib
from .linear_cross_entropy import linear_cross_entropy
from .mkl_prepacking import (PrepackableLinear, PrepackedWeight, can_prepack, drop_prepacked, prepack_for_rows,
                             prepacked_linear)
from .onednn_linear import linear
from .numpy_dropout import NumpyDropout, numpy_dropout, numpy_dropout_add
from .unpadding import Packing, select_rows
from .weight_stamp import weight_stamp

_plain = False


def in_plain_path() -> bool:
    """True inside `plain_path()`."""
    return _plain


@contextlib.contextmanager
def plain_path():
    """Within this block BERT keeps the padded layout and a padding mask for every batch with an
    attention_mask, and attention stacks W_q, W_k, W_v at every call, as a trace for export needs
    (the outputs are the same)."""
    global _plain
    before, _plain = _plain, True
    try:
        yield
    finally:
        _plain = before

__all__ = ["PrepackableLinear", "PrepackedWeight", "can_prepack", "drop_prepacked", "prepack_for_rows",
           "prepacked_linear", "linear", "linear_cross_entropy", "NumpyDropout", "numpy_dropout",
           "numpy_dropout_add", "Packing", "select_rows", "weight_stamp", "plain_path", "in_plain_path"]
