"""Run folders are shared, so nothing read from one may run code: a crafted checkpoint.pt whose
unpickling would run a payload is refused on --resume by every trainer, and the payload never
runs. Also: a truncated checkpoint is a clear error, a torn last metrics line (a kill mid-write)
does not block --resume, and temporary files of a killed write are removed at the next start.
(finetune's crafted checkpoint: test_hardening_finetune.py.)"""
import json
import os

import pytest
import torch

from bertlab.io import TEMP_PREFIX, atomic_write, remove_stale_temp_files
from bertlab.training.checkpoint import read_checkpoint
from bertlab.training.metrics import MetricsLog
from cli_cases import assert_error, assert_ok, run_cli, write
from pretraining_data import TINY, make_folders
from test_translation_training import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead
DEAD = 2 ** 31 - 2  # no process has this id: a temporary file named with it is a killed write's


class Payload:
    """Unpickling this calls open(MARKER, "w"): proof that code ran."""
    marker = None

    def __reduce__(self):
        return (open, (self.marker, "w"))


def gpt_run(tmp, out):
    corpus = write(tmp / "corpus.txt", "".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(300)))
    return ["gpt-train", corpus, "--out", out, "--tokenizer", "char", "--preset", "tiny", "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--max-steps", "2",
            "--warmup", "1", "--eval-interval", "2", "--eval-tokens", "200", "--device", "cpu"]


def pretrain_run(tmp, out):
    train, _, tokenizer = make_folders(tmp / "shards", max_seq_length=32, masked=4)
    config = write(tmp / "tiny.json", json.dumps({**TINY, "vocab_size": len(tokenizer.vocab)}))
    return ["pretrain", "--data", train, "--config", config, "--out", out, "--batch-size", "4", "--max-steps", "2",
            "--warmup", "1", "--save-every", "2", "--eval-every", "1000", "--device", "cpu"]


def translate_run(tmp, out):
    data = write_corpus(tmp)
    return ["translate-train", "--data", data, "--src", "en", "--tgt", "de", "--out", out, "--joint-vocab",
            "--vocab-size", "80", "--min-frequency", "1", "--preset", "test", "--max-tokens", "64", "--max-steps",
            "2", "--warmup", "1", "--eval-interval", "2", "--bleu-sentences", "2", "--device", "cpu"]


TRAINERS = {"gpt-train": gpt_run, "pretrain": pretrain_run, "translate-train": translate_run}


@pytest.fixture(scope="module", params=sorted(TRAINERS))
def trained(request, tmp_path_factory):
    """A real two-step run of each trainer: (its command line, its run folder)."""
    tmp = tmp_path_factory.mktemp(request.param)
    out = str(tmp / "run")
    argv = TRAINERS[request.param](tmp, out)
    assert_ok(run_cli(*argv))
    return argv, out


def test_a_real_checkpoint_loads_without_pickled_objects(trained):
    _, out = trained
    state = read_checkpoint(os.path.join(out, "checkpoint.pt"))  # weights_only=True inside
    assert state["step"] == 2


def test_a_crafted_checkpoint_is_refused_and_its_payload_never_runs(trained, tmp_path):
    argv, out = trained
    path = os.path.join(out, "checkpoint.pt")
    genuine = torch.load(path, weights_only=True)
    Payload.marker = str(tmp_path / "payload-ran")
    torch.save({**genuine, "extra": {**genuine["extra"], "hook": Payload()}}, path)
    try:
        assert_error(run_cli(*argv, "--resume"), path, "refused", "run code")
        assert not os.path.exists(Payload.marker)
    finally:
        torch.save(genuine, path)


def test_a_truncated_checkpoint_is_a_clear_error(trained):
    argv, out = trained
    path = os.path.join(out, "checkpoint.pt")
    with open(path, "rb") as f:
        genuine = f.read()
    try:
        write(path, genuine[: len(genuine) // 3])
        assert_error(run_cli(*argv, "--resume"), path, "truncated or corrupt")
    finally:
        write(path, genuine)


def test_resume_tolerates_a_torn_last_metrics_line_and_removes_stale_temp_files(trained):
    argv, out = trained
    with open(os.path.join(out, "metrics.jsonl"), "a", encoding="utf-8") as f:
        f.write('{"step": 3, "kind": "tra')  # killed in the middle of a write
    stale = write(os.path.join(out, f"{TEMP_PREFIX}{DEAD}-abc123-checkpoint.pt"), b"\0" * 1000)
    max_steps = argv.index("--max-steps") + 1
    resumed = [*argv[:max_steps], "3", *argv[max_steps + 1:], "--resume"]
    assert_ok(run_cli(*resumed))
    assert not os.path.exists(stale)
    records = MetricsLog(os.path.join(out, "metrics.jsonl")).read()
    assert max(r["step"] for r in records) == 3


def test_a_corrupt_metrics_line_before_the_last_is_an_error(tmp_path):
    path = write(tmp_path / "metrics.jsonl", '{"step": 1, "kind": "train"}\nnot json\n{"step": 2, "kind": "train"}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:2: not a JSON record"):
        MetricsLog(path).read()


def test_stale_temp_files_of_a_killed_write_are_found_in_subfolders(tmp_path):
    (tmp_path / "model").mkdir()
    keep = write(tmp_path / "model" / "config.json", "{}")
    stale = [write(tmp_path / f"{TEMP_PREFIX}{DEAD}-x-checkpoint.pt", b"1234"),
             write(tmp_path / "model" / f"{TEMP_PREFIX}{DEAD}-y-model.safetensors", b"12")]
    assert remove_stale_temp_files(tmp_path) == 6
    assert not any(os.path.exists(p) for p in stale) and os.path.exists(keep)

    def killed(f):
        f.write("half")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "x.txt", killed)
    assert os.listdir(tmp_path) == ["model"]  # a write that fails in Python cleans up after itself


@pytest.mark.parametrize("device, needle", [("gpu", "unknown device"), ("cuda:7", "not available"),
                                            ("tpu", "unknown device")])
def test_unknown_devices_are_clear_errors(device, needle, tmp_path):
    text = write(tmp_path / "a.txt", "hello\n")
    assert_error(run_cli("embed", text, "-o", tmp_path / "a.npy", "--model", "minilm", "--device", device),
                 "--device", needle)


def test_an_output_that_is_a_device_or_pipe_is_written_in_place(tmp_path):
    """`-o /dev/null` or a named pipe is written through, never renamed over: as root the rename
    once put a regular file where /dev/null was. A pipe stands in for the device here."""
    import stat
    import threading
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe).read()))
    reader.start()
    atomic_write(pipe, lambda f: f.write("a line\n"))
    reader.join(10)
    assert got == ["a line\n"] and stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temporary file left beside it
