"""Files are untrusted input, outputs included: what bertlab writes, and only that, is ever replaced.

- A run folder holds a run when it holds anything a run writes (model, summary, metrics, curves,
  inputs.json, vectors.txt...), not only checkpoint.pt (which a user deletes to save space): every
  trainer refuses it without --overwrite and the finished model stays as it was.
- --overwrite replaces only bertlab's own outputs, in a folder bertlab made (its .bertlab marker):
  a folder of the user's is refused and keeps every file; a symbolic link is refused and what it
  points to is never touched; export keeps a user's OUT.tmp and the user's files in an export
  folder; create-pretraining-data keeps a user's notes.npy.
- Temporary names are bertlab's own (.bertlab-tmp-<pid>-...): a user's .tmp-notes survives a run
  start, and so does the temporary file of a process still running.
- A disk that fills during a checkpoint write says "No space left on device" and names the file
  (torch's zip writer says "unexpected pos"), and the previous checkpoint stays whole: simulated
  with a file whose writes fail after N bytes, the kernel's own RLIMIT_FSIZE (EFBIG), /dev/full,
  and (where this process may mount one) a 64 KiB tmpfs."""
import errno
import hashlib
import json
import os
import resource
import subprocess
import sys

import pytest
import torch

from bertlab import io as bio
from bertlab.io import MARKER, TEMP_PREFIX, atomic_write, remove_stale_temp_files
from bertlab.training.checkpoint import read_checkpoint, write_checkpoint
from cli_cases import assert_error, assert_ok, run_cli, write
from test_translation_training import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

DEAD = 2 ** 31 - 2  # no process has this id
HERE = os.path.dirname(__file__)
GOOGLE_FOLDER = os.path.join(HERE, "..", "data", "tf_checkpoints", "uncased_L-2_H-16_A-4")
SUMMARIES = os.path.join(HERE, "..", "data", "python-docs", "summaries.txt")
TEXT = "the cat sat on the mat .\nthe dog ran .\n"


@pytest.fixture(scope="module")
def f(tmp_path_factory):
    """A tiny BERT (with its MLM head), a fine-tuned classifier, text, a table, a GPT corpus, a
    toy language pair and pretraining shards: what the commands read."""
    from bertlab import BertConfig, BertForPreTraining, BertTokenizer, save_pretrained
    root = tmp_path_factory.mktemp("outputs")
    words = "the cat dog sat ran on a mat . , tired".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    bert = str(root / "bert")
    save_pretrained(BertForPreTraining(config).eval(), bert, BertTokenizer({t: i for i, t in enumerate(vocab)}))
    f = {"bert": bert, "vocab": os.path.join(bert, "vocab.txt"), "text": write(root / "text.txt", TEXT),
         "root": root}
    f["table"] = write(root / "train.tsv", "sentence\tlabel\n" + "".join(
        f"{s}\t{i % 2}\n" for i, s in enumerate(["the cat sat", "the dog ran", "a cat ran", "the mat"] * 2)))
    f["corpus"] = write(root / "corpus.txt", "".join(f"line {i}: the quick brown fox {i % 7} jumps\n"
                                                     for i in range(300)))
    f["doc"] = write(root / "doc.txt", "".join(f"the cat sat on the mat {i} .\nthe dog ran .\n\n" for i in range(30)))
    (root / "pairs").mkdir()
    f["pairs"] = str(write_corpus(root / "pairs"))
    assert_ok(run_cli("create-pretraining-data", f["doc"], "--vocab", bert, "-o", root / "shards", "--max-seq-length",
                      "16", "--max-predictions-per-seq", "2", "--dupe-factor", "1", "--workers", "1"))
    f["shards"] = str(root / "shards")
    assert_ok(run_cli(*TRAINERS["finetune"](f, root / "cls")))
    f["classifier"] = str(root / "cls" / "model")
    return f


