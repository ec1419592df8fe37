"""Training: stopped-and-resumed equals uninterrupted, gradient accumulation equals the big batch,
2-process gloo DDP equals one process on the combined batch, schedules, token stream."""
import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from bertlab.lm.token_stream import TokenStream, prepare_token_files, split_lines, unigram_perplexity
from bertlab.models import GPT, GPTConfig
from bertlab.tokenization.char_level import CharTokenizer
from bertlab.training import lr_multiplier, make_adamw, make_scheduler, param_groups
from bertlab.training.engine import train_step
from bertlab.lm.objective import GPTSettings, LanguageModeling, train_gpt

CONFIG = GPTConfig.preset("test", n_positions=16, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokens")
    text = folder / "corpus.txt"
    text.write_text("".join(f"line {i}: the quick brown fox {i % 7} jumps over the lazy dog\n"
                            for i in range(400)), encoding="utf-8")
    tok = CharTokenizer.train([text.read_text(encoding="utf-8")])
    prepare_token_files([str(text)], tok, str(folder), val_fraction=0.1)
    return str(folder), tok


def settings(data_dir, out, **kw):
    base = dict(data=data_dir, out=str(out), model=GPTConfig.from_dict({**CONFIG.to_dict(hf=False), "vocab_size": 40}),
                batch_size=4, block_size=16, max_steps=8, schedule_steps=8, warmup=2, eval_every=4,
                save_every=100, eval_tokens=500, lr=3e-3, progress=False, seed=3)
    return GPTSettings(**{**base, **kw})


def losses(out):
    import json
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if r["kind"] == "train"]


def test_stopped_and_resumed_equals_uninterrupted(data, tmp_path):
    whole = train_gpt(settings(data[0], tmp_path / "a"))
    train_gpt(settings(data[0], tmp_path / "b", max_steps=5))
    resumed = train_gpt(settings(data[0], tmp_path / "b", resume=True))
    assert resumed["steps"] == whole["steps"] == 8
    assert losses(tmp_path / "a") == losses(tmp_path / "b") and len(losses(tmp_path / "a")) == 8
    assert resumed["val_loss"] == whole["val_loss"]
    for (name, p), q in zip(whole["model"].named_parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q), name


def test_resume_refuses_another_model(data, tmp_path):
    train_gpt(settings(data[0], tmp_path, max_steps=1))
    other = GPTConfig.from_dict({**CONFIG.to_dict(hf=False), "vocab_size": 40, "n_layer": 1})
    with pytest.raises(ValueError, match="was trained with"):
        train_gpt(settings(data[0], tmp_path, model=other, resume=True))


def _batches(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 97, (n, 12), generator=g)
    return x, torch.randint(0, 97, (n, 12), generator=g)


