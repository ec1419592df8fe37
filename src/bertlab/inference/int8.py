"""int8 inference on the CPU: dynamic quantisation of a model's linear layers, with PyTorch's own
quantised Linear (torch.ao.nn.quantized.dynamic.Linear, fbgemm/oneDNN kernels), not ours.

Each weight matrix is stored as int8 with one scale per output row (per-channel); each input is
quantised on the fly with its own range (dynamic), and the product is accumulated in int32 and
scaled back to fp32. LayerNorm, softmax, attention's Q K^T and the embeddings stay fp32.

A decoding step multiplies one row per sequence by every weight: it is bound by reading the
weights, so a quarter of the bytes is most of the gain (GPT-2 124M's tied output layer alone is
154 MB in fp32). The quality cost is measured on real data in docs/guide/export.md.

    model = quantize_int8(load_model("minilm").model)   # in place; returns the model
"""
import functools
import warnings

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear


@functools.cache
def full_range_activations() -> bool:
    """Whether inputs may be quantised to all 8 bits. PyTorch's dynamic Linear uses 7 (reduce_range):
    without VNNI, x86's int8 multiply-add sums pairs of u8 x s8 products into int16, which 8-bit
    inputs can overflow. With VNNI (vpdpbusd, int32 sums) nothing overflows, and the 8th bit
    matters: MiniLM's embeddings of man-page sentences kept a mean cosine of 0.978 to fp32 with 7
    bits, 0.994 with 8."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return False
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


class Int8Linear(DynamicLinear):
    """PyTorch's dynamic int8 Linear, with 8-bit inputs where the CPU sums without overflow."""

    def forward(self, x):
        if not full_range_activations():
            return super().forward(x)
        return torch.ops.quantized.linear_dynamic(x, self._packed_params._packed_params, reduce_range=False)


def _int8_linear(weight, bias):
    """A dynamic int8 Linear computing F.linear(x, weight, bias), weights quantised per output row."""
    from torch.ao.quantization import per_channel_dynamic_qconfig
    plain = nn.Linear(weight.size(1), weight.size(0), bias=bias is not None)
    with torch.no_grad():
        plain.weight.copy_(weight)
        if bias is not None:
            plain.bias.copy_(bias)
    plain.qconfig = per_channel_dynamic_qconfig
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's notice that eager quantisation moves to torchao
        return Int8Linear.from_float(plain)


def quantize_int8(model: nn.Module) -> nn.Module:
    """Replace every nn.Linear of `model` (a BERT, fine-tuned BERT, GPT or translation Transformer,
    in eval mode on the CPU) by its dynamic int8 version, in place. Attention's stacked Q/K/V
    projection and GPT's output layer (tied to the token embeddings, which stay fp32) get int8
    copies of their own; the model is accelerated first (models.accelerate), whose attention reads
    the stacked copy. Returns the model."""
    from ..core.attention import MultiHeadAttention
    from ..models.accelerate import accelerate
    parameter = next(model.parameters())
    if parameter.device.type != "cpu":
        raise ValueError(f"int8 inference runs on the CPU; the model is on {parameter.device} (use --device cpu)")
    if parameter.dtype != torch.float32:
        raise ValueError(f"int8 quantisation starts from fp32 weights; the model is {parameter.dtype}")
    model.eval()
    accelerate(model)
    for module in list(model.modules()):
        if isinstance(module, MultiHeadAttention):
            weight, bias = module.stacked_qkv()
            module.int8_qkv = _int8_linear(weight, bias)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, _int8_linear(child.weight, child.bias))
    if hasattr(model, "wte"):  # GPT: the output layer is the token embedding table, transposed
        model.int8_head = _int8_linear(model.wte.weight, None)
    return model


def check_int8_settings(device, autocast_dtype=None):
    """int8 is for fp32 models on the CPU: any other device or precision is an error before loading."""
    if torch.device(device).type != "cpu":
        raise ValueError(f"--int8 runs on the CPU; the device is {device} (use --device cpu)")
    if autocast_dtype is not None:
        raise ValueError("--int8 replaces --precision: give one of them (int8 layers compute in int8 and fp32)")


def is_int8(model: nn.Module) -> bool:
    return any(isinstance(m, DynamicLinear) for m in model.modules())
