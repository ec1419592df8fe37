"""The core's speed paths (swapped in by models.accelerate) compute what the plain paths compute: caches derived from weights follow
every kind of weight update; packed (unpadded) blocks, the last layer at a few positions and the
explicit training attention give the outputs and gradients of the plain computation."""
import os
import subprocess
import sys

import pytest
import torch

from bertlab.core import (
    EncoderBlock,
    MultiHeadAttention,
    padding_mask,
    scaled_dot_product_attention,
)
from bertlab.core.fast_paths import (NumpyDropout, Packing, PrepackableLinear, PrepackedWeight, can_prepack,
                                     numpy_dropout)
from bertlab.core.fast_paths import unpadding
from bertlab.models import BertConfig, BertForPreTraining
from bertlab.models.accelerate import accelerate


@pytest.mark.parametrize("optimizer", [
    lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),  # writes weights without bumping their versions
    lambda ps: torch.optim.AdamW(ps, lr=0.1, foreach=True),
    lambda ps: torch.optim.SGD(ps, lr=0.1),
])
def test_stacked_qkv_follows_optimizer_steps(optimizer):
    torch.manual_seed(0)
    mha = accelerate(MultiHeadAttention(16, 4))
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
    layer = PrepackableLinear(8, 8)
    if not can_prepack(layer.weight):
        pytest.skip("no MKL packed GEMM here")
    packed = PrepackedWeight(layer.weight, rows=2)
    x = torch.randn(2, 8)
    with torch.no_grad():
        assert packed.usable(x, layer.weight)
    layer(x).sum().backward()
    torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True).step()
    with torch.no_grad():
        assert not packed.usable(x, layer.weight)


# ---- unpadding and the last layer at a few positions -----------------------------------------

def _mask(lengths, length):
    return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).long()


def test_pack_and_unpack_are_inverse_and_so_are_their_gradients():
    am = _mask([5, 2, 4], 5)
    packing = Packing(am)
    x = torch.randn(3, 5, 4, requires_grad=True)
    packed = packing.pack(x)
    torch.testing.assert_close(packed, x[am.bool()])
    back = packing.unpack(packed)
    torch.testing.assert_close(back, x * am[..., None])
    g = torch.randn(3, 5, 4)
    back.backward(g)
    torch.testing.assert_close(x.grad, g * am[..., None])
    torch.testing.assert_close(packing.rows(torch.tensor([[4, 0], [1, 0], [3, 2]])),
                               torch.tensor([[4, 0], [6, 5], [10, 9]]))
    with pytest.raises(ValueError, match="padding"):
        packing.rows(torch.tensor([[0], [3], [0]]))


@pytest.mark.parametrize("queries", [False, True])
def test_packed_encoder_block_equals_padded_at_real_positions(queries):
    torch.manual_seed(0)
    block = accelerate(EncoderBlock(16, 4, 32, dropout=0.0))
    am = _mask([7, 3, 5], 7)
    x = torch.randn(3, 7, 16)
    rows = torch.tensor([[0, 2, 6], [0, 1, 2], [0, 4, 1]])
    mask, packing = padding_mask(am), Packing(am)

    def run(packed):
        block.zero_grad()
        source = x.clone().requires_grad_()
        inp = packing.pack(source) if packed else source
        q = None
        if queries:
            q = inp.index_select(0, packing.rows(rows).reshape(-1)).view(3, 3, 16) if packed else \
                inp.gather(1, rows[..., None].expand(-1, -1, 16))
        out, _ = block(inp, mask, queries=q, packing=packing if packed else None)
        real = out if queries else (out if packed else out[am.bool()])
        real.square().sum().backward()
        return real, source.grad, [p.grad.clone() for p in block.parameters()]

    (out_a, gx_a, gp_a), (out_b, gx_b, gp_b) = run(False), run(True)
    torch.testing.assert_close(out_b, out_a)
    torch.testing.assert_close(gx_b, gx_a)
    for a, b in zip(gp_a, gp_b):
        torch.testing.assert_close(b, a)


# ---- attention bucket by bucket ------------------------------------------------------------------

def _brute_force_cost(lengths, bucket_cost):
    """The least attention cost over every way of cutting the sorted lengths into runs."""
    lengths = sorted(n for n in lengths if n)
    best = {0: 0}
    for j in range(1, len(lengths) + 1):
        best[j] = min(best[i] + (j - i) * lengths[j - 1] ** 2 + bucket_cost for i in range(j))
    return best[len(lengths)]


