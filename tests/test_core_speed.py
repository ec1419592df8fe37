"""The core's speed paths compute what the plain paths compute: caches derived from weights follow
every kind of weight update, and the explicit training attention equals the fused kernel's math."""
import pytest
import torch

from bertlab.core import MultiHeadAttention
from bertlab.core.linear import Linear, PackedWeight, can_pack


@pytest.mark.parametrize("optimizer", [
    lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),  # writes weights without bumping their versions
    lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.SGD(ps, lr=0.1),
])
def test_stacked_qkv_follows_optimizer_steps(optimizer):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    opt = optimizer(list(mha.parameters()))
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        mha(x)  # caches the stacked weight
    mha(x)[0].square().sum().backward()
    opt.step()
    with torch.no_grad():
        cached = mha(x)[0]
    mha._stacked = None
    with torch.no_grad():
        fresh = mha(x)[0]
    torch.testing.assert_close(cached, fresh, rtol=0, atol=0)


def test_packed_weight_is_stale_after_a_fused_optimizer_step():
    layer = Linear(8, 8)
    if not can_pack(layer.weight):
        pytest.skip("no MKL packed GEMM here")
    packed = PackedWeight(layer.weight, rows=2)
    x = torch.randn(2, 8)
    with torch.no_grad():
        assert packed.usable(x, layer.weight)
    layer(x).sum().backward()
    torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True).step()
    with torch.no_grad():
        assert not packed.usable(x, layer.weight)
