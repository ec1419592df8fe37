"""A checkpoint saved by 2 processes resumes on 1 and on 4 (DDP and FSDP, gloo on the CPU): BERT
pretraining continues with the same optimizer state and data position, so the losses after the
restart and the final weights and Adam moments equal an uninterrupted run's (same global batch)
within float tolerance. An objective whose processes read streams of their own (GPT) is refused."""
import os
import shutil
from dataclasses import replace

import pytest
import torch

from engine_checks import spawn
from pretraining_data import assert_same_training_state, make_folders, train_records

STEPS = 5
GLOBAL_BATCH = 8


def _settings(data, vocab_size, out, world, **kw):
    from test_pretraining_ddp import _settings as tiny
    return replace(tiny(data, vocab_size, str(out), batch_size=GLOBAL_BATCH // world), max_steps=STEPS, **kw)


def _run(data, vocab_size, out, world, kw):
    from bertlab.pretraining.objective import train_pretraining
    summary = train_pretraining(_settings(data, vocab_size, out, world, **kw))
    assert summary["world_size"] == world


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    train, _, tokenizer = make_folders(tmp_path_factory.mktemp("shards"), max_seq_length=32, masked=4, held_out=10,
                                       limit=400)
    return train, len(tokenizer.vocab)


def _in_one_process(fn, *args):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn(*args)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_two_processes_saved_resume_on_one_and_on_four(shards, tmp_path, sharding):
    data, vocab_size = shards
    _in_one_process(_run, data, vocab_size, tmp_path / "whole", 1, {})
    # 2 processes, stopped by the time budget after their first step (a checkpoint at step 1)
    spawn(_run, data, vocab_size, str(tmp_path / "part"), 2, {"sharding": sharding, "max_minutes": 0})
    assert len(train_records(tmp_path / "part")) == 1
    shutil.copytree(tmp_path / "part", tmp_path / "on4")
    _in_one_process(_run, data, vocab_size, tmp_path / "part", 1, {"resume": True})
    spawn(_run, data, vocab_size, str(tmp_path / "on4"), 4, {"sharding": sharding, "resume": True}, world=4)
    _assert_resumed_as_whole(tmp_path)


def _assert_resumed_as_whole(tmp_path, sharded=False):
    """The runs resumed on 1 ("part") and on 4 processes ("on4") logged every step with the losses of
    the uninterrupted run ("whole") and end with its weights and Adam moments."""
    whole = train_records(tmp_path / "whole")
    for resumed in ("part", "on4"):
        records = train_records(tmp_path / resumed)
        assert [r["step"] for r in records] == list(range(1, STEPS + 1)), resumed
        for r, q in zip(whole, records):
            assert q["loss"] == pytest.approx(r["loss"], abs=1e-5), (resumed, r["step"])
            assert q["mlm_loss"] == pytest.approx(r["mlm_loss"], abs=1e-5), (resumed, r["step"])
        assert_same_training_state(tmp_path / "whole", tmp_path / resumed, sharded=sharded)


def _gpt(data, out, kw):
    from bertlab.lm.objective import GPTSettings, train_gpt
    from engine_checks import tiny_gpt_config
    train_gpt(GPTSettings(data=data, out=str(out), model=tiny_gpt_config(), batch_size=2, block_size=16, max_steps=4,
                          warmup=1, eval_every=100, save_every=100, eval_tokens=80, device="cpu", progress=False,
                          seed=3, **kw))


def test_a_position_of_its_own_per_process_is_not_moved_to_another_count(tmp_path):
    """GPT's processes each draw their own blocks (lm/token_stream.py): its checkpoint resumes only
    with the process count that saved it, and says so."""
    from engine_checks import char_token_files
    data = char_token_files(tmp_path)
    spawn(_gpt, data, str(tmp_path / "run"), {"max_minutes": 0})
    with pytest.raises(ValueError, match="saved by 2 processes, resumed with 1: each process of .* reads a data "
                                         "stream of its own.*resume with 2"):
        _gpt(data, tmp_path / "run", {"resume": True})
    assert os.path.exists(tmp_path / "run" / "checkpoint.pt")


@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_a_sharded_checkpoint_is_written_by_every_process_and_resumes_on_one_and_on_four(shards, tmp_path, sharding):
    """--checkpoint-format sharded: torch.distributed.checkpoint writes each process's part (under
    FSDP its shard: no process gathers the whole state), checkpoint.pt holds the rest and names the
    folder; the run resumes on 1 process and on 4 with the uninterrupted run's losses, weights and
    Adam moments."""
    from bertlab.training.checkpoint import read_checkpoint
    data, vocab_size = shards
    _in_one_process(_run, data, vocab_size, tmp_path / "whole", 1, {"checkpoint_format": "sharded"})
    spawn(_run, data, vocab_size, str(tmp_path / "part"), 2,
          {"sharding": sharding, "max_minutes": 0, "checkpoint_format": "sharded"})
    saved = read_checkpoint(tmp_path / "part" / "checkpoint.pt")
    assert saved["model"] == {} and saved["optimizer"] == {}
    folder = tmp_path / "part" / saved["extra"]["shards"]
    assert folder.parent == tmp_path / "part" / "checkpoint.shards" and (folder / ".metadata").exists()
    written = sorted(p.name for p in folder.glob("*.distcp"))
    if sharding == "fsdp":
        assert len(written) == 2, written  # each process wrote its shard
    shutil.copytree(tmp_path / "part", tmp_path / "on4")
    _in_one_process(_run, data, vocab_size, tmp_path / "part", 1, {"resume": True, "checkpoint_format": "sharded"})
    spawn(_run, data, vocab_size, str(tmp_path / "on4"), 4,
          {"sharding": sharding, "resume": True, "checkpoint_format": "sharded"}, world=4)
    _assert_resumed_as_whole(tmp_path, sharded=True)


def test_a_sharded_checkpoint_from_elsewhere_runs_no_code_and_stays_in_its_folder(tmp_path):
    """A run folder is something people share: the folder checkpoint.pt names must lie under
    OUT/checkpoint.shards, and DCP's pickled .metadata is read without running anything in it."""
    import pickle

    from engine_checks import char_token_files
    from bertlab.training.checkpoint import read_checkpoint, write_checkpoint
    data = char_token_files(tmp_path)
    run = tmp_path / "run"
    _gpt(data, run, {"max_minutes": 0, "checkpoint_format": "sharded"})
    state = read_checkpoint(run / "checkpoint.pt")
    folder = run / state["extra"]["shards"]

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))
    metadata = (folder / ".metadata").read_bytes()
    (folder / ".metadata").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ValueError, match=r"\.metadata: not a checkpoint's metadata \((posix|os)\.system is not part"):
        _gpt(data, run, {"resume": True, "checkpoint_format": "sharded"})
    assert not (tmp_path / "ran").exists()
    (folder / ".metadata").write_bytes(metadata)
    for name in ("../elsewhere", "/tmp", "model"):
        write_checkpoint(run / "checkpoint.pt", {**state, "extra": {**state["extra"], "shards": name}})
        with pytest.raises(ValueError, match="must name a folder under"):
            _gpt(data, run, {"resume": True, "checkpoint_format": "sharded"})
    write_checkpoint(run / "checkpoint.pt", state)
    _gpt(data, run, {"resume": True, "checkpoint_format": "sharded"})  # the genuine folder resumes