@pytest.mark.parametrize("seed", range(5))
def test_buckets_cover_every_token_once_at_least_cost(seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 60, (int(torch.randint(1, 40, (1,), generator=g)),), generator=g).tolist()
    lengths[0] = max(lengths[0], 1)
    am = _mask(lengths, max(lengths))
    packing = Packing(am, buckets=True)
    x = torch.randn(len(lengths), max(lengths), 3, generator=g)
    packed = packing.pack(x)
    torch.testing.assert_close(packing.unpack(packed), x * am[..., None])  # every token once, any order
    assert packing.buckets[0].start == 0 and packing.buckets[-1].end == len(packed) == sum(lengths)
    cost = 0
    for before, bucket in zip([None] + packing.buckets, packing.buckets):
        assert before is None or before.end == bucket.start
        rows = bucket.unpack(packed)  # (rows, length, 3): its rows, padded to its longest only
        assert rows.shape[:2] == (bucket.rows, bucket.length) and bucket.mask.shape == (bucket.rows, 1, 1, bucket.length)
        torch.testing.assert_close(bucket.pack(rows), packed[bucket.start:bucket.end])
        assert bool(bucket.mask[:, 0, 0, -1].any())  # its longest row fills it
        cost += bucket.rows * bucket.length ** 2 + unpadding.BUCKET_COST
    assert cost == _brute_force_cost(lengths, unpadding.BUCKET_COST)


def test_bucketed_encoder_block_equals_padded_at_real_positions():
    torch.manual_seed(0)
    block = accelerate(EncoderBlock(16, 4, 32, dropout=0.0))
    am = _mask([70, 3, 5, 68, 1, 12, 30, 4], 70)
    x = torch.randn(8, 70, 16)
    packing = Packing(am, buckets=True)
    assert len(packing.buckets) > 1

    def run(packed):
        block.zero_grad()
        source = x.clone().requires_grad_()
        if packed:
            out = packing.unpack(block(packing.pack(source), padding_mask(am), packing=packing)[0])
        else:
            out = block(source, padding_mask(am))[0]
        out[am.bool()].square().sum().backward()
        return out[am.bool()], source.grad, [p.grad.clone() for p in block.parameters()]

    (out_a, gx_a, gp_a), (out_b, gx_b, gp_b) = run(False), run(True)
    torch.testing.assert_close(out_b, out_a)
    torch.testing.assert_close(gx_b, gx_a)
    for a, b in zip(gp_a, gp_b):
        torch.testing.assert_close(b, a)


@pytest.mark.parametrize("lengths", [[9, 4, 6], [9, 9, 9]])
def test_pretraining_last_layer_at_masked_positions_equals_the_full_forward(lengths):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = accelerate(BertForPreTraining(config))
    ids, am = torch.randint(5, 50, (3, 9)), _mask(lengths, 9)
    types = (torch.arange(9) >= 4).long().expand(3, -1)
    positions = torch.tensor([[1, 3, 0], [2, 3, 0], [5, 1, 4]])

    def run(fast):
        model.zero_grad()
        if fast:
            mlm, nsp = model(ids, types, am, positions)
        else:
            out = model.bert(ids, types, am)
            mlm, nsp = model.mlm(out.sequence_output, positions), model.nsp(out.pooled_output)
        (mlm.square().sum() + nsp.square().sum()).backward()
        return mlm, nsp, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    (mlm_a, nsp_a, g_a), (mlm_b, nsp_b, g_b) = run(False), run(True)
    torch.testing.assert_close(mlm_b, mlm_a)
    torch.testing.assert_close(nsp_b, nsp_a)
    assert g_a.keys() == g_b.keys()
    for name in g_a:
        torch.testing.assert_close(g_b[name], g_a[name], msg=name)


def test_training_attention_with_dropout_is_dropout_of_the_softmax():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = padding_mask(_mask([5, 3], 5))
    torch.manual_seed(1)
    out, _ = scaled_dot_product_attention(q, k, v, mask, dropout_p=0.3, dropout=numpy_dropout)
    torch.manual_seed(1)
    probs = (q @ k.transpose(-2, -1) / 2).masked_fill(~mask, float("-inf")).softmax(-1)
    torch.testing.assert_close(out, numpy_dropout(probs, 0.3) @ v)


# ---- dropout with numpy's generator ----------------------------------------------------------


def test_dropout_keeps_1_minus_p_scales_by_its_inverse_and_follows_torch_seeds():
    x = torch.ones(200_000, requires_grad=True)
    torch.manual_seed(3)
    y = numpy_dropout(x, 0.1)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.003
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.9))
    y.backward(torch.full_like(y, 2.0))
    torch.testing.assert_close(x.grad, y.detach() * 2)  # the gradient goes through the same mask
    torch.manual_seed(3)
    torch.testing.assert_close(numpy_dropout(x, 0.1), y)  # torch's seed decides the mask
    assert not torch.equal(numpy_dropout(x, 0.1), y)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_draws_are_independent_in_odd_shapes_too(p):
    """Each element takes one 32-bit half of a 64-bit word: both halves, and neighbours, must be
    independent draws with the drop probability p (an odd count leaves the last word's half unused)."""
    torch.manual_seed(0)
    kept = (numpy_dropout(torch.ones(301, 999), p) != 0).double()  # 300,699 elements, odd
    assert abs(kept.mean().item() - (1 - p)) < 4 * (p * (1 - p) / kept.numel()) ** 0.5
    flat = kept.reshape(-1)
    for first, second in ((flat[0:-1:2], flat[1::2]), (flat[1:-1:2], flat[2::2])):  # within and across words
        both = (first * second).mean().item()
        assert abs(both - (1 - p) ** 2) < 4 * ((1 - p) ** 2 * (1 - (1 - p) ** 2) / len(first)) ** 0.5
    assert torch.equal(numpy_dropout(torch.ones(3), 1 - 1e-12), torch.zeros(3))  # no int32 overflow near p = 1


