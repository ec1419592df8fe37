"""Fine-tuning on the engine passes the checks every objective passes (engine_checks.py): kill -9 in
the middle of `bertlab finetune`, then --resume, gives the same log line for line and bitwise the
same model; two gloo processes equal one process reading both shares; gradient accumulation equals
the big batch. Tiny models, seconds each."""
import json
import os

import pytest
import torch
from safetensors.torch import load_file

from bertlab.finetune.tasks import make_task
from bertlab.finetune.objective import FinetuneSettings, finetune

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add overhead

WORDS = "good great fine bad awful poor movie film plot the was very peter paris lives in ate fish dog ran".split()
POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]


def tokenizer_and_config(dropout):
    from bertlab.models import BertConfig
    from bertlab.tokenization import BertTokenizer, Vocab
    tokenizer = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))
    config = BertConfig(vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    return tokenizer, config


def write_files(folder) -> dict:
    """A sentiment table of texts of mixed lengths and a CoNLL file, each for training and dev."""
    rows = [f"the {['movie', 'film', 'plot'][i % 3]} was {'very ' * (i % 4)}{(POSITIVE if i % 2 else NEGATIVE)[i % 3]}"
            f"\t{i % 2}\n" for i in range(30)]
    sentences = [["peter", "B-PER"], ["lives", "O"], ["in", "O"], ["paris", "B-LOC"]], \
        [["the", "O"], ["dog", "O"], ["ate", "O"], ["fish", "O"]], [["peter", "B-PER"], ["ran", "O"]]
    conll = "\n".join("".join(f"{w} {t}\n" for w, t in sentences[i % 3][:2 + i % 3]) for i in range(20))
    files = {"classify": ("sentence\tlabel\n" + "".join(rows[:24]), "sentence\tlabel\n" + "".join(rows[24:])),
             "ner": (conll, conll[:conll.index("\n\n", 60)])}
    paths = {}
    for task, (train, dev) in files.items():
        for split, text in (("train", train), ("dev", dev)):
            paths[task, split] = os.path.join(folder, f"{task}-{split}.{'tsv' if task == 'classify' else 'conll'}")
            with open(paths[task, split], "w", encoding="utf-8") as f:
                f.write(text)
    return paths


def records(out) -> list[dict]:
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---- kill -9, then --resume -------------------------------------------------------------------------
def test_kill_9_then_resume_through_the_engine(tmp_path):
    """`bertlab finetune` killed mid-run (SIGKILL) and resumed: the same loss at every step, the same
    log line for line, and bitwise the same model, with dropout, accumulation and length groups."""
    from engine_checks import kill_9_then_resume

    from bertlab import save_pretrained
    from bertlab.models import BertModel
    tokenizer, config = tokenizer_and_config(dropout=0.1)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), tmp_path / "base", tokenizer)
    files = write_files(tmp_path)

    def cli_args(out):
        return ["finetune", "--task", "classify", "--model", str(tmp_path / "base"), "--train",
                files["classify", "train"], "--batch-size", "4", "--grad-accum", "2", "--group-by-length",
                "--lr", "1e-3", "--max-steps", "12", "--eval-every", "2", "--device", "cpu", "--quiet", "-o", out]
    kill_9_then_resume(cli_args, str(tmp_path / "whole"), str(tmp_path / "killed"), steps=12)
    runs = [tmp_path / out for out in ("whole", "killed")]
    assert records(runs[0]) == records(runs[1])  # every record, epochs included
    assert [r["epoch"] for r in records(runs[0])] == [1] * 3 + [2] * 3 + [3] * 3 + [4] * 3
    weights = [(run / "model" / "model.safetensors").read_bytes() for run in runs]
    assert weights[0] == weights[1]
    assert not any((run / "checkpoint.pt").exists() for run in runs)  # complete runs keep none


# ---- data parallelism and accumulation ---------------------------------------------------------------
def _run(files, task_name, out, **settings) -> tuple[dict, dict]:
    """finetune() of a fresh tiny model (no dropout, so processes draw no different masks) on the
    task's files; (summary, trained weights)."""
    task = make_task(task_name)
    train, dev = task.read(files[task_name, "train"]), task.read(files[task_name, "dev"])
    task.fit_labels(train)
    tokenizer, config = tokenizer_and_config(dropout=0.0)
    torch.manual_seed(0)
    model = task.build_model(config)
    s = FinetuneSettings(**{"lr": 1e-3, "max_steps": 4, "eval_every": 2, "device": "cpu", "progress": False,
                            **settings})
    summary = finetune(task, model, tokenizer, train, dev, out, s)
    return summary, {k: v.clone() for k, v in model.state_dict().items()}


def _one_of_two_ranks(files, task_name, out):
    summary, weights = _run(files, task_name, out, batch_size=4)
    if int(os.environ["RANK"]) == 0:
        torch.save({"summary": summary, "weights": weights}, os.path.join(out, "result.pt"))


def assert_same_runs(a, b, rel=1e-5):
    """The same steps, epochs and learning rates; losses, dev scores and weights equal to rounding."""
    logs = [records(out) for out in (a["out"], b["out"])]
    assert [(r["step"], r["kind"], r.get("epoch"), r.get("lr")) for r in logs[0]] == \
        [(r["step"], r["kind"], r.get("epoch"), r.get("lr")) for r in logs[1]]
    for p, q in zip(*logs):
        numbers = lambda r: {k: v for k, v in r.items() if k != "kind"}  # noqa: E731
        assert numbers(q) == pytest.approx(numbers(p), rel=rel, abs=1e-6), (p, q)
    for name, value in a["weights"].items():
        torch.testing.assert_close(b["weights"][name], value, atol=1e-6, rtol=1e-5, msg=name)
    assert a["summary"]["examples"] == b["summary"]["examples"]


@pytest.mark.parametrize("task_name", ["classify", "ner"])  # ner: its pooler gets no gradient under DDP
def test_two_process_fit_equals_one_process_reading_both_shares(tmp_path, task_name):
    """Two processes under torchrun (gloo, DDP), each taking every other batch and scoring half the
    dev set, equal one process whose steps read both batches (grad_accum 2)."""
    from engine_checks import spawn
    files = write_files(tmp_path)
    spawn(_one_of_two_ranks, files, task_name, str(tmp_path / "ddp"))
    ddp = torch.load(tmp_path / "ddp" / "result.pt")
    summary, weights = _run(files, task_name, str(tmp_path / "one"), batch_size=4, grad_accum=2)
    assert ddp["summary"]["world_size"] == 2 and summary["world_size"] == 1
    assert_same_runs({"out": tmp_path / "one", "summary": summary, "weights": weights},
                     {"out": tmp_path / "ddp", **ddp})
    assert ddp["summary"]["dev"] == pytest.approx(summary["dev"]) and summary["best_step"] == ddp["summary"]["best_step"]
    assert load_file(tmp_path / "ddp" / "model" / "model.safetensors")  # the best model, saved by rank 0


def test_gradient_accumulation_equals_the_big_batch(tmp_path):
    """Two micro-batches of 4 per step equal one batch of 8: the same examples in each step, each
    micro-batch's mean loss halved (equal sizes), and padding that changes no real position."""
    files = write_files(tmp_path)
    runs = []
    for name, settings in (("big", dict(batch_size=8)), ("accumulated", dict(batch_size=4, grad_accum=2))):
        summary, weights = _run(files, "classify", str(tmp_path / name), **settings)
        runs.append({"out": tmp_path / name, "summary": summary, "weights": weights})
    assert_same_runs(*runs)
