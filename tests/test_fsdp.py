"""FSDP (fully_shard) under torchrun, on the CPU with gloo: two processes that shard the model train
it exactly as one process training the whole model on both processes' batches (losses, weights,
optimizer state), a run stopped and resumed under FSDP equals the run never stopped, and tied
weights (GPT's output layer, BERT's masked-LM decoder) stay tied."""
import json
import os
from dataclasses import replace

import pytest
import torch

from bertlab.models.accelerate import plain_class
from bertlab.training.engine import fit
from bertlab.lm.objective import GPTSettings, LanguageModeling
from engine_checks import char_token_files, free_port, reading_both_ranks, spawn, tiny_gpt_config

STEPS = 4
GPT_CONFIG = tiny_gpt_config()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return char_token_files(tmp_path_factory.mktemp("tokens"))


def gpt_settings(data, out, **kw):
    # grad_clip 0.5 is below every step's gradient norm here, so clipping acts; 5 held-out blocks
    # split 3 + 2, so the processes evaluate different numbers of batches
    return GPTSettings(**{**dict(data=data, out=str(out), model=GPT_CONFIG, batch_size=2, grad_accum=2, block_size=16,
                                 max_steps=STEPS, warmup=1, eval_every=2, save_every=100, eval_tokens=80, lr=0.3,
                                 grad_clip=0.5, device="cpu", progress=False, seed=3), **kw})


class MomentumSGD(LanguageModeling):
    """SGD with momentum: an update linear in the gradients (Adam would blow the rounding noise of
    gradients that are zero in exact arithmetic up to full-size steps), and a state to resume."""

    def optimizer(self, model, s):
        return torch.optim.SGD(model.parameters(), lr=s.lr, momentum=0.9)


BothShares = reading_both_ranks(MomentumSGD)  # one process whose step reads both processes' micro-batches


def _gpt_runs(data, out, ports):
    """Under FSDP: a whole run; a run stopped by its time budget after one step; its resumption."""
    for (name, kw), port in zip([("whole", {}), ("part", {"max_minutes": 0}), ("part", {"resume": True})], ports):
        os.environ["MASTER_PORT"] = str(port)
        s = gpt_settings(data, os.path.join(out, name), sharding="fsdp", **kw)
        summary = fit(MomentumSGD(s), s)
        assert summary["world_size"] == 2 and summary["sharding"] == "fsdp"
        # an ordinary module (fit's, accelerated), the whole weights, on every rank
        assert plain_class(type(summary["model"])).__name__ == "GPT"
        if int(os.environ["RANK"]) == 0:
            torch.save(summary["model"].state_dict(), os.path.join(out, name, "weights.pt"))


def train_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"], r["lr"]) for r in map(json.loads, f) if r["kind"] == "train"]


def eval_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if r["kind"] == "eval"]


def test_fsdp_gpt_equals_one_process_and_resumes_exactly(tokens, tmp_path):
    spawn(_gpt_runs, tokens, str(tmp_path), [free_port() for _ in range(3)])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = gpt_settings(tokens, tmp_path / "one", grad_accum=4)
        one = fit(BothShares(s), s)
    finally:
        torch.set_num_threads(threads)
    fsdp = torch.load(tmp_path / "whole" / "weights.pt")
    for name, p in one["model"].state_dict().items():
        torch.testing.assert_close(fsdp[name], p, atol=1e-6, rtol=1e-5, msg=name)
    for a, b in zip(train_losses(tmp_path / "whole"), train_losses(tmp_path / "one"), strict=True):
        assert a[0] == b[0] and a[1] == pytest.approx(b[1], rel=1e-6, abs=1e-7) and a[2] == b[2]
    for a, b in zip(eval_losses(tmp_path / "whole"), eval_losses(tmp_path / "one"), strict=True):
        assert a[0] == b[0] and a[1] == pytest.approx(b[1], rel=1e-6)
    # the FSDP checkpoint holds the whole state in the one-process format: same keys, same values
    sharded, whole = (torch.load(tmp_path / run / "checkpoint.pt", weights_only=True) for run in ("whole", "one"))
    assert sharded["model"].keys() == whole["model"].keys()
    assert sharded["optimizer"]["param_groups"] == whole["optimizer"]["param_groups"]
    for i, state in whole["optimizer"]["state"].items():
        torch.testing.assert_close(sharded["optimizer"]["state"][i]["momentum_buffer"], state["momentum_buffer"],
                                   atol=1e-6, rtol=1e-5, msg=str(i))
    # stopped after one step and resumed under FSDP: the same run, bit for bit
    assert train_losses(tmp_path / "part") == train_losses(tmp_path / "whole")
    resumed = torch.load(tmp_path / "part" / "weights.pt")
    for name, p in fsdp.items():
        assert torch.equal(resumed[name], p), name
    summary = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert summary["resumed_from_step"] == 1 and summary["steps"] == STEPS


