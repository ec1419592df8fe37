"""Sampling: greedy equals HF's generate, cached equals uncached, batched equals one by one, and
each sampling option does what it says."""
import pytest
import torch

from bertlab.inference.generate import (SamplingOptions, apply_repetition_penalty, generate, left_pad,
                                        top_k_filter, top_p_filter, truncate_at_stop, unpad)
from bertlab.models import GPT, GPTConfig


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(GPTConfig.preset("test", n_layer=3, n_embd=48, n_head=4, vocab_size=211)).eval()


def prompts(n, lengths, vocab=211, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (lengths[i % len(lengths)],), generator=g).tolist() for i in range(n)]


def test_greedy_token_identical_to_hf_generate(model, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bertlab.interop.hf_gpt2 import save_pretrained
    save_pretrained(model, tmp_path)
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    batch = torch.tensor(prompts(3, [7]))
    with torch.no_grad():
        theirs = hf.generate(batch, attention_mask=torch.ones_like(batch), max_new_tokens=40,
                             do_sample=False, eos_token_id=None, pad_token_id=0)[:, 7:]
    ours = generate(model, batch, SamplingOptions(max_new_tokens=40))
    assert ours == theirs.tolist()


def test_cached_equals_uncached(model):
    batch = prompts(2, [5])
    options = SamplingOptions(max_new_tokens=30)
    assert generate(model, batch, options) == generate(model, batch, options, use_cache=False)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    sampled = SamplingOptions(max_new_tokens=30, do_sample=True, temperature=0.9, top_k=20)
    assert generate(model, batch, sampled, generator=g1) == generate(model, batch, sampled, generator=g2,
                                                                      use_cache=False)


def test_cached_logits_equal_full_recomputation(model):
    x = torch.tensor(prompts(2, [12]))
    with torch.no_grad():
        full = model(x)[0]
        cache = model.new_cache(16)
        first = model(x[:, :5], cache=cache)[0]
        steps = [model(x[:, i:i + 1], cache=cache)[0] for i in range(5, 12)]
    torch.testing.assert_close(torch.cat([first] + steps, 1), full, atol=1e-5, rtol=1e-5)


def test_batched_with_padding_equals_one_by_one(model):
    rows = prompts(5, [3, 9, 1, 6, 4], seed=1)
    options = SamplingOptions(max_new_tokens=20)
    batched = generate(model, rows, options)
    assert batched == [generate(model, [r], options)[0] for r in rows]


def test_right_padded_tensor_input_is_handled(model):
    rows = prompts(3, [4, 8, 2], seed=2)
    ids = torch.zeros(3, 8, dtype=torch.long)
    mask = torch.zeros(3, 8, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
    assert unpad(ids, mask) == rows
    options = SamplingOptions(max_new_tokens=10)
    assert generate(model, ids, options, attention_mask=mask) == generate(model, rows, options)


def test_left_pad_layout():
    ids, mask = left_pad([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert left_pad([[1], [2]], 0)[1] is None
    with pytest.raises(ValueError, match="at least one token"):
        left_pad([[1], []], 0)


def test_top_k_keeps_k():
    logits = torch.randn(4, 50)
    kept = top_k_filter(logits, 7).isfinite().sum(-1)
    assert kept.tolist() == [7] * 4
    assert torch.equal(top_k_filter(logits, 0), logits)


def test_top_p_keeps_smallest_set_reaching_mass():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert top_p_filter(logits, 0.7).isfinite().tolist() == [[True, True, False, False]]
    assert top_p_filter(logits, 0.5).isfinite().tolist() == [[True, False, False, False]]
    assert top_p_filter(logits, 0.81).isfinite().tolist() == [[True, True, True, False]]
    shuffled = logits[:, [2, 0, 3, 1]]
    assert top_p_filter(shuffled, 0.7).isfinite().tolist() == [[False, True, False, True]]


def test_sampling_stays_in_top_k_and_top_p(model):
    torch.manual_seed(0)
    logits = torch.randn(1, 211)
    allowed = set(logits.topk(3).indices[0].tolist())
    from bertlab.inference.generate import next_token
    options = SamplingOptions(do_sample=True, top_k=3)
    g = torch.Generator().manual_seed(0)
    seen = torch.zeros(1, 1, dtype=torch.long)
    drawn = {next_token(logits, options, seen, g).item() for _ in range(200)}
    assert drawn == allowed


def test_repetition_penalty():
    logits = torch.tensor([[2.0, -2.0, 1.0]])
    out = apply_repetition_penalty(logits, torch.tensor([[0, 1, 0]]), 2.0)
    assert out.tolist() == [[1.0, -4.0, 1.0]]
    assert apply_repetition_penalty(logits, torch.tensor([[0]]), 1.0) is logits


def test_stop_strings_and_eos(model):
    rows = prompts(2, [4], seed=3)
    free = generate(model, rows, SamplingOptions(max_new_tokens=20))
    decode = lambda ids: "".join(f"<{i}>" for i in ids)  # noqa: E731
    stop = f"<{free[0][5]}>"
    stopped = generate(model, rows, SamplingOptions(max_new_tokens=20, stop=(stop,)), decode=decode)
    first = free[0].index(free[0][5])
    assert stopped[0] == free[0][:first + 1]
    assert truncate_at_stop(decode(stopped[0]), [stop]) == decode(free[0][:first])
    eos = free[1][3]
    ended = generate(model, rows, SamplingOptions(max_new_tokens=20, eos_token_id=eos))
    assert ended[1] == free[1][:free[1].index(eos) + 1]
    with pytest.raises(ValueError, match="decode"):
        generate(model, rows, SamplingOptions(stop=("x",)))


def test_streaming_callback_sees_every_token_in_order(model):
    seen = []
    out = generate(model, prompts(2, [3, 5]), SamplingOptions(max_new_tokens=6),
                   on_token=lambda row, t: seen.append((row, t)))
    assert [t for r, t in seen if r == 0] == out[0] and [t for r, t in seen if r == 1] == out[1]


def test_bad_options_and_too_long():
    with pytest.raises(ValueError, match="top_p"):
        SamplingOptions(top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingOptions(temperature=-1)
    model = GPT(GPTConfig.preset("test"))
    with pytest.raises(ValueError, match="exceeds"):
        generate(model, [[1] * 60], SamplingOptions(max_new_tokens=10))


@pytest.mark.parametrize("temperature, top_p", [(1e-300, 1.0), (1.0, 1e-300), (1e-300, 1e-300), (1e-40, 0.5)])
def test_a_vanishing_temperature_or_top_p_samples_the_most_likely_token(temperature, top_p):
    """Both crashed torch.multinomial (a request to `serve` got a 500): the logits divided by 1e-300
    overflowed, and a top-p that is 0 in float32 removed every token."""
    from bertlab.inference.generate import SamplingOptions, next_token
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(0))
    options = SamplingOptions(temperature=temperature, top_p=top_p, do_sample=True)
    chosen = next_token(logits, options, None, torch.Generator().manual_seed(1))
    assert torch.equal(chosen, logits.argmax(-1))
