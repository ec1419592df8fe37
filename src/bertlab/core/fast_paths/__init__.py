"""The core's CPU speed paths. Each computes what the plain PyTorch it stands in for computes
(tests/test_core_speed.py), faster on this project's CPUs; on other devices each falls back to
the plain path. The formulas of the notes are in the modules beside this folder.

- numpy_dropout: dropout whose CPU mask numpy draws (F.dropout's distribution and torch's seeds).
- mkl_prepacking: nn.Linear whose weight MKL reorders once for the row count of decoding steps.
- linear_cross_entropy: a language model's output layer and loss as one step, logits never kept.
- unpadding: the real tokens of a padded batch as one matrix, so position-wise layers skip padding.
- weight_stamp: tells a copy derived from a weight (prepacked, stacked Q/K/V) that it is stale.

Attention keeps its two speed paths beside its plain formula (core/attention.py): PyTorch's fused
kernel, and the Q/K/V projections as one matmul against the stacked weights.
"""
from .linear_cross_entropy import linear_cross_entropy
from .mkl_prepacking import (PrepackableLinear, PrepackedWeight, can_prepack, drop_prepacked, prepack_for_rows,
                             prepacked_linear)
from .numpy_dropout import NumpyDropout, numpy_dropout, numpy_dropout_add
from .unpadding import Packing
from .weight_stamp import weight_stamp

__all__ = ["PrepackableLinear", "PrepackedWeight", "can_prepack", "drop_prepacked", "prepack_for_rows",
           "prepacked_linear", "linear_cross_entropy", "NumpyDropout", "numpy_dropout",
           "numpy_dropout_add", "Packing", "weight_stamp"]
