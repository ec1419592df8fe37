"""Dropout whose random mask is drawn by numpy on the CPU.

torch's CPU dropout draws one Mersenne Twister number per element, on one thread: for BERT-base
pretraining (batch 8 x 128) its masks took about a tenth of the step here. numpy's PCG64 is faster,
and keeping the scaled mask as one float tensor makes forward and backward a single multiplication
each: dropout forward + backward costs about half (measured on this project's CPUs). Each element
takes one 32-bit half of PCG64's raw 64-bit words: turning the words into float32 uniforms first
cost twice as much (4.9 against 2.4 ns an element on an AVX2 EPYC; 4% of a fine-tuning step). An
element is dropped when its draw is among the lowest round(p x 2^32) of the 2^32 values, so the
probability is p to within 2^-33 (float32 uniforms compared with p: 2^-24), and kept elements are
scaled by 1 / (1 - p). The seed of every mask is drawn from torch's generator, so torch.manual_seed
and a saved torch RNG state still decide every mask.

Other devices, p = 1 and code torch.compile traces use torch's own dropout.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _mask(x, p):
    """The scaled keep-mask of one dropout call: 1 / (1 - p) where kept, 0 where dropped, in x's dtype."""
    seed = int(torch.randint(0, 2**62, (1,)))
    n = x.numel()
    words = np.random.default_rng(seed).bit_generator.random_raw((n + 1) // 2)  # two 32-bit draws each
    draws = torch.from_numpy(words.view(np.int32)[:n]).view(x.shape)  # uniform over the int32 values
    # in place, one buffer: kept -> 1 -> the bits of float32 1 / (1 - p); dropped -> 0 -> 0.0
    dropped_below = min(round(p * 2**32) - 2**31, 2**31 - 1)
    mask = draws.ge_(dropped_below).mul_(_float32_bits(1.0 / (1.0 - p))).view(torch.float32)
    return mask if mask.dtype == x.dtype else mask.to(x.dtype)  # bf16 under autocast


def _float32_bits(value: float) -> int:
    """The int32 whose bits are float32 `value`."""
    return int(np.float32(value).view(np.int32))


class _NumpyDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p):
        mask = _mask(x, p)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask, None


class _NumpyDropoutAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, p):
        mask = _mask(x, p)
        ctx.save_for_backward(mask)
        return torch.addcmul(residual, x, mask)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask, grad, None


def numpy_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """F.dropout(x, p, training), with the mask drawn by numpy for CPU tensors."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0 or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    return _NumpyDropout.apply(x, p)


class NumpyDropout(nn.Dropout):
    """nn.Dropout (same arguments, same isinstance) through `numpy_dropout` above."""

    def forward(self, x):
        if self.inplace:
            return super().forward(x)
        return numpy_dropout(x, self.p, self.training)


def numpy_dropout_add(x, residual, p: float, training: bool = True) -> torch.Tensor:
    """residual + numpy_dropout(x, p, training): a residual connection's sum, which on a CPU takes
    the mask in the same pass (torch.addcmul) instead of a product and then a sum."""
    if not training or p == 0.0:
        return residual + x
    if x.device.type != "cpu" or p >= 1.0 or torch.compiler.is_compiling():
        return residual + F.dropout(x, p, training)
    return _NumpyDropoutAdd.apply(x, residual, p)
