"""Checkpoints and data files are checked against the run before they are used (the issue "Files are
untrusted input", rule 2): a crafted file per rule, each ending in a clear error that names the file and
the entry, never a crash, a silent cast or a run reported as done.

- checkpoint.pt: every model tensor (name, shape, dtype, finite), the optimizer's groups and per-parameter
  state (an Adam moment of the wrong shape made `pretrain --resume` write out of bounds in the fused
  AdamW: a segfault), the step and counters, the scheduler's state, the random generator states (a numpy
  position past its keys read out of bounds: a segfault) and each objective's own position;
- gpt-train's data/: meta.json's dtype (an "O" made np.memmap read the file as object pointers: a
  segfault), the ids against the vocabulary;
- pretraining shards: the dtypes create-pretraining-data writes (float ids were truncated and trained
  on), every value in range, shard names inside the folder.

The cases that crashed, or could if their check were missing, run in a subprocess: a crash there fails
the test instead of ending the test run."""
import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from bertlab.lm.token_stream import TokenStream, load_tokens
from bertlab.training.data_order import DataOrder
from bertlab.pretraining.shards import PretrainingData
from cli_cases import Result, assert_error, assert_ok, run_cli, write
from pretraining_data import TINY, make_folders
from test_translation_training import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead


def run_subprocess(*argv) -> Result:
    """`python -m bertlab ARGV` in a child process: a segfault ends it (a negative return code), not pytest."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "bertlab", *map(str, argv)], capture_output=True, text=True,
                          timeout=300, env=env)
    return Result(done.returncode, done.stdout, done.stderr)


def with_max_steps(argv, steps: int) -> list:
    i = argv.index("--max-steps") + 1
    return [*argv[:i], str(steps), *argv[i + 1:]]


@contextlib.contextmanager
def tampered(run: dict, edit):
    """The run's checkpoint.pt replaced by a copy of the genuine state with `edit(state)` applied,
    the genuine one put back afterwards."""
    state = copy.deepcopy(run["genuine"])
    edit(state)
    torch.save(state, run["path"])
    try:
        yield
    finally:
        torch.save(run["genuine"], run["path"])


def put(*keys, value):
    """An edit setting state[k1][k2]... to `value` (a function of the old value, where callable)."""
    def edit(state):
        target = state
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value(target[keys[-1]]) if callable(value) else value
    return edit


def drop(*keys):
    def edit(state):
        target = state
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]
    return edit


# ---- a tiny pretraining run, resumed from crafted checkpoints ---------------------------------------------

@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A real two-step `pretrain` run: its --resume command line (to 4 steps), its checkpoint."""
    tmp = tmp_path_factory.mktemp("pretrain")
    train, _, tokenizer = make_folders(tmp / "shards", max_seq_length=32, masked=4)
    config = write(tmp / "tiny.json", json.dumps({**TINY, "vocab_size": len(tokenizer.vocab)}))
    out = str(tmp / "run")
    argv = ["pretrain", "--data", train, "--config", config, "--out", out, "--batch-size", "4", "--max-steps", "2",
            "--warmup", "1", "--save-every", "2", "--eval-every", "1000", "--device", "cpu"]
    assert_ok(run_cli(*argv))
    path = os.path.join(out, "checkpoint.pt")
    return {"resume": [*with_max_steps(argv, 4), "--resume"], "path": path, "shards": train,
            "genuine": torch.load(path, weights_only=True)}


QUERY = "optimizer state for parameter 3 (bert.layers.0.attention.query.weight)"  # a (32, 32) matrix