def _bert_fsdp(data, vocab_size, out):
    from test_pretraining_ddp import _settings

    from bertlab.pretraining.objective import train_pretraining
    summary = train_pretraining(replace(_settings(data, vocab_size, out, batch_size=4), sharding="fsdp"))
    model = summary["model"]
    assert model.mlm.embedding_table is model.bert.embeddings.word_embeddings.weight  # still tied


def test_fsdp_bert_pretraining_with_tied_decoder_equals_one_process(tmp_path):
    """BERT's masked-LM decoder is the word-embedding Parameter itself; AdamW (fused) over shards
    ends with the parameters and moments of one process reading the whole batch, and OUT/model is
    an ordinary model folder."""
    from pretraining_data import assert_same_training_state, make_folders, train_records
    from test_pretraining_ddp import STEPS as BERT_STEPS, _settings

    from bertlab.interop.folder import read_state_dict
    from bertlab.pretraining.objective import train_pretraining
    train, _, tokenizer = make_folders(tmp_path / "data", max_seq_length=32, masked=4, held_out=10, limit=400)
    vocab_size = len(tokenizer.vocab)
    spawn(_bert_fsdp, train, vocab_size, str(tmp_path / "fsdp"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_pretraining(_settings(train, vocab_size, str(tmp_path / "one"), batch_size=8))
    finally:
        torch.set_num_threads(threads)
    assert_same_training_state(tmp_path / "one", tmp_path / "fsdp")
    one, fsdp = train_records(tmp_path / "one"), train_records(tmp_path / "fsdp")
    assert len(one) == len(fsdp) == BERT_STEPS
    for r, q in zip(one, fsdp):
        assert q["loss"] == pytest.approx(r["loss"], abs=1e-5)
        assert q["mlm_loss"] == pytest.approx(r["mlm_loss"], abs=1e-5)
    exported, reference = (read_state_dict(str(tmp_path / run / "model")) for run in ("fsdp", "one"))
    assert exported.keys() == reference.keys()
    for name, p in reference.items():
        torch.testing.assert_close(exported[name], p, atol=1e-6, rtol=1e-5, msg=name)


def _translation_fsdp(train, valid, tokenizer, config, out):
    from test_translation_training import PlainSGD, settings

    s = settings(out, config, lr=0.1, max_steps=4, eval_every=2, save_every=2, average_last=2, sharding="fsdp")
    summary = fit(PlainSGD(s, train, valid, tokenizer, tokenizer), s)
    model = summary["model"]
    assert model.output.weight is model.source_embedding.weight  # shared vocabulary: one table, three uses
    if int(os.environ["RANK"]) == 0:
        torch.save({"weights": model.state_dict(), "held_out": summary["held_out"]}, os.path.join(out, "result.pt"))


def test_fsdp_translation_equals_one_process(tmp_path):
    """The seq2seq Transformer (encoder and decoder blocks, embeddings shared with the output layer)
    under FSDP, with --average-last's snapshots taken from the sharded model: the averaged model and
    its held-out scores equal one process's reading both processes' batches."""
    from test_translation_training import PlainSGD, settings, toy_data, train_records

    from bertlab.models.transformer import TransformerConfig
    train, valid, tokenizer, config = toy_data(tmp_path)
    config = TransformerConfig.from_dict({**config.to_dict(hf=False), "dropout": 0.0})
    spawn(_translation_fsdp, train, valid, tokenizer, config, str(tmp_path / "fsdp"))
    s = settings(tmp_path / "one", config, lr=0.1, max_steps=4, eval_every=2, save_every=2, average_last=2,
                 grad_accum=2)
    one = fit(PlainSGD(s, train, valid, tokenizer, tokenizer), s)
    fsdp = torch.load(tmp_path / "fsdp" / "result.pt")
    for name, p in one["model"].state_dict().items():
        torch.testing.assert_close(fsdp["weights"][name], p, atol=1e-6, rtol=1e-6, msg=name)
    for (step, a), (_, b) in zip(*(train_records(tmp_path / out) for out in ("fsdp", "one")), strict=True):
        assert a == pytest.approx(b, rel=1e-6), step
    assert fsdp["held_out"] == pytest.approx(one["held_out"], rel=1e-6)
