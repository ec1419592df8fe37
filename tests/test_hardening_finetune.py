"""The hardening matrix for `bertlab finetune` and `bertlab predict`: every class of bad input ends in
one clear line (exit 2) naming the file, flag or problem, and good but unusual input (non-ASCII,
very long texts, no dev set, a killed run) gives the right result. Tiny models, built once."""
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertlab.finetune.tasks import task_from_state
from bertlab.interop import finetuned as folder_module
from bertlab.finetune.classification import SequenceClassificationTask
from bertlab.interop.finetuned import finish_swap, load_finetuned, readable_folder, save_finetuned
from bertlab.finetune.tasks import make_task
from bertlab.finetune.objective import FinetuneSettings
from bertlab.training import engine
from cli_cases import BROKEN, NON_UTF8, assert_error, assert_ok, broken_copy, run_cli, write

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

WORDS = ("good great fine bad awful poor movie film plot the a is was not very cat sat on mat who where what "
         "peter paris lives in ate fish dog ran").split()
POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]


def tiny_base(folder, dropout=0.0):
    from bertlab import save_pretrained
    from bertlab.models import BertConfig, BertModel
    from bertlab.tokenization import BertTokenizer, Vocab
    tokenizer = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "中", "é"] + WORDS))
    config = BertConfig(vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), folder, tokenizer)
    return str(folder)


def sentiment_tsv(n, offset=0):
    rows = []
    for i in range(offset, offset + n):
        label = i % 2
        word = (POSITIVE if label else NEGATIVE)[i % 3]
        rows.append(f"the {['movie', 'film', 'plot'][i % 3]} was {'very ' * (i % 2)}{word}\t{label}\n")
    return "sentence\tlabel\n" + "".join(rows)


CONLL = "peter B-PER\nlives O\nin O\nparis B-LOC\n\nthe O\ndog O\nran O\n\npeter B-PER\nate O\nfish O\n"
SQUAD = json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
    {"context": "the cat sat on the mat", "qas": [
        {"id": "q1", "question": "where sat the cat", "answers": [{"text": "the mat", "answer_start": 15}]},
        {"id": "q2", "question": "who sat on the mat", "answers": [{"text": "the cat", "answer_start": 0}]}]}]}]})
SWAG = ("sent1,sent2,ending0,ending1,ending2,ending3,label\n"
        "the film was good,the plot was,fine,bad,awful,poor,0\n"
        "the movie was bad,the plot was,awful,great,poor,bad,1\n"
        "the plot was fine,the film was,bad,poor,good,awful,2\n")
TASK_FILES = {"classify": ("train.tsv", sentiment_tsv(16)), "ner": ("train.conll", CONLL),
              "squad": ("train.json", SQUAD), "multiple_choice": ("train.csv", SWAG)}