# name: (edit, the needles of the one-line error). Every error names the file as well (checked below).
OPTIMIZER_CASES = {
    "moment-of-wrong-shape": (put("optimizer", "state", 3, "exp_avg", value=torch.zeros(4)),
                              [QUERY, "exp_avg has shape (4,) but the parameter's is (32, 32)"]),
    "larger-second-moment": (put("optimizer", "state", 3, "exp_avg_sq", value=torch.zeros(64, 64)),
                             [QUERY, "exp_avg_sq has shape (64, 64)"]),
    "transposed-moment": (put("optimizer", "state", 0, "exp_avg", value=lambda t: t.t().contiguous()),
                          ["optimizer state for parameter 0 (bert.embeddings.word_embeddings.weight)", "has shape (32,"]),
    "step-of-four-elements": (put("optimizer", "state", 3, "step", value=torch.zeros(4)),
                              [QUERY, "step is a torch.float32 tensor of shape (4,)", "0-d float tensor"]),
    "strided-moment": (put("optimizer", "state", 3, "exp_avg", value=torch.zeros(1, 32).expand(32, 32)),
                       [QUERY, "exp_avg is not contiguous"]),
    "float64-moment": (put("optimizer", "state", 3, "exp_avg", value=lambda t: t.double()),
                       [QUERY, "exp_avg is torch.float64 but the parameter's is torch.float32"]),
    "integer-moment": (put("optimizer", "state", 3, "exp_avg_sq", value=lambda t: t.long()),
                       [QUERY, "exp_avg_sq is torch.int64"]),
    "moment-not-a-tensor": (put("optimizer", "state", 3, "exp_avg", value=[0.0] * 4),
                            [QUERY, "exp_avg is a list of 4, not a tensor"]),
    "nan-moment": (put("optimizer", "state", 3, "exp_avg", value=lambda t: torch.full_like(t, float("nan"))),
                   [QUERY, "exp_avg holds NaN or infinite values"]),
    "moments-sharing-memory": (lambda s: s["optimizer"]["state"][3].update(exp_avg_sq=s["optimizer"]["state"][3]["exp_avg"]),
                               [QUERY, "shares its memory with another state tensor"]),
    "missing-moment": (drop("optimizer", "state", 3, "exp_avg_sq"), [QUERY, "has no exp_avg_sq"]),
    "unknown-state-entry": (put("optimizer", "state", 3, "momentum_buffer", value=torch.zeros(32, 32)),
                            [QUERY, "'momentum_buffer' that the optimizer does not keep"]),
    "state-of-a-parameter-it-lacks": (lambda s: s["optimizer"]["state"].update({999: {}}),
                                      ["state for parameter 999, but the optimizer has parameters 0 to"]),
    "negative-parameter-step": (put("optimizer", "state", 3, "step", value=torch.tensor(-1.0)),
                                [QUERY, "step is -1.0", "from 0 to 2"]),
    "parameter-step-past-the-checkpoint": (put("optimizer", "state", 3, "step", value=torch.tensor(1e6)),
                                           [QUERY, "step is 1000000.0", "from 0 to 2"]),
    "fractional-parameter-step": (put("optimizer", "state", 3, "step", value=torch.tensor(1.5)),
                                  [QUERY, "must be a whole number"]),
    "parameter-step-as-a-number": (put("optimizer", "state", 3, "step", value=2),
                                   [QUERY, "step is a whole number (2)", "0-d float tensor"]),
    "one-group-missing": (put("optimizer", "param_groups", value=lambda g: g[:1]),
                          ["optimizer: 1 parameter groups, but this run's optimizer has 2"]),
    "groups-renumbered": (put("optimizer", "param_groups", 0, "params", value=lambda p: p[::-1]),
                          ["optimizer group 0: its parameters are [17, 16,", "numbers them 0 to 17"]),
    "group-without-betas": (drop("optimizer", "param_groups", 1, "betas"), ["optimizer group 1 has no betas setting"]),
    "group-with-a-strange-setting": (put("optimizer", "param_groups", 0, "hook", value="x"),
                                     ["optimizer group 0 has a setting 'hook'"]),
    "nan-learning-rate": (put("optimizer", "param_groups", 0, "lr", value=float("nan")),
                          ["optimizer group 0: lr is nan", "finite"]),
    "negative-weight-decay": (put("optimizer", "param_groups", 0, "weight_decay", value=-0.5),
                              ["optimizer group 0: weight_decay is -0.5"]),
    "beta-of-one": (put("optimizer", "param_groups", 0, "betas", value=(0.9, 1.0)), ["betas (0.9, 1.0) must be below 1"]),
    "fused-switched-off": (put("optimizer", "param_groups", 0, "fused", value=False),
                           ["optimizer group 0: fused is False; this run's optimizer has True"]),
    "optimizer-not-a-state": (put("optimizer", value=lambda o: {"state": o["state"]}), ["optimizer has no param_groups"]),
}

MODEL_CASES = {
    "weight-of-wrong-shape": (put("model", "bert.layers.0.attention.query.weight", value=torch.zeros(4)),
                              ["model entry bert.layers.0.attention.query.weight has shape (4,) but the model's is (32, 32)"]),
    "float64-weight": (put("model", "bert.layers.0.attention.query.weight", value=lambda t: t.double()),
                       ["query.weight is torch.float64 but the model's is torch.float32"]),
    "integer-weight": (put("model", "bert.embeddings.norm.weight", value=lambda t: t.long()),
                       ["model entry bert.embeddings.norm.weight is torch.int64"]),
    "missing-weight": (drop("model", "bert.layers.1.feed_forward.output.bias"),
                       ["model entry bert.layers.1.feed_forward.output.bias is missing"]),
    "unknown-weight": (put("model", "bert.layers.9.extra", value=torch.zeros(3)),
                       ["model entry bert.layers.9.extra is not one of the model's"]),
    "nan-weight": (put("model", "bert.embeddings.norm.bias", value=lambda t: torch.full_like(t, float("inf"))),
                   ["model entry bert.embeddings.norm.bias holds NaN or infinite values"]),
    "weight-not-a-tensor": (put("model", "bert.embeddings.norm.bias", value=[1.0, 2.0]),
                            ["bert.embeddings.norm.bias is a list of 2, not a tensor"]),
    "weights-not-a-dict": (put("model", value=[]), ["model is a list", "it must be an object"]),
}

