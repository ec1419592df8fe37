"""Data-parallel pretraining: two gloo processes, each reading its half of every global batch
through the environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), end with
the parameters, optimizer moments, logged losses and token counts of one process reading the
whole batch."""
import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from bertlab.pretraining.objective import PretrainSettings, train_pretraining
from pretraining_data import TINY, assert_same_training_state, make_folders, train_records

STEPS = 3


def _settings(data, vocab_size, out, batch_size):
    model = {**TINY, "vocab_size": vocab_size, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    from bertlab.models import BertConfig
    return PretrainSettings(data=data, out=out, model=BertConfig(**model), batch_size=batch_size, lr=1e-3, warmup=1,
                            max_steps=STEPS, save_every=100, eval_every=100, seed=1, device="cpu", progress=False)


def _worker(rank, world, port, data, vocab_size, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    summary = train_pretraining(_settings(data, vocab_size, out, batch_size=4))
    assert summary["world_size"] == world and summary["steps"] == STEPS


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    train, _, tokenizer = make_folders(tmp_path_factory.mktemp("shards"), max_seq_length=32, masked=4, held_out=10,
                                       limit=400)
    return train, len(tokenizer.vocab)


def test_two_process_gloo_equals_one_process_on_the_combined_batch(shards, tmp_path):
    data, vocab_size = shards
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, data, vocab_size, str(tmp_path / "ddp")), nprocs=2, join=True)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_pretraining(_settings(data, vocab_size, str(tmp_path / "one"), batch_size=8))
    finally:
        torch.set_num_threads(before)
    assert_same_training_state(tmp_path / "one", tmp_path / "ddp")
    one, ddp = train_records(tmp_path / "one"), train_records(tmp_path / "ddp")
    assert len(one) == len(ddp) == STEPS
    for r, q in zip(one, ddp):
        assert q["loss"] == pytest.approx(r["loss"], abs=1e-5) and q["mlm_loss"] == pytest.approx(r["mlm_loss"], abs=1e-5)
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("one", "ddp")]
    assert summaries[0]["real_tokens"] == summaries[1]["real_tokens"] and summaries[1]["world_size"] == 2
    ranks = [rank["objective"] for rank in torch.load(tmp_path / "ddp" / "checkpoint.pt", weights_only=False)["data"]]
    assert len(ranks) == 2 and ranks[0]["orders"][0]["index"] == STEPS * 8
    assert (tmp_path / "ddp" / "model" / "model.safetensors").exists()  # written by rank 0 alone
