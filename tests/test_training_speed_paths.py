"""The training step's speed paths compute what the plain paths compute: the fused output layer +
loss (core.fast_paths.linear_cross_entropy) gives the loss and gradients of
F.cross_entropy(F.linear(x, weight), targets), and GPT's training forward is that path; the residual
sum with dropout in one pass (numpy_dropout_add) is residual + numpy_dropout(x); attention's
additive mask is 0 where allowed and the dtype's minimum elsewhere."""
import importlib

import pytest
import torch
import torch.nn.functional as F

from bertlab.core.attention import additive_mask
from bertlab.core.fast_paths import linear_cross_entropy, numpy_dropout, numpy_dropout_add
from bertlab.models import GPT, GPTConfig


def _case(tokens=37, d=16, vocab=101, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, d, generator=g) * 2
    weight = torch.randn(vocab, d, generator=g)
    targets = torch.randint(0, vocab, (tokens,), generator=g)
    return x, weight, targets


def _loss_and_grads(fn, x, weight, targets, scale=1.0):
    x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = fn(x, weight, targets)
    (loss * scale).backward()
    return loss.detach(), x.grad, weight.grad


def _plain(x, weight, targets):
    return F.cross_entropy(F.linear(x, weight), targets)


@pytest.mark.parametrize("scale", [1.0, 0.25])  # 0.25: the loss divided by grad_accum = 4
def test_equals_plain_loss_and_gradients(scale):
    x, weight, targets = _case()
    targets[::5] = -100
    for ours, plain in zip(_loss_and_grads(linear_cross_entropy, x, weight, targets, scale),
                           _loss_and_grads(_plain, x, weight, targets, scale)):
        torch.testing.assert_close(ours, plain, rtol=1e-5, atol=1e-6)


def test_several_passes_equal_one(monkeypatch):
    x, weight, targets = _case(tokens=50)
    one = _loss_and_grads(linear_cross_entropy, x, weight, targets)
    module = importlib.import_module("bertlab.core.fast_paths.linear_cross_entropy")
    monkeypatch.setattr(module, "_FLOATS_PER_PASS", 101 * 7)  # 7 tokens a pass
    for a, b in zip(one, _loss_and_grads(linear_cross_entropy, x, weight, targets)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_large_logits_and_no_grad():
    x, weight, targets = _case()
    x = x * 50  # logits in the hundreds: exp would overflow without subtracting the maximum
    with torch.no_grad():
        torch.testing.assert_close(linear_cross_entropy(x, weight, targets), _plain(x, weight, targets))


def test_every_target_ignored_is_nan_like_plain():
    x, weight, targets = _case()
    targets[:] = -100
    assert _plain(x, weight, targets).isnan() and linear_cross_entropy(x, weight, targets).isnan()


def test_gpt_training_loss_and_gradients_equal_eval_path():
    torch.manual_seed(0)
    from bertlab.models.accelerate import accelerate
    model = accelerate(GPT(GPTConfig.preset("test", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)))  # the fused path
    x = torch.randint(0, model.config.vocab_size, (3, 9))
    y = torch.randint(0, model.config.vocab_size, (3, 9))
    y[0, :4] = -100
    logits, loss = model.train()(x, y)
    assert logits is None
    loss.backward()
    fused = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logits, plain = model.eval()(x, y)
    plain.backward()
    torch.testing.assert_close(loss, plain)
    for n, p in model.named_parameters():
        torch.testing.assert_close(fused[n], p.grad, rtol=1e-5, atol=1e-6, msg=n)


# ---- the residual sum with dropout, and the additive mask -------------------------------------

def test_dropout_add_equals_residual_plus_dropout_values_and_gradients():
    g = torch.Generator().manual_seed(1)
    x0, r0, up = (torch.randn(3, 7, 16, generator=g) for _ in range(3))
    results = []
    for fused in (True, False):
        x, r = x0.clone().requires_grad_(), r0.clone().requires_grad_()
        torch.manual_seed(5)  # torch's seed decides the mask, on both paths
        y = numpy_dropout_add(x, r, 0.3) if fused else r + numpy_dropout(x, 0.3)
        (y * up).sum().backward()
        results.append((y.detach(), x.grad, r.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert (results[0][1] == 0).float().mean().item() == pytest.approx(0.3, abs=0.08)  # dropped: no gradient


def test_dropout_add_without_dropout_is_the_plain_sum():
    x, r = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(numpy_dropout_add(x, r, 0.3, training=False), r + x)
    assert torch.equal(numpy_dropout_add(x, r, 0.0), r + x)
    assert torch.equal(numpy_dropout_add(x, r, 1.0), r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_additive_mask(dtype):
    mask = torch.ones(3, 5, dtype=torch.bool).tril(2)
    m = additive_mask(mask, torch.zeros(2, 3, 5, dtype=dtype))
    assert m.dtype == dtype and m.shape == mask.shape
    assert torch.equal(m, torch.zeros(3, 5, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min))