TASKS = list(TASK_FILES)
QUICK = ["--epochs", "1", "--batch-size", "4", "--lr", "1e-3", "--quiet"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A tiny base model, a training file per task, and a model fine-tuned on each (2 steps)."""
    root = tmp_path_factory.mktemp("hardening")
    base = tiny_base(root / "base")
    files, models = {}, {}
    for task, (name, text) in TASK_FILES.items():
        files[task] = write(root / f"{task}-{name}", text)
        out = root / f"run-{task}"
        assert_ok(run_cli("finetune", "--task", task, "--model", base, "--train", files[task], "--dev", files[task],
                          "--max-steps", "2", "--max-seq-length", "48", *QUICK, "-o", out))
        models[task] = str(out / "model")
    files["dev"] = write(root / "dev.tsv", sentiment_tsv(8, offset=16))
    return {"root": root, "base": base, "files": files, "models": models}


def jsonl(path) -> list:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def finetune_args(data, task="classify", *extra, out=None, **files):
    """`bertlab finetune` on the task's training file (or files['train'], ...) into a fresh folder."""
    out = out or data["root"] / f"out-{hashlib.md5(repr((task, extra, files)).encode()).hexdigest()[:10]}"
    args = ["finetune", "--task", task, "--model", files.pop("model", data["base"]), "--train",
            files.pop("train", data["files"][task]), *QUICK, "--max-steps", "2", "-o", out]
    for split, path in files.items():
        args += [f"--{split}", path]
    return [*args, *extra]


# ---- bad input files: missing, empty, blank-only, non-UTF-8 -------------------------------------------
BAD_FILES = {"missing": (None, "no such"), "empty": (b"", "empty"), "blank-only": (b"\n  \n\t\n", "blank"),
             "non-utf8": (NON_UTF8, "UTF-8")}


def bad_file(tmp_path, how, name):
    content, _ = BAD_FILES[how]
    path = tmp_path / name
    return str(path) if content is None else write(path, content)


@pytest.mark.parametrize("how", BAD_FILES)
@pytest.mark.parametrize("split", ["train", "dev", "test"])
@pytest.mark.parametrize("task", TASKS)
def test_finetune_refuses_bad_data_files(data, tmp_path, task, split, how):
    path = bad_file(tmp_path, how, f"bad-{split}{os.path.splitext(TASK_FILES[task][0])[1]}")
    assert_error(run_cli(*finetune_args(data, task, out=tmp_path / "out", **{split: path})), path, BAD_FILES[how][1])
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize("how", BAD_FILES)
@pytest.mark.parametrize("task", TASKS)
def test_predict_refuses_bad_input_files(data, tmp_path, task, how):
    path = bad_file(tmp_path, how, "input" + os.path.splitext(TASK_FILES[task][0])[1])
    assert_error(run_cli("predict", "--model", data["models"][task], path, "--quiet"), path, BAD_FILES[how][1])


# A file in another task's layout: each model's reader names the line and what is missing.
WRONG_LAYOUT = {"classify": ("multiple_choice", "no column 'sentence'"), "ner": ("classify", "tag"),
                "squad": ("classify", "not valid JSON"), "multiple_choice": ("classify", "no column 'sent2'")}


@pytest.mark.parametrize("task", TASKS)
def test_predict_names_a_file_whose_columns_do_not_match_the_task(data, tmp_path, task):
    other, needle = WRONG_LAYOUT[task]
    name = "input" + os.path.splitext(TASK_FILES[task][0])[1]  # the right extension, the wrong content
    path = write(tmp_path / name, TASK_FILES[other][1])
    assert_error(run_cli("predict", "--model", data["models"][task], path, "--quiet"), name, needle)


# ---- broken model folders ---------------------------------------------------------------------------
BROKEN_NEEDLES = {"truncated-weights": "model.safetensors", "garbage-weights": "model.safetensors",
                  "nan-weights": "NaN", "garbage-config": "config.json", "missing-config": "config.json",
                  "missing-weights": "model.safetensors"}


@pytest.mark.parametrize("how", BROKEN)
def test_predict_refuses_a_broken_fine_tuned_folder(data, tmp_path, how):
    model = broken_copy(data["models"]["classify"], tmp_path, how)
    assert_error(run_cli("predict", "--model", model, data["files"]["dev"], "--quiet"), model, BROKEN_NEEDLES[how])


@pytest.mark.parametrize("how", BROKEN)
def test_finetune_refuses_a_broken_base_model(data, tmp_path, how):
    model = broken_copy(data["base"], tmp_path, how)
    assert_error(run_cli(*finetune_args(data, model=model, out=tmp_path / "out")), model, BROKEN_NEEDLES[how])
    assert not (tmp_path / "out").exists()


def test_a_broken_base_model_leaves_the_earlier_run_alone(data, tmp_path):
    out = tmp_path / "run"
    assert_ok(run_cli(*finetune_args(data, out=out)))
    model = broken_copy(data["base"], tmp_path, "garbage-weights")
    assert_error(run_cli(*finetune_args(data, "classify", "--overwrite", model=model, out=out)), model)
    assert task_from_state(load_finetuned(out / "model")).labels == ["0", "1"]


def _edit_json(path, **changes):
    with open(path) as f:
        value = json.load(f)
    value.update(changes)
    with open(path, "w") as f:
        json.dump(value, f)


# task.json and config.json that parse but do not describe the folder's model
WRONG_CONFIG = {
    "no-task.json": (lambda m: os.remove(os.path.join(m, "task.json")), "no task.json"),
    "garbage-task.json": (lambda m: write(os.path.join(m, "task.json"), '{"task": "classify",'), "task.json"),
    "task.json-not-an-object": (lambda m: write(os.path.join(m, "task.json"), "[1, 2]"), "JSON object"),
    "unknown-task": (lambda m: _edit_json(os.path.join(m, "task.json"), task="poetry"), "unknown task 'poetry'"),
    "unknown-option": (lambda m: _edit_json(os.path.join(m, "task.json"), colour="red"), "colour"),
    "three-labels": (lambda m: _edit_json(os.path.join(m, "task.json"), labels=["0", "1", "2"]), "shape"),
    "bad-max-seq-length": (lambda m: _edit_json(os.path.join(m, "task.json"), max_seq_length=0), "max_seq_length 0"),
    "bad-long-inputs": (lambda m: _edit_json(os.path.join(m, "task.json"), long_inputs="skim"), "long_inputs"),
    "vocab-size": (lambda m: _edit_json(os.path.join(m, "config.json"), vocab_size=7), "vocab"),
    "hidden-size": (lambda m: _edit_json(os.path.join(m, "config.json"), hidden_size=48, intermediate_size=96),
                    "shape"),
}


@pytest.mark.parametrize("how", WRONG_CONFIG)
def test_predict_refuses_a_folder_whose_config_does_not_fit(data, tmp_path, how):
    model = str(tmp_path / "model")
    import shutil
    shutil.copytree(data["models"]["classify"], model)
    edit, needle = WRONG_CONFIG[how]
    edit(model)
    assert_error(run_cli("predict", "--model", model, data["files"]["dev"], "--quiet"), needle)


def test_missing_model_folders_are_named(data, tmp_path):
    assert_error(run_cli("predict", "--model", tmp_path / "nowhere", data["files"]["dev"]), "nowhere", "no such")
    assert_error(run_cli(*finetune_args(data, model=str(tmp_path / "nowhere"))), "nowhere", "no such model folder")


# ---- invalid numbers -------------------------------------------------------------------------------
NEGATIVE_ZERO_NAN_INF = ["-1", "0", "nan", "inf", "abc"]
FLAG_VALUES = {
    "--epochs": NEGATIVE_ZERO_NAN_INF, "--batch-size": NEGATIVE_ZERO_NAN_INF + ["1.5"],
    "--lr": NEGATIVE_ZERO_NAN_INF, "--warmup-proportion": ["-0.1", "5", "nan", "inf"],
    "--weight-decay": ["-0.01", "nan", "inf"], "--grad-accum": NEGATIVE_ZERO_NAN_INF,
    "--grad-clip": ["-1", "nan", "inf"], "--eval-every": NEGATIVE_ZERO_NAN_INF,
    "--patience": NEGATIVE_ZERO_NAN_INF, "--max-steps": NEGATIVE_ZERO_NAN_INF,
    "--max-minutes": NEGATIVE_ZERO_NAN_INF, "--seed": ["-1", "nan", "1e3"],
    "--max-seq-length": NEGATIVE_ZERO_NAN_INF, "--doc-stride": NEGATIVE_ZERO_NAN_INF,
}


@pytest.mark.parametrize(("flag", "value"), [(f, v) for f, values in FLAG_VALUES.items() for v in values])
def test_finetune_refuses_invalid_numbers(data, flag, value):
    assert_error(run_cli(*finetune_args(data, "classify", flag, value)), f"argument {flag}", value)


@pytest.mark.parametrize("value", NEGATIVE_ZERO_NAN_INF)
def test_predict_refuses_an_invalid_batch_size(data, value):
    assert_error(run_cli("predict", "--model", data["models"]["classify"], data["files"]["dev"], "--batch-size", value),
                 "argument --batch-size", value)


# Numbers each fine alone, wrong for the task or together: refused before any training.
CROSS_CHECKS = {
    "max-seq-length-2": ("classify", ["--max-seq-length", "2"], "max_seq_length 2: too small for classify"),
    "squad-max-seq-length-4": ("squad", ["--max-seq-length", "4"], "max_seq_length 4: too small for squad"),
    "stride-equal-length": ("classify", ["--max-seq-length", "16", "--doc-stride", "16"], "doc_stride 16"),
    "stride-with-truncate": ("classify", ["--doc-stride", "8"], "--long-inputs windows"),
    "stride-over-length": ("ner", ["--max-seq-length", "16", "--doc-stride", "40"], "doc_stride 40"),
    "squad-stride": ("squad", ["--max-seq-length", "32", "--doc-stride", "32"], "doc_stride 32"),
    "stride-multiple-choice": ("multiple_choice", ["--doc-stride", "8"], "--doc-stride"),
    "long-inputs-ner": ("ner", ["--long-inputs", "truncate"], "--long-inputs"),
    "long-inputs-pairs": ("classify", ["--text-b", "label", "--long-inputs", "windows"], "pairs are truncated"),
    "positions": ("classify", ["--max-seq-length", "100"], "more than the model's 64 positions"),
    "patience-without-dev": ("classify", ["--patience", "2"], "--patience"),
    "grid-without-dev": ("classify", ["--grid"], "--grid"),
    "grid-resume": ("classify", ["--grid", "--resume"], "--resume"),
    "no-header-name": ("classify", ["--no-header", "--text-a", "sentence"], "0-based"),
    "metric": ("classify", ["--metric", "bleu"], "unknown metric"),
}


@pytest.mark.parametrize("case", CROSS_CHECKS)
def test_finetune_refuses_settings_that_cannot_work(data, tmp_path, case):
    task, extra, needle = CROSS_CHECKS[case]
    files = {}
    if case == "positions":  # a text longer than the tiny model's 64 positions
        files["train"] = write(tmp_path / "long.tsv", "sentence\tlabel\n" + f"{'good ' * 150}\t1\nbad\t0\n")
    assert_error(run_cli(*finetune_args(data, task, *extra, out=tmp_path / "out", **files)), needle)


LIBRARY_CHECKS = [
    (lambda: FinetuneSettings(epochs=0), "epochs 0"),
    (lambda: FinetuneSettings(batch_size=-2), "batch_size -2"),
    (lambda: FinetuneSettings(lr=float("nan")), "lr nan"),
    (lambda: FinetuneSettings(warmup_proportion=5), "warmup_proportion 5"),
    (lambda: FinetuneSettings(grad_clip=-1.0), "grad_clip -1.0"),
    (lambda: FinetuneSettings(grad_accum=0), "grad_accum 0"),
    (lambda: FinetuneSettings(eval_every=0), "eval_every 0"),
    (lambda: FinetuneSettings(patience=0), "patience 0"),
    (lambda: FinetuneSettings(max_minutes=float("inf")), "max_minutes inf"),
    (lambda: FinetuneSettings(seed=-1), "seed -1"),
    (lambda: SequenceClassificationTask(max_seq_length=0), "max_seq_length 0"),
    (lambda: SequenceClassificationTask(max_seq_length=2.5), "max_seq_length 2.5"),
    (lambda: SequenceClassificationTask(doc_stride=128), "doc_stride 128"),
    (lambda: SequenceClassificationTask(long_inputs="skim"), "long_inputs 'skim'"),
    (lambda: make_task("ner", doc_stride=0), "doc_stride 0"),
    (lambda: make_task("squad", max_query_length=0), "max_query_length 0"),
    (lambda: make_task("squad", n_best_size=-1), "n_best_size -1"),
    (lambda: make_task("multiple_choice", max_seq_length=1), "max_seq_length 1"),
    (lambda: make_task("mrpc", long_inputs="windows"), "pairs are truncated"),
]


@pytest.mark.parametrize(("make", "needle"), LIBRARY_CHECKS, ids=[n for _, n in LIBRARY_CHECKS])
def test_settings_and_tasks_check_their_numbers_for_python_callers(make, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        make()


def test_a_diverging_run_stops_with_a_clear_error(data, tmp_path):
    assert_error(run_cli(*finetune_args(data, "classify", "--lr", "1e30", out=tmp_path / "out")), "diverged")


# ---- existing and unwritable outputs ---------------------------------------------------------------
def test_finetune_refuses_to_replace_an_earlier_run(data, tmp_path):
    out = tmp_path / "run"
    assert_ok(run_cli(*finetune_args(data, out=out)))
    before = (out / "model" / "model.safetensors").read_bytes()
    assert_error(run_cli(*finetune_args(data, out=out)), str(out), "earlier run", "--overwrite")
    assert (out / "model" / "model.safetensors").read_bytes() == before
    assert_error(run_cli(*finetune_args(data, "classify", "--resume", out=out)), "no checkpoint.pt")
    assert_ok(run_cli(*finetune_args(data, "classify", "--overwrite", "--seed", "1", out=out)))
    assert (out / "model" / "model.safetensors").read_bytes() != before


def test_predict_refuses_to_replace_an_existing_output(data, tmp_path):
    target = write(tmp_path / "p.jsonl", "keep me\n")
    args = ["predict", "--model", data["models"]["classify"], data["files"]["dev"], "--quiet", "-o", target]
    assert_error(run_cli(*args), target, "already exists", "--overwrite")
    assert Path(target).read_text() == "keep me\n"
    assert_ok(run_cli(*args, "--overwrite"))
    assert len(Path(target).read_text().splitlines()) == 8


def test_unwritable_outputs_are_refused_before_any_work(data, tmp_path):
    a_file = write(tmp_path / "notes.txt", "x")
    assert_error(run_cli(*finetune_args(data, out=os.path.join(a_file, "run"))), "notes.txt is a file")
    assert_error(run_cli(*finetune_args(data, out=a_file)), "is a file, not a folder")
    predict = ["predict", "--model", data["models"]["classify"], data["files"]["dev"], "--quiet", "-o"]
    assert_error(run_cli(*predict, os.path.join(a_file, "p.jsonl")), "notes.txt is a file")
    assert_error(run_cli(*predict, tmp_path), "is a folder")


# ---- good but unusual input: non-ASCII, very long texts, no dev set -----------------------------------
def test_non_ascii_text_trains_and_predicts(data, tmp_path):
    train = write(tmp_path / "train.tsv", "sentence\tlabel\n" + "".join(
        f"{t}\t{y}\n" for t, y in [("中 é good", "pos"), ("très bad 中文", "neg"), ("ü great", "pos"),
                                   ("naïve poor", "neg")] * 2))
    out = tmp_path / "run"
    assert_ok(run_cli(*finetune_args(data, train=train, dev=train, test=train, out=out)))
    rows = jsonl(out / "test_predictions.jsonl")
    assert len(rows) == 8 and {r["gold"] for r in rows} == {"pos", "neg"}
    conll = write(tmp_path / "train.conll", "Zoë B-PER\nlebt O\nin O\nMünchen B-LOC\n\n中 B-LOC\n文 O\n")
    result = assert_ok(run_cli("predict", "--model", data["models"]["ner"], conll, "--quiet"))
    tags = [json.loads(line) for line in result.out.splitlines()]
    assert [len(t["tags"]) for t in tags] == [4, 2] and tags[0]["words"][0] == "Zoë"


@pytest.mark.parametrize("mode", ["windows", "truncate", None])  # None: the default, truncate
def test_very_long_texts_are_read_in_windows_or_truncated_and_counted(data, tmp_path, mode):
    long = " ".join(["good"] * 3000)
    train = write(tmp_path / "train.tsv", f"sentence\tlabel\n{long}\t1\nbad film\t0\n")
    out = tmp_path / "run"
    flags = ["--long-inputs", mode] if mode else []
    result = assert_ok(run_cli(*finetune_args(data, "classify", "--max-seq-length", "32", *flags, train=train,
                                              out=out)))
    windows = math.ceil((3000 - 30) / 15) + 1
    expected = f"2 examples in {windows + 1} windows" if mode == "windows" else "1 truncated to 32 tokens"
    assert f"an epoch holds {expected}" in result.err or expected in result.err, result.err
    predicted = assert_ok(run_cli("predict", "--model", out / "model", train, "--quiet"))
    assert len(predicted.out.splitlines()) == 2 and expected.split(" ", 1)[1] in predicted.err


def test_pairs_and_choices_count_their_truncated_inputs(data, tmp_path):
    pairs = write(tmp_path / "pairs.tsv", "a\tb\tlabel\n" + f"{'good ' * 40}\t{'bad ' * 40}\t1\nbad\tfilm\t0\n")
    result = assert_ok(run_cli(*finetune_args(data, "classify", "--text-a", "a", "--text-b", "b",
                                              "--max-seq-length", "32", train=pairs)))
    assert "2 examples, 1 truncated to 32 tokens" in result.err
    long_swag = SWAG + f"{'good ' * 100},the plot was,fine,bad,awful,poor,0\n"
    result = assert_ok(run_cli("predict", "--model", data["models"]["multiple_choice"],
                               write(tmp_path / "swag.csv", long_swag), "--quiet", "--batch-size", "2"))
    assert "4 examples, 1 truncated to 48 tokens" in result.err and len(result.out.splitlines()) == 4


def test_without_dev_the_last_model_is_kept_and_no_score_is_reported(data, tmp_path):
    out = tmp_path / "run"
    result = assert_ok(run_cli(*finetune_args(data, out=out)))
    summary = json.loads((out / "summary.json").read_text())
    assert "best_score" not in summary and "dev" not in summary and summary["kept_model"].startswith("last step")
    assert "no dev" in result.err and "accuracy" not in result.last_line
    records = jsonl(out / "metrics.jsonl")
    assert [r["kind"] for r in records] == ["train", "train"]
    assert not (out / "checkpoint.pt").exists()  # a completed run leaves no checkpoint behind
    task = task_from_state(load_finetuned(out / "model"))
    assert task.labels == ["0", "1"]


def test_progress_evaluations_and_summary_go_to_stderr_and_stdout_carries_only_output(data, tmp_path):
    out = tmp_path / "run"
    args = finetune_args(data, "classify", "--eval-every", "1", out=out, dev=data["files"]["dev"])
    result = assert_ok(run_cli(*[a for a in args if a != "--quiet"]))  # stderr is not a terminal here
    assert result.out == ""
    assert "finetune classify: 2/2 (100%)" in result.err  # a progress line, as in a log file
    assert "step 1: dev accuracy=" in result.err and "an epoch holds 16 examples" in result.err
    predicted = assert_ok(run_cli("predict", "--model", out / "model", data["files"]["dev"]))
    assert all(json.loads(line)["label"] in ("0", "1") for line in predicted.out.splitlines())
    assert '"accuracy"' in predicted.last_line


def test_cli_modules_do_not_import_torch():
    code = ("import os, sys, types, argparse, bertlab\n"
            "pkg = types.ModuleType('bertlab.cli')\n"
            "pkg.__path__ = [os.path.join(os.path.dirname(bertlab.__file__), 'cli')]\n"
            "sys.modules['bertlab.cli'] = pkg\n"
            "import bertlab.cli.finetune as f, bertlab.cli.predict as p\n"
            "sub = argparse.ArgumentParser().add_subparsers()\n"
            "f.add_parser(sub); p.add_parser(sub)\n"
            "print('torch' in sys.modules)\n")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# ---- resume: a killed run continues exactly -----------------------------------------------------------
class Killed(KeyboardInterrupt):
    pass


def kill_at_step(monkeypatch, step):
    """Make the training step number `step` raise, as a kill would stop the process there."""
    calls = {"n": 0}
    real = engine.train_step

    def train_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            raise Killed
        return real(*args, **kwargs)
    monkeypatch.setattr(engine, "train_step", train_step)


@pytest.fixture(scope="module")
def dropout_base(tmp_path_factory):
    return tiny_base(tmp_path_factory.mktemp("dropout") / "base", dropout=0.1)  # resume must restore the RNG


@pytest.mark.parametrize(("with_dev", "variant"), [(True, []), (False, ["--grad-accum", "2", "--group-by-length"])],
                         ids=["dev", "no-dev-accum-grouped"])
def test_a_killed_run_resumes_exactly(data, dropout_base, tmp_path, monkeypatch, with_dev, variant):
    train = write(tmp_path / "train.tsv", sentiment_tsv(24))
    dev = {"dev": data["files"]["dev"]} if with_dev else {}
    args = lambda out: finetune_args(data, "classify", "--max-steps", "5", "--eval-every", "2", *variant,  # noqa: E731
                                     model=dropout_base, train=train, out=out, **dev)
    assert_ok(run_cli(*args(tmp_path / "whole")))
    kill_at_step(monkeypatch, 4)  # after the checkpoint of step 2, during step 4
    assert run_cli(*args(tmp_path / "killed")).code == 130
    assert (tmp_path / "killed" / "checkpoint.pt").exists()
    monkeypatch.undo()
    assert_error(run_cli(*args(tmp_path / "killed")), "checkpoint", "--resume")  # not restarted silently
    result = assert_ok(run_cli(*args(tmp_path / "killed"), "--resume"))
    assert "resuming" in result.err and "at step 2 of 5" in result.err
    whole, resumed = [jsonl(tmp_path / run / "metrics.jsonl") for run in ("whole", "killed")]
    assert resumed == whole  # every per-step loss and learning rate, every dev score
    weights = [(tmp_path / run / "model" / "model.safetensors").read_bytes() for run in ("whole", "killed")]
    assert weights[0] == weights[1]
    assert not (tmp_path / "killed" / "checkpoint.pt").exists()


def test_resume_refuses_other_settings_or_data(data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    kill_at_step(monkeypatch, 4)
    assert run_cli(*finetune_args(data, "classify", "--max-steps", "6", "--eval-every", "2", out=out)).code == 130
    monkeypatch.undo()
    resume = lambda *extra, **files: run_cli(*finetune_args(data, "classify", "--max-steps", "6", "--eval-every",  # noqa: E731
                                                            "2", *extra, "--resume", out=out, **files))
    assert_error(resume("--lr", "0.01"), "checkpoint.pt", "lr (0.001, now 0.01)")
    assert_error(resume(train=data["files"]["dev"]), "checkpoint.pt", "other training data")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    write(garbage / "checkpoint.pt", b"not a checkpoint")
    assert_error(run_cli(*finetune_args(data, "classify", "--resume", out=garbage)), "checkpoint.pt")
    assert_ok(resume())


class _Payload:
    """Unpickling this would call open(marker, "w"): proof that code ran."""
    marker = None

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_checkpoint_is_refused_and_its_payload_never_runs(data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    kill_at_step(monkeypatch, 4)
    assert run_cli(*finetune_args(data, "classify", "--max-steps", "6", "--eval-every", "2", out=out)).code == 130
    monkeypatch.undo()
    genuine = torch.load(out / "checkpoint.pt", weights_only=True)
    _Payload.marker = str(tmp_path / "payload-ran")
    torch.save({**genuine, "extra": {**genuine["extra"], "hook": _Payload()}}, out / "checkpoint.pt")
    assert_error(run_cli(*finetune_args(data, "classify", "--max-steps", "6", "--eval-every", "2", "--resume",
                                        out=out)), "checkpoint.pt", "refused", "run code")
    assert not os.path.exists(_Payload.marker)

# ---- the model folder's replacement survives a kill at every point ----------------------------------
@pytest.fixture(scope="module")
def two_models():
    from bertlab.models import BertConfig
    from bertlab.tokenization import BertTokenizer, Vocab
    tokenizer = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))
    config = BertConfig(vocab_size=len(tokenizer.vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    task = SequenceClassificationTask(["0", "1"])
    torch.manual_seed(0)
    old, new = task.build_model(config), task.build_model(config)
    return task, tokenizer, old, new


# A replacement's file-system operations, each a point a kill can fall before: finish_swap's two
# cleanups, task.json (the last file of the new folder), rename .tmp -> .new, then finish_swap: one
# cleanup, the .old cleanup, rename model -> .old, rename .new -> model, delete .old.
FS_STEPS = 9


@pytest.mark.parametrize("kill_at", range(FS_STEPS + 1))  # 0: no kill
def test_replacing_a_model_folder_leaves_a_loadable_model_at_every_point(two_models, tmp_path, monkeypatch, kill_at):
    task, tokenizer, old, new = two_models
    folder = tmp_path / "model"
    save_finetuned(folder, old, tokenizer, task.state())
    calls = {"n": 0}

    def counted(real):
        def op(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == kill_at:
                raise Killed
            return real(*args, **kwargs)
        return op
    monkeypatch.setattr(folder_module.os, "rename", counted(os.rename))
    monkeypatch.setattr(folder_module.shutil, "rmtree", counted(folder_module.shutil.rmtree))
    monkeypatch.setattr(folder_module, "atomic_write_text", counted(folder_module.atomic_write_text))
    try:
        save_finetuned(folder, new, tokenizer, task.state())
        assert kill_at == 0 and calls["n"] == FS_STEPS
    except Killed:
        assert kill_at > 0
    monkeypatch.undo()

    def holds(model):
        loaded = load_finetuned(folder).model
        return all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    is_new = holds(new)
    assert is_new or holds(old)  # after a kill at any point: a whole model, the old one or the new one
    new_was_whole = is_new or os.path.isdir(f"{folder}.new")
    finish_swap(folder)  # what the next save or run does first
    assert os.listdir(tmp_path) == ["model"] and readable_folder(folder) == str(folder)
    assert holds(new if new_was_whole else old)