TRAINERS = {  # a tiny run of each trainer into `out`: seconds each
    "pretrain": lambda f, out: ["pretrain", "--data", f["shards"], "--out", out, "--preset", "tiny", "--max-steps", "1",
                                "--batch-size", "2", "--device", "cpu"],
    "gpt-train": lambda f, out: ["gpt-train", f["corpus"], "--out", out, "--tokenizer", "char", "--n-layer", "1",
                                 "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
                                 "--max-steps", "1", "--warmup", "1", "--eval-interval", "1", "--eval-tokens", "100",
                                 "--device", "cpu"],
    "translate-train": lambda f, out: ["translate-train", "--data", f["pairs"], "--src", "en", "--tgt", "de", "--out",
                                       out, "--joint-vocab", "--vocab-size", "80", "--min-frequency", "1", "--preset",
                                       "test", "--max-tokens", "64", "--max-steps", "1", "--warmup", "1",
                                       "--eval-interval", "1", "--bleu-sentences", "2", "--device", "cpu"],
    "unilm-train": lambda f, out: ["unilm-train", "--train-src", f["text"], "--train-tgt", f["text"], "--vocab",
                                   f["bert"], "--layers", "1", "--hidden", "16", "--heads", "2", "--intermediate", "32",
                                   "--max-steps", "1", "--batch-size", "2", "--rouge-sentences", "0",
                                   "--max-source-tokens", "16", "--max-target-tokens", "8", "--quiet", "--device",
                                   "cpu", "--out", out],
    "word2vec train": lambda f, out: ["word2vec", "train", f["text"], "-o", out, "--min-count", "1", "--quiet",
                                      "--device", "cpu"],
    "finetune": lambda f, out: ["finetune", "--task", "classify", "--model", f["bert"], "--train", f["table"], "--dev",
                                f["table"], "--epochs", "1", "--batch-size", "4", "--max-steps", "1", "--quiet", "-o",
                                out, "--device", "cpu"],
    "distill": lambda f, out: ["distill", "--teacher", f["classifier"], "--student-layers", "1", "--train", f["table"],
                               "--dev", f["table"], "-o", out, "--max-steps", "1", "--quiet", "--device", "cpu"],
}
# The file each run's result is read from (word2vec's vectors; the others' model folder).
RESULT = {"word2vec train": "vectors.txt"}


def fingerprint(path) -> dict:
    """{relative path: SHA-256} of a file or every file under a folder (links not followed)."""
    path = str(path)
    if not os.path.isdir(path):
        with open(path, "rb") as fh:
            return {"": hashlib.sha256(fh.read()).hexdigest()}
    found = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as fh:
                found[os.path.relpath(full, path)] = hashlib.sha256(fh.read()).hexdigest()
    return found


# ---- a finished run without its checkpoint is still a run ------------------------------------------------

@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_a_finished_run_without_its_checkpoint_is_not_replaced(f, tmp_path, name):
    out = tmp_path / "run"
    argv = TRAINERS[name](f, out)
    assert_ok(run_cli(*argv))
    assert os.path.isfile(out / MARKER)  # bertlab made the folder, and says so
    if os.path.exists(out / "checkpoint.pt"):
        os.remove(out / "checkpoint.pt")  # three times the model's size: users delete it
    result = out / RESULT.get(name, "model")
    before = fingerprint(result)
    assert_error(run_cli(*argv), "already holds an earlier run", "--overwrite")
    assert fingerprint(result) == before
    assert_ok(run_cli(*argv, "--overwrite"))  # its own folder: replaced when asked


# ---- --overwrite in a folder of the user's ---------------------------------------------------------------

def users_folder(tmp_path):
    """A folder bertlab did not make, holding the user's notes and a `model` folder of theirs."""
    mine = tmp_path / "mine"
    (mine / "model").mkdir(parents=True)
    write(mine / "notes.txt", "my notes\n")
    write(mine / "model" / "weights.bin", b"my weights")
    return mine


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_overwrite_refuses_a_folder_bertlab_did_not_make(f, tmp_path, name):
    mine = users_folder(tmp_path)
    before = fingerprint(mine)
    argv = TRAINERS[name](f, mine)
    assert_error(run_cli(*argv), "already holds an earlier run (model)", "--overwrite")
    assert_error(run_cli(*argv, "--overwrite"), "bertlab did not make this folder", "notes.txt")
    assert fingerprint(mine) == before and sorted(os.listdir(mine)) == ["model", "notes.txt"]