COUNTER_CASES = {
    "negative-step": (put("step", value=-1), ["step is -1", "at least 0"]),
    "step-of-ten-to-the-twelve": (put("step", value=10 ** 12),
                                  ["step 1,000,000,000,000 is past this run's 4 steps"]),
    "step-past-the-run": (put("step", value=5), ["step 5 is past this run's 4 steps"]),
    "fractional-step": (put("step", value=2.0), ["step is a number (2.0)", "it must be a whole number"]),
    "step-as-text": (put("step", value="2"), ["step is a string"]),
    "missing-scheduler": (drop("scheduler"), ["not a bertlab training checkpoint (no scheduler)"]),
    "negative-units": (put("extra", "units", value=-5.0), ["extra: units is -5.0"]),
    "infinite-train-seconds": (put("extra", "train_seconds", value=float("inf")), ["extra: train_seconds is inf"]),
    "missing-units": (drop("extra", "units"), ["extra has no units"]),
    "compile-of-two": (put("extra", "compile", value=[0.0, 0.0]), ["compile holds 2 numbers"]),
    "last-evaluation-in-the-future": (put("extra", "last_eval", value=[9, {}]), ["last_eval's step is 9", "from 0 to 2"]),
    "scheduler-at-another-step": (put("scheduler", "last_epoch", value=1),
                                  ["scheduler state: last_epoch is 1, but the checkpoint is at step 2"]),
    "nan-base-rate": (put("scheduler", "base_lrs", 0, value=float("nan")), ["scheduler state: base_lrs[0] is nan"]),
    "scheduler-lambda-state": (put("scheduler", "lr_lambdas", 0, value={"__defaults__": (1,)}),
                               ["scheduler state: lr_lambdas[0] is an object", "it must be null"]),
    "scheduler-without-base-rates": (drop("scheduler", "base_lrs"), ["scheduler state has no base_lrs"]),
    "model-of-another-config": (put("extra", "model", value=lambda m: {**m, "hidden_size": 64}), ["was trained with"]),
    "model-config-holding-a-tensor": (put("extra", "model", value=lambda m: {**m, "hidden_size": torch.zeros(3)}),
                                      ["was trained with"]),
    "identity-holding-a-tensor": (put("extra", "objective", value=lambda o: {**o, "phases": torch.zeros(3)}),
                                  ["the run was started with other"]),
}

RNG = ("data", 0, "rng")
RNG_CASES = {
    "python-state-cut-short": (put(*RNG, "python", value=lambda p: (p[0], p[1][:100], p[2])),
                               ["random generator states of process 0: python: not a state of Python's generator"]),
    "python-position-past-its-keys": (put(*RNG, "python", value=lambda p: (p[0], p[1][:624] + (700,), p[2])),
                                      ["python: not a state of Python's generator"]),
    "python-state-not-a-tuple": (put(*RNG, "python", value=[1, 2, 3]), ["python is a list ([1, 2, 3])"]),
    "numpy-position-past-its-keys": (put(*RNG, "numpy", "position", value=10 ** 6),
                                     ["numpy: position is 1000000; it must be from 0 to 624"]),
    "numpy-keys-cut-short": (put(*RNG, "numpy", "keys", value=lambda k: k[:10]), ["numpy: keys is a torch.int64 tensor of shape (10,)"]),
    "numpy-negative-key": (put(*RNG, "numpy", "keys", value=lambda k: torch.cat([k[:-1], torch.tensor([-1])])),
                           ["numpy: keys must be 32-bit numbers"]),
    "numpy-keys-all-zero": (put(*RNG, "numpy", "keys", value=lambda k: torch.zeros_like(k)), ["not all zero"]),
    "numpy-gauss-flag-of-seven": (put(*RNG, "numpy", "has_gauss", value=7), ["numpy: has_gauss is 7"]),
    "torch-state-cut-short": (put(*RNG, "torch", value=lambda t: t[:100]), ["torch: a torch.uint8 tensor of shape (100,)"]),
    "torch-state-of-int64": (put(*RNG, "torch", value=lambda t: t.long()), ["not a torch generator state"]),
    "torch-state-invalid": (put(*RNG, "torch", value=lambda t: torch.cat([t[:8], torch.zeros(4, dtype=torch.uint8), t[12:]])),
                            ["torch: not a valid torch generator state (Invalid mt19937 state)"]),
    "cuda-states-of-garbage": (put(*RNG, "cuda", value=[1, 2]), ["cuda: not a list of CUDA generator states"]),
    "unknown-generator": (put(*RNG, "mps", value=1), ["an unknown generator 'mps'"]),
    "process-without-generators": (drop(*RNG), ["data of process 0 has no rng"]),
}