def test_dropout_module_is_nn_dropout_and_passes_through_in_eval():
    layer = NumpyDropout(0.5)
    assert isinstance(layer, torch.nn.Dropout)
    x = torch.randn(4, 8)
    assert layer.eval()(x) is x
    assert numpy_dropout(x, 0.0) is x
    assert layer.train()(x.bfloat16()).dtype == torch.bfloat16
    assert torch.equal(numpy_dropout(x, 1.0), torch.zeros_like(x))


def test_importing_bertlab_registers_no_optimizer_hook():
    # weight_stamp's optimizer-step counter is registered by the first stamp, not by an import
    code = ("import torch.optim.optimizer as o, bertlab.models, bertlab.inference.generate; "
            "assert not o._global_optimizer_post_hooks, o._global_optimizer_post_hooks")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- a linear layer's products through oneDNN while training ---------------------------------

@pytest.mark.parametrize("d_in, d_out", [(400, 700), (700, 400)])  # dW by MKL, dW by oneDNN
def test_onednn_linear_gives_f_linear_outputs_and_gradients(d_in, d_out, monkeypatch):
    from bertlab.core.fast_paths import onednn_linear
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        pytest.skip("this PyTorch build has no oneDNN linear")
    monkeypatch.setattr(onednn_linear, "_AVAILABLE", True)  # the path under test, on any CPU
    torch.manual_seed(0)
    x = torch.randn(3, 70, d_in, requires_grad=True)  # 3 x 70 rows x 400 x 700: above MIN_FLOPS
    weight = torch.randn(d_out, d_in, requires_grad=True)
    bias = torch.randn(d_out, requires_grad=True)
    grad = torch.randn(3, 70, d_out)
    assert onednn_linear.wants_onednn(x, weight)
    ours = onednn_linear.linear(x, weight, bias)
    ours.backward(grad)
    got = [t.grad.clone() for t in (x, weight, bias)]
    for t in (x, weight, bias):
        t.grad = None
    plain = torch.nn.functional.linear(x, weight, bias)
    plain.backward(grad)
    torch.testing.assert_close(ours, plain, rtol=1e-5, atol=1e-4)
    for mine, theirs in zip(got, (x.grad, weight.grad, bias.grad)):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-4)
    # a frozen weight gets no gradient; the input still does
    frozen = weight.detach()
    x.grad = None
    onednn_linear.linear(x, frozen, None).sum().backward()
    torch.testing.assert_close(x.grad, grad.new_ones(3, 70, d_out) @ frozen, rtol=1e-5, atol=1e-4)


def test_onednn_linear_leaves_inference_autocast_and_small_products_to_f_linear():
    from bertlab.core.fast_paths import onednn_linear
    x, weight = torch.randn(200, 400), torch.randn(700, 400, requires_grad=True)
    assert onednn_linear.wants_onednn(x, weight) == onednn_linear._available()
    with torch.no_grad():
        assert not onednn_linear.wants_onednn(x, weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not onednn_linear.wants_onednn(x, weight)
        assert onednn_linear.linear(x, weight).dtype == torch.bfloat16  # autocast still applies
    assert not onednn_linear.wants_onednn(torch.randn(2, 400), weight)  # a head's few rows
    assert not onednn_linear.wants_onednn(x.double(), weight.double())
    narrow = torch.randn(700, 128, requires_grad=True)  # a tiny BERT's 128-wide input: MKL is faster
    assert not onednn_linear.wants_onednn(torch.randn(5000, 128), narrow)


@pytest.mark.parametrize("setting", ["0", "1", "auto"])
def test_onednn_linear_follows_the_environment_and_else_the_cpu(setting):
    # 0: never; 1: always (where PyTorch has the op); unset: only on CPUs with AVX-512, where it was
    # measured faster (on an AVX2 EPYC it was slower than MKL)
    code = ("import torch; from bertlab.core.fast_paths import onednn_linear as o; "
            "print(o.wants_onednn(torch.randn(200, 400), torch.randn(700, 400, requires_grad=True)))")
    env = {k: v for k, v in os.environ.items() if k != "BERTLAB_ONEDNN"}
    if setting != "auto":
        env["BERTLAB_ONEDNN"] = setting
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    has_op = hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.backends.mkldnn.is_available()
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    expected = {"0": False, "1": has_op, "auto": has_op and avx512}[setting]
    assert out.stdout.strip() == str(expected)
