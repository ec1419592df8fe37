"""The core's CPU speed paths. Each computes what the plain PyTorch it stands in for computes
(tests/test_core_speed.py), faster on this project's CPUs; on other devices each falls back to
the plain path. The formulas of the notes are in the modules beside this folder.

- numpy_dropout: dropout whose CPU mask numpy draws (F.dropout's distribution and torch's seeds).
- mkl_prepacking: nn.Linear whose weight MKL reorders once for the row count of decoding steps.
- onednn_linear: a linear layer's three products through oneDNN while training (5-10% faster here).
- linear_cross_entropy: a language model's output layer and loss as one step, logits never kept.
- unpadding: the real tokens of a padded batch as one matrix, so position-wise layers skip padding.
- weight_stamp: tells a copy derived from a weight (prepacked, stacked Q/K/V) that it is stale.

- blocks: multi-head attention, the residual sum and the encoder block with the paths above
  (fused Q/K/V, packing, buckets, chosen rows, numpy's dropout).

None of these is taken by the plain modules of core/ and models/: models.accelerate.accelerate(model)
swaps them in (the classes here are subclasses of the plain ones, with the same parameters).
"""
from .linear_cross_entropy import linear_cross_entropy
from .mkl_prepacking import (PrepackableLinear, PrepackedWeight, can_prepack, drop_prepacked, prepack_for_rows,
                             prepacked_linear)
from .onednn_linear import linear
from .numpy_dropout import NumpyDropout, numpy_dropout, numpy_dropout_add
from .unpadding import Packing, select_rows
from .weight_stamp import weight_stamp

__all__ = ["PrepackableLinear", "PrepackedWeight", "can_prepack", "drop_prepacked", "prepack_for_rows",
           "prepacked_linear", "linear", "linear_cross_entropy", "NumpyDropout", "numpy_dropout",
           "numpy_dropout_add", "Packing", "select_rows", "weight_stamp"]