ORDER = ("data", 0, "objective", "orders", 0)
POSITION_CASES = {
    "data-index-past-the-instances": (put(*ORDER, "index", value=10 ** 9),
                                      ["data position of process 0: phase 1: the data order's index is 1000000000"]),
    "data-index-between-batches": (put(*ORDER, "index", value=9), ["not a multiple of the global micro-batch 4"]),
    "negative-epoch": (lambda s: s["data"][0]["objective"]["orders"][0].update(epoch=-1, permutation_seed=[1000, -1]),
                       ["the data order's epoch is -1"]),
    "order-of-another-seed": (put(*ORDER, "permutation_seed", value=[7, 0]), ["drawn with seed 7"]),
    "order-without-index": (drop(*ORDER, "index"), ["the data order has no index"]),
    "no-orders": (put("data", 0, "objective", "orders", value=[]), ["0 data orders, but this run has 1 phases"]),
    "orders-not-a-list": (put("data", 0, "objective", "orders", value=5), ["orders is a whole number (5)"]),
}

CASES = {**OPTIMIZER_CASES, **MODEL_CASES, **COUNTER_CASES, **RNG_CASES, **POSITION_CASES}
# the ones that crashed the process (or could, were their check missing): run in a child process
CRASHERS = {"moment-of-wrong-shape", "larger-second-moment", "step-of-four-elements", "strided-moment",
            "integer-moment", "numpy-position-past-its-keys", "numpy-keys-cut-short", "torch-state-cut-short"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_checkpoint_is_a_clear_error(pretrained, case):
    edit, needles = CASES[case]
    with tampered(pretrained, edit):
        run = run_subprocess if case in CRASHERS else run_cli
        assert_error(run(*pretrained["resume"]), pretrained["path"], *needles)


def test_the_genuine_checkpoint_still_resumes(pretrained, tmp_path):
    """The checks refuse nothing a run writes (on a copy of the run folder, which the resume changes)."""
    out = str(tmp_path / "run")
    shutil.copytree(os.path.dirname(pretrained["path"]), out)
    resume = list(pretrained["resume"])
    resume[resume.index("--out") + 1] = out
    assert_ok(run_cli(*resume))
    assert torch.load(os.path.join(out, "checkpoint.pt"), weights_only=True)["step"] == 4


# ---- pretraining shards ----------------------------------------------------------------------------------

def _shard(folder, field):
    return os.path.join(folder, f"train-0000.{field}.npy")


def _edit_meta(folder, **changes):
    path = os.path.join(folder, "meta.json")
    with open(path, encoding="utf-8") as fh:
        meta = json.load(fh)
    write(path, json.dumps({**meta, **changes}))


def _edit_array(field, change):
    def edit(folder):
        array = np.load(_shard(folder, field))
        np.save(_shard(folder, field), change(array))
    return edit


def _set_row(field, value, row=3, column=1):
    def change(array):
        array = array.copy()
        array[(row, column)[:array.ndim]] = value
        return array
    return _edit_array(field, change)


def _rename_shard(name):
    def edit(folder):
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as fh:
            shards = json.load(fh)["shards"]
        shards[0]["name"] = name(folder) if callable(name) else name
        _edit_meta(folder, shards=shards)
    return edit


def _link_outside(folder):
    """A shard name that is a link to a folder outside: the name is plain, the files are elsewhere."""
    outside = os.path.join(os.path.dirname(folder), "elsewhere")
    os.makedirs(outside, exist_ok=True)
    for field in ("input_ids", "segment_ids", "lengths", "next_sentence_labels", "masked_lm_positions",
                  "masked_lm_ids", "masked_lm_counts"):
        shutil.copy(_shard(folder, field), os.path.join(outside, f"train-0000.{field}.npy"))
    os.symlink(outside, os.path.join(folder, "sub"))
    return "sub/train-0000"


def _span_boundaries(value):
    """Span-boundary fields (meta.json "span_boundaries": true), one boundary of the first shard `value`."""
    def edit(folder):
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
        for k, shard in enumerate(meta["shards"]):
            spans = np.ones((shard["instances"], meta["max_predictions_per_seq"], 2), np.int16)
            spans[3, 0, 1] = value if k == 0 else 1
            np.save(os.path.join(folder, f"{shard['name']}.masked_lm_boundaries.npy"), spans)
        _edit_meta(folder, span_boundaries=True)
    return edit


SHARD_CASES = {
    "float-input-ids": (_edit_array("input_ids", lambda a: a.astype(np.float32) + 0.5),
                        ["train-0000.input_ids.npy: holds float32 values", "writes input_ids as uint16"]),
    "float64-masked-ids": (_edit_array("masked_lm_ids", lambda a: a.astype(np.float64)),
                           ["train-0000.masked_lm_ids.npy: holds float64 values"]),
    "int64-input-ids": (_edit_array("input_ids", lambda a: a.astype(np.int64)), ["holds int64 values"]),
    "big-endian-lengths": (_edit_array("lengths", lambda a: a.astype(">i2")), ["train-0000.lengths.npy: holds >i2 values"]),
    "float-lengths": (_edit_array("lengths", lambda a: a.astype(np.float16)), ["train-0000.lengths.npy: holds float16"]),
    "id-past-the-vocabulary": (_set_row("input_ids", 60000),
                               ["train-0000.input_ids.npy: token ids beyond its", "vocabulary in instance 3"]),
    "masked-id-past-the-vocabulary": (_set_row("masked_lm_ids", 60000),
                                      ["train-0000.masked_lm_ids.npy: token ids beyond", "instance 3"]),
    "segment-of-two": (_set_row("segment_ids", 2), ["train-0000.segment_ids.npy: a segment id other than 0 or 1 in instance 3"]),
    "label-of-three": (_set_row("next_sentence_labels", 3), ["next_sentence_labels.npy: a label other than 0 or 1 in instance 3"]),
    "length-past-the-sequence": (_set_row("lengths", 99), ["train-0000.lengths.npy: a length outside 1 to 32 in instance 3"]),
    "length-of-zero": (_set_row("lengths", 0), ["a length outside 1 to 32 in instance 3"]),
    "negative-length": (_set_row("lengths", -4), ["a length outside 1 to 32 in instance 3"]),
    "more-predictions-than-slots": (_set_row("masked_lm_counts", 9), ["masked_lm_counts.npy: a prediction count above 4"]),
    "prediction-past-its-instance": (_set_row("masked_lm_positions", 40),
                                     ["masked_lm_positions.npy: a prediction position outside its instance in instance 3"]),
    "negative-prediction-position": (_set_row("masked_lm_positions", -1), ["a prediction position outside its instance"]),
    "span-boundary-past-its-instance": (_span_boundaries(400), ["masked_lm_boundaries.npy: a span boundary outside its instance"]),
    "shard-name-climbing-out": (_rename_shard("../elsewhere/train-0000"),
                                ["shard name '../elsewhere/train-0000.input_ids.npy' must be a relative path inside"]),
    "absolute-shard-name": (_rename_shard("/etc/train-0000"), ["shard name '/etc/train-0000.input_ids.npy' must be a relative"]),
    "shard-name-through-a-link": (_rename_shard(_link_outside), ["leads outside"]),
    "length-that-is-true": (lambda folder: _edit_meta(folder, max_seq_length=True),
                            ["not a create-pretraining-data meta.json", "max_seq_length"]),
    "instances-that-are-true": (lambda folder: _edit_meta(folder, shards=[{"name": "train-0000", "instances": True}]),
                                ["not a create-pretraining-data meta.json", "shards[0]"]),
    "settings-not-an-object": (lambda folder: _edit_meta(folder, settings=[1]), ["meta.json", "settings"]),
}


@pytest.mark.parametrize("case", sorted(SHARD_CASES))
def test_crafted_shards_are_refused_when_the_folder_is_opened(pretrained, tmp_path, case):
    edit, needles = SHARD_CASES[case]
    folder = str(tmp_path / "shards" / "train")
    shutil.copytree(pretrained["shards"], folder)
    edit(folder)
    with pytest.raises(ValueError) as error:
        PretrainingData(folder)
    for needle in needles:
        assert needle in str(error.value), (needle, str(error.value))


def test_float_shards_are_refused_by_pretrain_before_any_step(pretrained, tmp_path):
    folder = str(tmp_path / "train")
    shutil.copytree(pretrained["shards"], folder)
    _edit_array("input_ids", lambda a: a.astype(np.float32) + 0.7)(folder)
    argv = list(pretrained["resume"][:-1])  # a fresh run on the tampered folder
    argv[argv.index("--data") + 1], argv[argv.index("--out") + 1] = folder, str(tmp_path / "out")
    assert_error(run_cli(*argv), "train-0000.input_ids.npy: holds float32 values")
    assert not os.path.exists(tmp_path / "out" / "checkpoint.pt")


def test_a_data_order_refuses_positions_outside_its_instances():
    order = DataOrder(100, 4, seed=1)
    genuine = order.state_dict()
    for change, needle in [({"index": 104}, "index is 104; it must be from 0 to 100"), ({"index": -4}, "index is -4"),
                           ({"index": 6}, "not a multiple"), ({"epoch": 1.5}, "epoch is a number"),
                           ({"num_instances": "100"}, "num_instances is a string"), ({"epoch": True}, "epoch is true")]:
        with pytest.raises(ValueError, match=needle):
            order.load_state_dict({**genuine, **change})
    order.load_state_dict({**genuine, "epoch": 3, "permutation_seed": [1, 3], "index": 96})
    assert (order.epoch, order.index) == (3, 96)


# ---- gpt-train: its data folder and its position --------------------------------------------------------

@pytest.fixture(scope="module")
def gpt_trained(tmp_path_factory):
    """A real two-step gpt-train run: its --resume command line (to 4 steps), its folder."""
    tmp = tmp_path_factory.mktemp("gpt")
    corpus = write(tmp / "corpus.txt", "".join(f"line {i}: the quick brown fox {i % 7} jumps\n" for i in range(300)))
    out = str(tmp / "run")
    argv = ["gpt-train", corpus, "--out", out, "--tokenizer", "char", "--preset", "tiny", "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--max-steps", "2",
            "--warmup", "1", "--eval-interval", "2", "--eval-tokens", "200", "--device", "cpu"]
    assert_ok(run_cli(*argv))
    path = os.path.join(out, "checkpoint.pt")
    with open(os.path.join(out, "data", "meta.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    return {"resume": [*with_max_steps(argv, 4), "--resume"], "path": path, "data": os.path.join(out, "data"),
            "meta": meta, "genuine": torch.load(path, weights_only=True)}


@contextlib.contextmanager
def tampered_file(path, data: bytes | str):
    with open(path, "rb") as fh:
        genuine = fh.read()
    write(path, data)
    try:
        yield path
    finally:
        write(path, genuine)


def _meta_with(run, **changes) -> str:
    return json.dumps({**run["meta"], **changes})


def _tokens_with(run, name, position, value) -> bytes:
    tokens = np.fromfile(os.path.join(run["data"], name), dtype=run["meta"]["dtype"])
    tokens[position] = value
    return tokens.tobytes()


# name: (file in data/, its crafted content (a function of the run), needles)
GPT_DATA_CASES = {
    "dtype-object": ("meta.json", lambda r: _meta_with(r, dtype="O"), ["meta.json: dtype 'O': token files hold uint16 or uint32 ids"]),
    "dtype-float64": ("meta.json", lambda r: _meta_with(r, dtype="float64"), ["meta.json: dtype 'float64'"]),
    "dtype-unicode": ("meta.json", lambda r: _meta_with(r, dtype="<U5"), ["meta.json: dtype '<U5'"]),
    "dtype-int8": ("meta.json", lambda r: _meta_with(r, dtype="int8"), ["meta.json: dtype 'int8'"]),
    "dtype-a-number": ("meta.json", lambda r: _meta_with(r, dtype=7), ["meta.json: dtype is a whole number (7)"]),
    "no-dtype": ("meta.json", lambda r: json.dumps({k: v for k, v in r["meta"].items() if k != "dtype"}),
                 ["meta.json: has no dtype"]),
    "nan-baseline": ("meta.json", lambda r: _meta_with(r).replace(str(r["meta"]["unigram_val_perplexity"]), "NaN", 1),
                     ["meta.json: NaN is not a JSON number"]),
    "deeply-nested-meta": ("meta.json", lambda r: '{"dtype": ' + "[" * 5000 + "]" * 5000 + "}", ["meta.json: JSON nested 5001 deep"]),
    "another-vocabulary": ("meta.json", lambda r: _meta_with(r, vocab_size=r["meta"]["vocab_size"] + 1),
                           ["token ids are of a", "but the model has"]),
    "train-id-past-the-vocabulary": ("train.bin", lambda r: _tokens_with(r, "train.bin", 77, 999),
                                     ["train.bin: token id 999 at position 77 is past the"]),
    "last-held-out-id-past-the-vocabulary": ("val.bin", lambda r: _tokens_with(r, "val.bin", -1, 65535),
                                             ["val.bin: token id 65535 at position", "is past the"]),
    "odd-byte-count": ("train.bin", lambda r: _tokens_with(r, "train.bin", 0, 5) + b"\x01",
                       ["train.bin:", "not a whole number of uint16 token ids"]),
}


@pytest.mark.parametrize("case", sorted(GPT_DATA_CASES))
def test_crafted_gpt_data_is_refused_on_resume(gpt_trained, case):
    name, content, needles = GPT_DATA_CASES[case]
    with tampered_file(os.path.join(gpt_trained["data"], name), content(gpt_trained)):
        run = run_subprocess if case == "dtype-object" else run_cli
        assert_error(run(*gpt_trained["resume"]), *needles)


def test_a_crafted_token_stream_position_is_a_clear_error(gpt_trained):
    stream = ("data", 0, "objective", "stream", "generator")
    for edit, needle in [(put(*stream, value=lambda t: t[:64]), "the token stream's generator: a torch.uint8 tensor of shape (64,)"),
                         (put(*stream, value=lambda t: torch.zeros_like(t)), "not a valid torch generator state"),
                         (drop(*stream), "the token stream's position has no generator"),
                         (put("data", 0, "objective", value={}), "the language model's position has no stream")]:
        with tampered(gpt_trained, edit):
            assert_error(run_cli(*gpt_trained["resume"]), gpt_trained["path"], "data position of process 0", needle)


def test_token_files_are_checked_once_when_opened(tmp_path):
    """load_tokens directly: the ids checked against the vocabulary given (the model's) in one pass."""
    tokens = np.arange(50, dtype=np.uint16) % 20
    tokens.tofile(tmp_path / "train.bin")
    meta = {"dtype": "uint16", "vocab_size": 20, "unigram_val_perplexity": 10.0}
    write(tmp_path / "meta.json", json.dumps(meta))
    assert load_tokens(str(tmp_path / "train.bin")).tolist() == tokens.tolist()
    with pytest.raises(ValueError, match="the model has 16"):
        load_tokens(str(tmp_path / "train.bin"), vocab_size=16)
    write(tmp_path / "meta.json", json.dumps({**meta, "vocab_size": 10}))
    with pytest.raises(ValueError, match="token id 10 at position 10 is past the 10-token vocabulary"):
        TokenStream(str(tmp_path / "train.bin"), block_size=4)
    write(tmp_path / "meta.json", json.dumps({**meta, "vocab_size": 0}))
    with pytest.raises(ValueError, match="vocab_size 0"):
        load_tokens(str(tmp_path / "train.bin"))


# ---- the other objectives' positions -------------------------------------------------------------------

def test_a_translation_stream_refuses_positions_past_its_batches():
    from bertlab.translation.objective import BatchStream
    data = types.SimpleNamespace(batches=lambda epoch, max_tokens, seed: [[0], [1], [2]])
    stream = BatchStream(data, max_tokens=64, seed=0)
    for state, needle in [({"epoch": 0, "index": 4}, "index in epoch 0 is 4; it must be from 0 to 3"),
                          ({"epoch": 0, "index": -1}, "index in epoch 0 is -1"),
                          ({"epoch": -2, "index": 0}, "epoch is -2"), ({"epoch": 0}, "has no index")]:
        with pytest.raises(ValueError, match=needle):
            stream.load_state_dict(state)
    stream.load_state_dict({"epoch": 2, "index": 3})
    assert (stream.epoch, stream.index) == (2, 3)


def test_crafted_translation_snapshots_are_refused(tmp_path):
    """--average-last keeps (step, weights) snapshots in the checkpoint; each is checked against the model."""
    data = write_corpus(tmp_path)
    out = str(tmp_path / "run")
    argv = ["translate-train", "--data", data, "--src", "en", "--tgt", "de", "--out", out, "--joint-vocab",
            "--vocab-size", "80", "--min-frequency", "1", "--preset", "test", "--max-tokens", "64", "--max-steps",
            "2", "--warmup", "1", "--eval-interval", "2", "--save-every", "1", "--average-last", "2",
            "--bleu-sentences", "2", "--device", "cpu"]
    assert_ok(run_cli(*argv))
    path = os.path.join(out, "checkpoint.pt")
    run = {"path": path, "genuine": torch.load(path, weights_only=True)}
    assert [step for step, _ in run["genuine"]["extra"]["snapshots"]] == [1, 2]
    name = next(iter(run["genuine"]["model"]))
    resume = [*with_max_steps(argv, 3), "--resume"]
    def second_at(step):
        return put("extra", "snapshots", 1, value=lambda snapshot: (step, snapshot[1]))

    for edit, needle in [(put("extra", "snapshots", 0, 1, name, value=torch.zeros(2)), f"snapshot 0: model entry {name} has shape (2,)"),
                         (second_at(9), "snapshot 1's step is 9; it must be from 0 to 2"),
                         (second_at(1), "snapshot 1's step 1 does not follow the snapshot before it"),
                         (put("extra", "snapshots", 0, value=(1,)), "snapshot 0 is not a (step, weights) pair"),
                         (put("extra", "snapshots", value=None), "snapshots is null")]:
        with tampered(run, edit):
            assert_error(run_cli(*resume), path, needle)
    with tampered(run, put("data", 0, "objective", "stream", "index", value=10 ** 6)):
        assert_error(run_cli(*resume), path, "data position of process 0: the batch stream's index in epoch 0")


def test_finetuning_batches_refuse_a_crafted_queue_or_generator():
    from bertlab.finetune.objective import Batches
    task = types.SimpleNamespace(feature_length=len)
    batches = Batches(task, [[1, 2]] * 10, batch_size=4, group_by_length=False, seed=0, pad_id=0, device="cpu")
    batches._draw()  # an epoch drawn: a queue and a moved generator
    genuine = batches.state_dict()
    rng = genuine["rng"]
    for change, needle in [({"queue": [[0, 10]]}, r"queue\[0\] is not a batch of 1 to 4 example indices below 10"),
                           ({"queue": [[-1]]}, r"queue\[0\]"), ({"queue": [[]]}, r"queue\[0\]"),
                           ({"queue": [[0, 1, 2, 3, 4]]}, r"queue\[0\]"), ({"queue": [[True]]}, r"queue\[0\]"),
                           ({"epoch": -1}, "epoch is -1"),
                           ({"rng": {**rng, "bit_generator": "MT19937"}}, "bit_generator is 'MT19937'; it must be 'PCG64'"),
                           ({"rng": {**rng, "state": {"state": -5, "inc": 1}}}, "state: state is -5"),
                           ({"rng": {**rng, "state": {"state": 2 ** 200, "inc": 1}}}, "not a valid PCG64 state"),
                           ({"rng": {**rng, "has_uint32": 5}}, "has_uint32 and has_gauss must be 0 or 1"),
                           ({"rng": {**rng, "extra": 1}}, "unknown entry 'extra'")]:
        with pytest.raises(ValueError, match=needle):
            batches.load_state_dict({**genuine, **change})
    batches.load_state_dict(genuine)


def test_finetuning_refuses_a_crafted_best_evaluation():
    from bertlab.finetune.objective import FineTuning
    objective = FineTuning.__new__(FineTuning)  # its position alone: no task or model needed
    objective.run = types.SimpleNamespace(step=10)
    objective.batches = types.SimpleNamespace(load_state_dict=lambda state: None)
    best = {"score": 0.5, "step": 4, "metrics": {"f1": 0.5}, "since": 1}
    for change, needle in [({"score": float("nan")}, "score is nan"), ({"score": "0.9"}, "score is a string"),
                           ({"step": 11}, "step is 11; it must be from 0 to 10"), ({"since": -1}, "since the best is -1"),
                           ({"metrics": [1]}, "metrics is a list")]:
        with pytest.raises(ValueError, match=needle):
            objective.load_state_dict({"batches": {}, "best": {**best, **change}})
    with pytest.raises(ValueError, match="has no best"):
        objective.load_state_dict({"batches": {}})
    objective.load_state_dict({"batches": {}, "best": best})
    assert objective.best == best


def test_word2vec_refuses_a_position_or_generator_it_could_not_have():
    from bertlab.word2vec.objective import Word2VecObjective
    objective = Word2VecObjective.__new__(Word2VecObjective)
    objective.run, objective.s = types.SimpleNamespace(step=5), types.SimpleNamespace(grad_accum=2)
    objective.rng = np.random.default_rng(0)
    rng = objective.rng.bit_generator.state
    for state, needle in [({"position": 11, "rng": rng}, "position is 11; it must be from 0 to 10"),
                          ({"position": -1, "rng": rng}, "position is -1"),
                          ({"position": 3, "rng": {**rng, "bit_generator": "Philox"}}, "word2vec generator"),
                          ({"position": 3}, "has no rng")]:
        with pytest.raises(ValueError, match=needle):
            objective.load_state_dict(state)
    objective.load_state_dict({"position": 10, "rng": rng})
    assert objective.position == 10
