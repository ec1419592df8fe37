"""nn.Linear's matrix products through oneDNN while training on a CPU.

PyTorch runs a CPU fp32 linear layer through MKL's sgemm. On this project's CPUs (AMD EPYC,
AVX-512) oneDNN's inner product, which PyTorch ships for its compiler (mkldnn::_linear_pointwise),
runs the forward product and the input's gradient 5-10% faster (BERT-base/ALBERT shapes, 900 rows,
one thread). Training spends 70-90% of a step in a linear layer's three products:
    y   = x W^T + b        forward                      oneDNN
    dx  = dy W             the "linear" of dy, weight W^T  oneDNN
    dW  = dy^T x           oneDNN where out <= in, else torch.mm (MKL)
oneDNN copies the transposed dy^T first: worth it where dy is the narrow side (a feed-forward
network's second layer: 21.5 vs 23.6 ms at 2 threads), not where it is the wide one. The results
equal F.linear's to fp32 rounding (the sums are taken in another order). Used only
where it is measured to help: CPU, fp32, autograd on, no autocast, products of at least
MIN_FLOPS (a oneDNN call costs ~15 us more than MKL's, which small heads do not repay), and layers
at least 384 wide on the input side, or 256 wide in and 384 out (`wide_enough`): a layer 128 wide
in, like a tiny BERT's, trained up to 25% slower through oneDNN (forward + backward, 1000 and 3000
rows, 2 threads, a grid of widths 128-3072). Everything else stays F.linear.

Only on CPUs with AVX-512: the gain was measured on AMD EPYC Zen 4 (AVX-512). On an AVX2-only EPYC
(Zen 3) oneDNN was the slower one, 5-35% for a layer's forward + backward at MiniLM's shapes (900
and 4000 rows, 2 threads), and a MiniLM token-classification step took 13% longer through it
(723 vs 639 ms), so there MKL keeps every product. `BERTLAB_ONEDNN=1` in the environment takes
oneDNN on any CPU, `BERTLAB_ONEDNN=0` on none, to compare on another CPU.
"""
import os

import torch
import torch.nn.functional as F

MIN_FLOPS = 2 ** 22  # rows x in x out: ~1 GFLOP-ms of work; tiny heads keep F.linear


def _available() -> bool:
    choice = os.environ.get("BERTLAB_ONEDNN", "auto")
    if choice == "0" or not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    return choice == "1" or torch.backends.cpu.get_cpu_capability().startswith("AVX512")


_AVAILABLE = None


def _onednn(x, weight, bias=None):
    """x (rows, in) times weight (out, in) transposed, plus bias: one oneDNN call."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _onednn(grad, weight.t())
        if ctx.needs_input_grad[1]:
            dw = _onednn(grad.t(), x.t()) if weight.size(0) <= weight.size(1) else grad.t().mm(x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = grad.sum(0)
        return dx, dw, db


def wide_enough(d_in: int, d_out: int) -> bool:
    """Whether a layer of these widths trains faster through oneDNN (module docstring)."""
    return d_in >= 384 or (d_in >= 256 and d_out >= 384)


def wants_onednn(x, weight) -> bool:
    """True where `linear` takes oneDNN's path (see the module docstring)."""
    global _AVAILABLE
    if not (torch.is_grad_enabled() and x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32 and type(weight) in (torch.Tensor, torch.nn.Parameter)):
        return False
    if torch.is_autocast_enabled("cpu") or torch.compiler.is_compiling():
        return False
    if x.numel() * weight.size(0) < MIN_FLOPS or not wide_enough(weight.size(1), weight.size(0)):
        return False
    if _AVAILABLE is None:
        _AVAILABLE = _available()
    return _AVAILABLE


def linear(x, weight, bias=None):
    """F.linear(x, weight, bias); while training on a CPU, through oneDNN (module docstring)."""
    if not wants_onednn(x, weight) or not (weight.requires_grad or x.requires_grad):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.size(-1))
    out = _OneDnnLinear.apply(flat, weight, bias)
    return out.view(*x.shape[:-1], weight.size(0))