def _fresh(seed=0):
    torch.manual_seed(seed)
    model = GPT(GPTConfig.preset("test", n_positions=16, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
    opt = make_adamw(model, 1e-2)
    return model, opt, make_scheduler(opt, "cosine", 1, 10)


def _fresh_sgd():
    """SGD: the update is the gradient itself (Adam's first step is ~sign(g), blind to its size)."""
    model, _, _ = _fresh()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    return model, opt, make_scheduler(opt, "constant")


def test_gradient_accumulation_equals_big_batch():
    x, y = _batches(8)
    big, opt, sched = _fresh_sgd()
    train_step(big, opt, sched, lambda: (x, y), grad_clip=0)
    small, opt, sched = _fresh_sgd()
    parts = iter([(x[i:i + 2], y[i:i + 2]) for i in range(0, 8, 2)])
    train_step(small, opt, sched, lambda: next(parts), grad_accum=4, grad_clip=0)
    for p, q in zip(big.parameters(), small.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def _ddp_worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    from torch.nn.parallel import DistributedDataParallel

    from bertlab.training.distributed import setup_distributed
    info = setup_distributed(torch.device("cpu"))
    model, opt, sched = _fresh_sgd()
    net = DistributedDataParallel(model)
    x, y = _batches(8)
    half = [(x[i:i + 2], y[i:i + 2]) for i in range(rank * 4, rank * 4 + 4, 2)]  # 2 micro-batches each
    for _ in range(2):
        it = iter(half)
        train_step(net, opt, sched, lambda: next(it), grad_accum=2, grad_clip=1.0)
    if rank == 0:
        torch.save(model.state_dict(), out)
    torch.distributed.destroy_process_group()
    assert info.world_size == world


def test_two_process_ddp_equals_one_process(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "ddp.pt")
    mp.spawn(_ddp_worker, args=(2, port, out), nprocs=2, join=True)
    single, opt, sched = _fresh_sgd()
    x, y = _batches(8)
    for _ in range(2):
        train_step(single, opt, sched, lambda: (x, y), grad_clip=1.0)
    ddp = torch.load(out)
    for name, p in single.state_dict().items():
        torch.testing.assert_close(ddp[name], p, atol=1e-6, rtol=1e-5, msg=name)


def test_schedules():
    assert lr_multiplier(0, "cosine", 10, 100) == pytest.approx(0.1)
    assert lr_multiplier(9, "cosine", 10, 100) == pytest.approx(1.0)
    assert lr_multiplier(100, "cosine", 10, 100, 0.1) == pytest.approx(0.1)
    assert lr_multiplier(55, "linear", 10, 100, 0.0) == pytest.approx(0.5)
    assert lr_multiplier(39, "inverse_sqrt", 10, 100) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_multiplier(0, "step", 1, 1)


def test_no_weight_decay_on_layernorm_and_bias():
    model = GPT(GPTConfig.preset("test"))
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(names[id(p)].endswith("weight") and ".norm." not in names[id(p)] and "ln_f" not in names[id(p)]
               for p in decay["params"])
    assert {names[id(p)] for p in no_decay["params"]} >= {"ln_f.weight", "ln_f.bias", "h.0.self_attention.query.bias"}
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_token_stream_deterministic_disjoint_ranks(data):
    folder, _ = data
    path = os.path.join(folder, "train.bin")
    a, b = TokenStream(path, 8, seed=1), TokenStream(path, 8, seed=1)
    xa, ya = a.batch(4)
    assert torch.equal(xa, b.batch(4)[0]) and torch.equal(xa[:, 1:], ya[:, :-1])
    state = a.state_dict()
    nxt = a.batch(4)[0]
    a.load_state_dict(state)
    assert torch.equal(a.batch(4)[0], nxt)
    r0, r1 = TokenStream(path, 8, 1, 0, 2), TokenStream(path, 8, 1, 1, 2)
    assert r0.tokens.size == r1.tokens.size and not np.shares_memory(np.asarray(r0.tokens), np.asarray(r1.tokens)) \
        or r0.tokens.offset != r1.tokens.offset


def test_split_and_unigram_baseline():
    lines = [[f"l{i}" for i in range(640)]]
    train, val = split_lines(lines, 0.1)
    assert len(val) == 64 and len(train) == 576 and not set(train) & set(val)
    uniform = unigram_perplexity(np.arange(10).repeat(5), np.arange(10), 10)
    assert uniform == pytest.approx(10.0)


def _gpt_cli(files, out, save_every):
    return ["gpt-train", *files, "--out", str(out), "--tokenizer", "char", "--preset", "tiny", "--n-layer", "1",
            "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--max-steps", "12",
            "--warmup", "2", "--dropout", "0.1", "--eval-every", "100", "--save-every", str(save_every),
            "--eval-tokens", "200", "--seed", "4", "--quiet"]


def test_kill_9_then_resume_through_the_engine(tmp_path):
    """gpt-train killed mid-run (SIGKILL, no chance to clean up) and resumed: the same losses at
    every step and the same final weights as the run never stopped."""
    from engine_checks import kill_9_then_resume, same_weights
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(300)), encoding="utf-8")
    kill_9_then_resume(lambda out: _gpt_cli([str(corpus)], out, 100 if out.endswith("whole") else 2),
                       str(tmp_path / "whole"), str(tmp_path / "killed"), steps=12)
    same_weights(*(torch.load(tmp_path / out / "checkpoint.pt")["model"] for out in ("whole", "killed")))


class _PlainSGD(LanguageModeling):
    """SGD, whose update is the gradient itself: Adam would blow the rounding noise of gradients that
    are zero in exact arithmetic (the key bias's) up to full-size steps."""

    def optimizer(self, model, s):
        return torch.optim.SGD(model.parameters(), lr=s.lr)


def _fit_two_ranks(data_dir, out):
    from bertlab.training.engine import fit
    s = settings(data_dir, out, model=_NO_DROPOUT, batch_size=2, grad_accum=1, max_steps=4, lr=0.5)
    summary = fit(_PlainSGD(s), s)
    if int(os.environ["RANK"]) == 0:
        torch.save(summary["model"].state_dict(), os.path.join(out, "weights.pt"))


_NO_DROPOUT = GPTConfig.from_dict({**CONFIG.to_dict(hf=False), "vocab_size": 40, "resid_pdrop": 0.0,
                                   "embd_pdrop": 0.0, "attn_pdrop": 0.0})


def test_two_process_fit_equals_one_process_reading_both_shares(data, tmp_path):
    """fit() under torchrun (2 processes, gloo, DDP) equals one process whose optimizer step reads
    both ranks' micro-batches (grad_accum 2): the engine's data parallelism is exact."""
    from engine_checks import reading_both_ranks, spawn

    from bertlab.training.engine import fit
    BothShares = reading_both_ranks(_PlainSGD)

    spawn(_fit_two_ranks, data[0], str(tmp_path / "ddp"))
    s = settings(data[0], tmp_path / "one", model=_NO_DROPOUT, batch_size=2, grad_accum=2, max_steps=4, lr=0.5)
    one = fit(BothShares(s), s)
    ddp = torch.load(tmp_path / "ddp" / "weights.pt")
    for name, p in one["model"].state_dict().items():
        torch.testing.assert_close(ddp[name], p, atol=1e-6, rtol=1e-5, msg=name)
    for a, b in zip(*(losses(tmp_path / out) for out in ("ddp", "one"))):
        assert a[0] == b[0] and a[1] == pytest.approx(b[1], rel=1e-5)