OTHERS = {  # the other commands that write a folder: (argv, a file they write there)
    "vocab": (lambda f, out: ["vocab", f["text"], "-o", out, "--vocab-size", "50"], "vocab.txt"),
    "create-pretraining-data": (lambda f, out: ["create-pretraining-data", f["doc"], "--vocab", f["vocab"], "-o", out,
                                                "--max-seq-length", "16", "--max-predictions-per-seq", "2",
                                                "--dupe-factor", "1", "--workers", "1"], "meta.json"),
    "convert": (lambda f, out: ["convert", GOOGLE_FOLDER, "-o", out], "config.json"),
    "data python-docs": (lambda f, out: ["data", "python-docs", "--summaries", SUMMARIES, "-o", out], "train.txt"),
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_overwrite_refuses_a_users_folder_for_every_writer(f, tmp_path, name):
    argv, output = OTHERS[name]
    mine = tmp_path / "mine"
    mine.mkdir()
    write(mine / output, "the user's own file of that name\n")
    write(mine / "notes.txt", "my notes\n")
    before = fingerprint(mine)
    assert_error(run_cli(*argv(f, mine)), "already holds", "--overwrite")
    assert_error(run_cli(*argv(f, mine), "--overwrite"), "bertlab did not make this folder")
    assert fingerprint(mine) == before and not os.path.exists(mine / MARKER)


# ---- symbolic links --------------------------------------------------------------------------------------

LINKED = {**{name: (argv, "model") for name, argv in TRAINERS.items()}, **OTHERS,
          "export": (lambda f, out: ["export", f["bert"], "--onnx", out, "--no-check"], "model.onnx")}


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("name", sorted(LINKED))
def test_a_symlinked_output_folder_is_refused_and_its_target_untouched(f, tmp_path, name, overwrite):
    if name == "export":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    argv, output = LINKED[name]
    target = tmp_path / "elsewhere"
    target.mkdir()
    write(target / "notes.txt", "my notes\n")
    write(target / output, "the user's own file of that name\n")
    before = fingerprint(target)
    link = tmp_path / "link"
    os.symlink(target, link)
    assert_error(run_cli(*argv(f, link), *(["--overwrite"] if overwrite else [])), str(link), "symbolic link")
    assert fingerprint(target) == before and sorted(os.listdir(target)) == sorted(["notes.txt", output])
    assert os.path.islink(link)


def test_an_earlier_runs_link_is_removed_not_followed(f, tmp_path):
    """--overwrite in bertlab's own folder removes a link it finds under an output's name, never
    what the link points to (finetune empties the earlier run's files before starting)."""
    out = tmp_path / "run"
    argv = TRAINERS["finetune"](f, out)
    assert_ok(run_cli(*argv))
    precious = tmp_path / "precious"
    precious.mkdir()
    write(precious / "keep.txt", "keep me\n")
    os.remove(out / "summary.json")
    os.symlink(precious, out / "summary.json")
    assert_ok(run_cli(*argv, "--overwrite"))
    assert (precious / "keep.txt").read_text() == "keep me\n"
    assert not os.path.islink(out / "summary.json")


# ---- export ----------------------------------------------------------------------------------------------

def test_export_overwrite_refuses_a_foreign_folder_and_keeps_a_users_files(f, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    mine = tmp_path / "mine"
    mine.mkdir()
    write(mine / "notes.txt", "my notes\n")
    export = ["export", f["bert"], "--no-check", "--onnx"]
    assert_error(run_cli(*export, mine), "exists", "--overwrite")
    assert_error(run_cli(*export, mine, "--overwrite"), "bertlab did not make this folder", "notes.txt")
    assert sorted(os.listdir(mine)) == ["notes.txt"]

    out = tmp_path / "out"
    (tmp_path / "out.tmp").mkdir()  # a user's folder with the name the export once used for its own
    write(tmp_path / "out.tmp" / "draft.txt", "a draft\n")
    assert_ok(run_cli(*export, out))
    assert (tmp_path / "out.tmp" / "draft.txt").read_text() == "a draft\n"
    assert sorted(os.listdir(out)) == [MARKER, "model.onnx", "onnx.json"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(TEMP_PREFIX)]

    write(out / "README.txt", "what this export is for\n")  # the user's note beside the graphs
    write(out / "model.onnx", b"an old graph")
    assert_ok(run_cli(*export, out, "--overwrite"))
    assert (out / "README.txt").read_text() == "what this export is for\n"
    assert (out / "model.onnx").read_bytes() != b"an old graph"
    assert (tmp_path / "out.tmp" / "draft.txt").read_text() == "a draft\n"


def test_convert_task_writes_into_its_folder_and_keeps_the_users_siblings(tmp_path):
    """convert --task once swapped OUT through OUT.tmp, OUT.new and OUT.old beside it, deleting a
    user's folders of those names and every other file in OUT."""
    classifier = os.path.join(HERE, "..", "data", "tf_checkpoints", "run_classifier_output")
    out = tmp_path / "mrpc"
    for sibling in ("mrpc.tmp", "mrpc.new", "mrpc.old"):
        (tmp_path / sibling).mkdir()
        write(tmp_path / sibling / "keep.txt", "the user's\n")
    argv = ["convert", classifier, "-o", out, "--task", "mnli"]
    assert_ok(run_cli(*argv))
    write(out / "README.txt", "my notes on this model\n")
    assert_ok(run_cli(*argv, "--overwrite"))
    assert (out / "README.txt").read_text() == "my notes on this model\n" and os.path.isfile(out / MARKER)
    assert os.path.isfile(out / "task.json")
    assert all((tmp_path / s / "keep.txt").read_text() == "the user's\n" for s in ("mrpc.tmp", "mrpc.new", "mrpc.old"))


# ---- create-pretraining-data -----------------------------------------------------------------------------

def test_create_pretraining_data_overwrite_keeps_a_users_npy(f, tmp_path):
    out = tmp_path / "shards"
    argv = OTHERS["create-pretraining-data"][0](f, out)
    assert_ok(run_cli(*argv))
    import numpy as np
    np.save(out / "notes.npy", np.arange(3))
    os.mkdir(out / "extra.npy")  # a folder of the user's named like an array
    write(out / "extra.npy" / "keep.txt", "keep\n")
    assert_error(run_cli(*argv), "already holds pretraining data", "--overwrite")
    assert_ok(run_cli(*argv, "--overwrite"))
    assert np.load(out / "notes.npy").tolist() == [0, 1, 2]
    assert (out / "extra.npy" / "keep.txt").read_text() == "keep\n"
    assert os.path.exists(out / "meta.json")


# ---- temporary names -------------------------------------------------------------------------------------

def test_a_users_tmp_files_and_a_live_processs_temp_file_survive_a_run_start(f, tmp_path):
    out = tmp_path / "run"
    argv = TRAINERS["word2vec train"](f, out)
    assert_ok(run_cli(*argv))
    users = [write(out / ".tmp-notes", "my notes\n"), write(out / ".tmp-abc123checkpoint.pt", "mine too\n")]
    (out / "model").mkdir(exist_ok=True)
    users.append(write(out / "model" / ".tmp-draft", "draft\n"))
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = write(out / f"{TEMP_PREFIX}{live.pid}-x-vectors.txt", "being written\n")
        stale = write(out / f"{TEMP_PREFIX}{DEAD}-y-checkpoint.pt", b"\0" * 100)
        os.mkdir(out / f"{TEMP_PREFIX}{DEAD}-z-model")  # a killed export's or model's temporary folder
        write(out / f"{TEMP_PREFIX}{DEAD}-z-model" / "config.json", "{}")
        result = run_cli(*argv, "--overwrite")
        assert_ok(result)
        assert "removed temporary files" in result.err
        assert all(os.path.exists(p) for p in users) and os.path.exists(running)
        assert not os.path.exists(stale) and not os.path.exists(out / f"{TEMP_PREFIX}{DEAD}-z-model")
    finally:
        live.kill()
        live.wait()


def test_remove_stale_temp_files_takes_only_bertlabs_own_names_of_ended_processes(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = write(elsewhere / f"{TEMP_PREFIX}{DEAD}-v-x", "not under the folder\n")
    run = tmp_path / "run"
    run.mkdir()
    keep = [write(run / ".tmp-notes", "x"), write(run / f"{TEMP_PREFIX}{os.getpid()}-a-b", "mine, running"),
            write(run / f"{TEMP_PREFIX}notanumber-c", "x"), write(run / f".bertlab-tmp{DEAD}-d", "x")]
    os.symlink(elsewhere, run / f"{TEMP_PREFIX}{DEAD}-link")  # a link: neither followed nor removed
    gone = write(run / f"{TEMP_PREFIX}{DEAD}-e-checkpoint.pt", b"12345")
    assert remove_stale_temp_files(run) == 5
    assert all(os.path.exists(p) for p in keep) and not os.path.exists(gone)
    assert os.path.exists(victim) and os.path.islink(run / f"{TEMP_PREFIX}{DEAD}-link")


def test_atomic_writes_use_bertlabs_own_temporary_names(tmp_path, monkeypatch):
    seen = []
    real = bio.tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        seen.append(os.path.basename(name))
        return fd, name
    monkeypatch.setattr(bio.tempfile, "mkstemp", spy)
    atomic_write(tmp_path / "a.txt", lambda fh: fh.write("a"))
    assert seen and seen[0].startswith(f"{TEMP_PREFIX}{os.getpid()}-") and seen[0].endswith("-a.txt")
    assert os.listdir(tmp_path) == ["a.txt"]


# ---- a full disk -----------------------------------------------------------------------------------------

def step_of(path) -> int:
    return torch.load(path, weights_only=True)["step"]


def small_state(step):
    return {"model": {"w": torch.full((4,), float(step))}, "optimizer": {}, "scheduler": {}, "step": step,
            "rng": {}, "data": [], "extra": {}}


def big_state(step):
    return {**small_state(step), "model": {"w": torch.randn(200_000)}}


class FullAfter:
    """os.fdopen for atomic_write's temporary file, on a "disk" with `room` bytes left: raw writes
    past it fail with ENOSPC, as the kernel's do (the buffered file above raises it)."""

    def __init__(self, room):
        self.room, self.real = room, os.fdopen

    def __call__(self, fd, mode="r", *args, **kwargs):
        import io
        room = self

        class Raw(io.FileIO):
            def write(self, data):
                if len(data) > room.room:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                room.room -= len(data)
                return super().write(data)
        raw = Raw(fd, "wb")
        return io.BufferedWriter(raw) if "b" in mode else io.TextIOWrapper(io.BufferedWriter(raw), *args, **kwargs)


def test_a_full_disk_during_a_checkpoint_names_the_file_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "checkpoint.pt")
    write_checkpoint(path, small_state(1))
    # what torch.save makes of the failed write, unwrapped: the disk-full error is nowhere in the message
    with pytest.raises(RuntimeError, match="unexpected pos") as raw:
        with open(tmp_path / "probe.pt", "wb") as fh:
            torch.save(big_state(2), _FailingFile(fh, 4096))
    assert "space" not in str(raw.value).lower()
    monkeypatch.setattr(bio.os, "fdopen", FullAfter(room=50_000))
    with pytest.raises(OSError) as caught:
        write_checkpoint(path, big_state(2))
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == path
    assert "No space left on device" in str(caught.value) and path in str(caught.value)
    assert step_of(path) == 1  # the last checkpoint, whole
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.pt", "probe.pt"]  # no temporary file left


class _FailingFile:
    def __init__(self, fh, room):
        self.fh, self.room = fh, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)


def test_a_full_disk_during_a_run_is_one_clear_line_and_the_checkpoint_survives(f, tmp_path, monkeypatch):
    """pretrain saves at step 1, then the disk fills while step 2's checkpoint is written: the
    command ends with `OUT/checkpoint.pt: No space left on device`, and --resume still reads step 1."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to tell the checkpoint's temporary file apart")
    out = tmp_path / "run"
    argv = [*TRAINERS["pretrain"](f, out), "--save-every", "1"]
    argv[argv.index("--max-steps") + 1] = "2"
    full, real, writes = FullAfter(room=0), os.fdopen, []

    def fdopen(fd, *args, **kwargs):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("-checkpoint.pt"):
            writes.append(fd)
            if len(writes) == 2:
                return full(fd, *args, **kwargs)
        return real(fd, *args, **kwargs)
    monkeypatch.setattr(bio.os, "fdopen", fdopen)
    result = run_cli(*argv)
    monkeypatch.undo()
    line = assert_error(result, str(out / "checkpoint.pt"), "No space left on device")
    assert "unexpected pos" not in line
    assert read_checkpoint(out / "checkpoint.pt")["step"] == 1
    assert not [n for n in os.listdir(out) if n.startswith(TEMP_PREFIX)]


def test_a_file_size_limit_is_named_like_a_full_disk(tmp_path):
    """The kernel's own failure: past RLIMIT_FSIZE a write fails with EFBIG (Python ignores SIGXFSZ)."""
    path = str(tmp_path / "checkpoint.pt")
    write_checkpoint(path, small_state(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))
    try:
        with pytest.raises(OSError) as caught:
            write_checkpoint(path, big_state(2))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert caught.value.errno == errno.EFBIG and caught.value.filename == path
    assert path in str(caught.value) and os.strerror(errno.EFBIG) in str(caught.value)
    assert step_of(path) == 1  # the last checkpoint, whole
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_dev_full_is_named(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(OSError) as caught:
        atomic_write("/dev/full", lambda fh: torch.save(big_state(1), fh), mode="wb")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"
    with pytest.raises(OSError, match="No space left on device: '/dev/full'"):
        atomic_write("/dev/full", lambda fh: fh.write("x" * 100_000))


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs at tmp_path/disk, where this process may mount one (root, not in every sandbox)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_real_full_disk(tiny_tmpfs):
    path = str(tiny_tmpfs / "checkpoint.pt")
    write_checkpoint(path, small_state(1))
    with pytest.raises(OSError) as caught:
        write_checkpoint(path, big_state(2))
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == path
    assert "No space left on device" in str(caught.value)
    assert step_of(path) == 1  # the last checkpoint, whole
    assert os.listdir(tiny_tmpfs) == ["checkpoint.pt"]  # the partial file is gone: the space is back


def test_the_marker_says_which_command_made_the_folder(f, tmp_path):
    out = tmp_path / "v"
    assert_ok(run_cli(*OTHERS["vocab"][0](f, out)))
    assert json.loads((out / MARKER).read_text())["command"] == "vocab"