def _translation(train, valid, tokenizer, config, out, kw):
    from test_translation_training import PlainSGD, settings

    from bertlab.training.engine import fit
    s = settings(out, config, lr=0.1, max_steps=4, eval_every=100, save_every=100, **kw)
    fit(PlainSGD(s, train, valid, tokenizer, tokenizer), s)


def test_translation_saved_by_two_processes_resumes_on_one(tmp_path):
    """Translation's batches are one sequence dealt out in turn: 2 processes x 1 micro-batch and
    1 process x --grad-accum 2 read the same batches, so a checkpoint moves between them."""
    from test_translation_training import toy_data, train_records

    from bertlab.models.transformer import TransformerConfig
    train, valid, tokenizer, config = toy_data(tmp_path)
    config = TransformerConfig.from_dict({**config.to_dict(hf=False), "dropout": 0.0})
    _in_one_process(_translation, train, valid, tokenizer, config, tmp_path / "whole", {"grad_accum": 2})
    spawn(_translation, train, valid, tokenizer, config, str(tmp_path / "part"), {"max_minutes": 0})
    assert len(train_records(tmp_path / "part")) == 1
    _in_one_process(_translation, train, valid, tokenizer, config, tmp_path / "part",
                    {"grad_accum": 2, "resume": True})
    whole, resumed = train_records(tmp_path / "whole"), train_records(tmp_path / "part")
    assert [step for step, _ in resumed] == [1, 2, 3, 4]
    for (step, a), (_, b) in zip(whole, resumed, strict=True):
        assert b == pytest.approx(a, rel=1e-5), step


def test_export_hf_writes_the_model_folder_from_either_format(shards, tmp_path):
    """bertlab export RUN --hf OUT: the folder a run writes at its end, from its last checkpoint now:
    from a one-file and from a sharded checkpoint of 2 FSDP processes (the same step) the same
    weights, an HF folder every loader reads; a GPT run's too."""
    from bertlab.cli import main
    from bertlab.interop.folder import read_state_dict
    from bertlab.interop.load import load_model
    data, vocab_size = shards
    for fmt in ("file", "sharded"):
        spawn(_run, data, vocab_size, str(tmp_path / fmt), 2,
              {"sharding": "fsdp", "max_minutes": 0, "checkpoint_format": fmt})
        assert main(["export", str(tmp_path / fmt), "--hf", str(tmp_path / f"{fmt}-model")]) == 0
    a, b = (read_state_dict(str(tmp_path / f"{fmt}-model")) for fmt in ("file", "sharded"))
    assert a.keys() == b.keys() and len(a) > 10
    for name, p in a.items():
        torch.testing.assert_close(b[name], p, atol=1e-6, rtol=1e-6, msg=name)
    assert load_model(str(tmp_path / "sharded-model")).kind in ("bert", "pretraining")
    assert main(["export", str(tmp_path / "file"), "--hf", str(tmp_path / "file-model")]) == 2  # no --overwrite

    # a finished gpt-train run keeps its last checkpoint: exported, it is the run's own OUT/model
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(200)), encoding="utf-8")
    assert main(["gpt-train", str(corpus), "--out", str(tmp_path / "gpt"), "--tokenizer", "char", "--preset", "tiny",
                 "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
                 "--max-steps", "3", "--warmup", "1", "--eval-tokens", "100", "--quiet", "--device", "cpu",
                 "--checkpoint-format", "sharded"]) == 0
    assert main(["export", str(tmp_path / "gpt"), "--hf", str(tmp_path / "gpt-model")]) == 0
    assert load_model(str(tmp_path / "gpt-model")).kind == "gpt"
    a, b = (read_state_dict(str(tmp_path / folder)) for folder in ("gpt/model", "gpt-model"))
    assert a.keys() == b.keys()
    for name, p in a.items():
        assert torch.equal(b[name], p), name
