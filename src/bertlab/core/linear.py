"""nn.Linear with an optional MKL-prepacked weight for the fixed row count of a decoding step.

A decoding step multiplies a handful of rows (one per sequence) by every weight matrix. MKL's
packed GEMM, with the weight reordered once for that row count, is about 2x faster there than
the ordinary GEMM on this project's CPUs (768x3072 fp32, 8 rows: 10 ms vs 21 ms for 12 layers; 1
row: 7.2 vs 8.0). The packed copy costs as much memory as the weight, so it exists only between
`pack_for_rows(model, rows)` and `unpack(model)` (generation calls both), and it is used only for
inputs of exactly that many rows, without autograd, while the weight is unchanged.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook


def mkl_packing_available() -> bool:
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


class PackedWeight:
    """A weight reordered by MKL for `rows`-row inputs, and the stamp of the weight it came from."""

    def __init__(self, weight: torch.Tensor, rows: int):
        self.rows, self.stamp = rows, weight_stamp(weight)
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(weight.detach(), rows)

    def usable(self, x, weight) -> bool:
        return (not torch.is_grad_enabled() and x.numel() == self.rows * x.size(-1)
                and self.stamp == weight_stamp(weight))


_optimizer_steps = 0


def _count_step(optimizer, args, kwargs):
    global _optimizer_steps
    _optimizer_steps += 1


# A fused optimizer (torch.optim.AdamW(fused=True)) writes the parameters without bumping their
# version counters, so a stamp also counts optimizer steps (every torch.optim.Optimizer's step runs
# this hook): a cache stamped before any step is stale after it.
register_optimizer_step_post_hook(_count_step)


def weight_stamp(weight):
    """What identifies a weight's current values for the caches derived from it (packed or stacked
    copies): its version counter, its storage, and the number of optimizer steps taken so far."""
    # inference tensors (made under torch.inference_mode) cannot change and carry no version counter
    return (-1 if weight.is_inference() else weight._version), weight.data_ptr(), _optimizer_steps


_stamp = weight_stamp  # the name models/gpt.py uses for its packed tied head


def can_pack(weight) -> bool:
    return weight.device.type == "cpu" and weight.dtype == torch.float32 and mkl_packing_available()


def linear(x, weight, bias=None, packed: PackedWeight | None = None):
    """F.linear(x, weight, bias), through the packed weight when it fits this input."""
    if packed is None or not packed.usable(x, weight):
        return F.linear(x, weight, bias)
    flat = x.reshape(packed.rows, x.size(-1))
    out = torch.ops.mkl._mkl_linear(flat, packed.packed, weight, bias, packed.rows)
    return out.view(*x.shape[:-1], weight.size(0))


class Linear(nn.Linear):
    """A drop-in nn.Linear (same parameters and names) that can use a prepacked weight."""

    packed: PackedWeight | None = None

    def forward(self, x):
        return linear(x, self.weight, self.bias, self.packed)


def pack_for_rows(model: nn.Module, rows: int):
    """Prepack every Linear of `model` for `rows`-row inputs (a no-op where MKL packing is absent)."""
    for module in model.modules():
        if isinstance(module, Linear) and can_pack(module.weight):
            module.packed = PackedWeight(module.weight, rows)


def unpack(model: nn.Module):
    for module in model.modules():
        if isinstance(module, Linear):
            module.packed = None
