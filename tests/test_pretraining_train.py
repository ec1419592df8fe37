"""bertlab pretrain: LAMB against the paper's update by hand, gradient accumulation against the big
batch, kill -9 then --resume against the uninterrupted run, the loss falling on real text, the two
phases, the HF export against transformers' BertForPreTraining, and the errors a user meets."""
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
import torch

from bertlab.models import BertConfig, BertForPreTraining
from bertlab.pretraining.evaluation import evaluate
from bertlab.training.lamb import Lamb
from bertlab.pretraining.shards import PretrainingData, ShardWriter, write_meta
from bertlab.pretraining.objective import PretrainSettings, train_pretraining
from pretraining_data import (TINY, assert_same_training_state, checkpoint, make_folders, train_records,
                              write_folder)


@pytest.fixture(autouse=True)
def one_thread():
    """One thread, as the CLI subprocesses get: bitwise-equal arithmetic in and out of process, and
    no OpenMP spinning on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    train, dev, tokenizer = make_folders(root, max_seq_length=32, masked=4)
    return {"train": train, "dev": dev, "tokenizer": tokenizer}


def config(tokenizer, dropout=0.1, **kw):
    return BertConfig(**{**TINY, "vocab_size": len(tokenizer.vocab), "hidden_dropout_prob": dropout,
                         "attention_probs_dropout_prob": dropout, **kw})


def settings(folders, out, **kw):
    base = dict(data=folders["train"], out=str(out), model=config(folders["tokenizer"]), batch_size=8, lr=1e-3,
                warmup=2, max_steps=6, eval_every=100, save_every=100, seed=3, progress=False)
    return PretrainSettings(**{**base, **kw})


def test_lamb_is_the_papers_update_by_hand():
    """Two steps of Algorithm 2 of You et al. (2019) written out in numpy: a decayed matrix, a
    bias excluded from weight decay, and a zero bias whose trust ratio falls back to 1."""
    w0, b0, z0 = np.array([[0.5, -1.0], [2.0, 0.25]]), np.array([0.1, -0.3]), np.zeros(2)
    grads = [(np.array([[0.1, 0.2], [-0.3, 0.05]]), np.array([0.5, -0.1]), np.array([0.2, 0.4])),
             (np.array([[-0.2, 0.1], [0.4, 0.3]]), np.array([0.05, 0.3]), np.array([-0.1, 0.3]))]
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-6, 0.1

    def by_hand(x, gs, decay):
        m, v = np.zeros_like(x), np.zeros_like(x)
        for t, g in enumerate(gs, start=1):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
            u = r + decay * x
            x_norm, u_norm = np.linalg.norm(x), np.linalg.norm(u)
            ratio = x_norm / u_norm if x_norm > 0 and u_norm > 0 else 1.0
            x = x - lr * ratio * u
        return x

    params = [torch.nn.Parameter(torch.tensor(a)) for a in (w0, b0, z0)]
    opt = Lamb([{"params": params[:1], "weight_decay": wd}, {"params": params[1:], "weight_decay": 0.0}],
               lr=lr, betas=(b1, b2), eps=eps)
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = torch.tensor(gi)
        opt.step()
    want = [by_hand(w0, [g[0] for g in grads], wd), by_hand(b0, [g[1] for g in grads], 0.0),
            by_hand(z0, [g[2] for g in grads], 0.0)]
    for p, x in zip(params, want):
        np.testing.assert_allclose(p.detach().numpy(), x, rtol=1e-12, atol=1e-14)
    # the trust ratio matters: plain Adam (ratio 1) would have moved the matrix differently
    assert not np.allclose(want[0], by_hand(w0, [g[0] for g in grads], 0.0))


def test_gradient_accumulation_equals_big_batch(folders, tmp_path):
    cfg = config(folders["tokenizer"], dropout=0.0)  # dropout draws would differ between the two
    train_pretraining(settings(folders, tmp_path / "big", model=cfg, batch_size=16, max_steps=3))
    train_pretraining(settings(folders, tmp_path / "acc", model=cfg, batch_size=8, grad_accum=2, max_steps=3))
    assert_same_training_state(tmp_path / "big", tmp_path / "acc")
    big, acc = train_records(tmp_path / "big"), train_records(tmp_path / "acc")
    for r, q in zip(big, acc):
        assert q["mlm_loss"] == pytest.approx(r["mlm_loss"], abs=1e-5) and q["loss"] == pytest.approx(r["loss"], abs=1e-5)
        assert q["tokens_per_s"] > 0


def _cli_args(folders, config_file, out, steps, save_every):
    return ["pretrain", "--data", folders["train"], "--out", str(out), "--config", str(config_file),
            "--batch-size", "8", "--lr", "1e-3", "--warmup", "2", "--max-steps", str(steps),
            "--save-every", str(save_every), "--eval-every", "1000", "--seed", "5"]


def test_kill_9_then_resume_gives_the_uninterrupted_trajectory(folders, tmp_path):
    from bertlab.cli import main
    config_file = tmp_path / "config.json"
    config(folders["tokenizer"]).to_json_file(config_file)  # dropout on: its RNG must resume too
    steps = 24
    assert main(_cli_args(folders, config_file, tmp_path / "whole", steps, 1000)) == 0
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertlab", *_cli_args(folders, config_file, killed, steps, 3)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while not (killed / "checkpoint.pt").exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert not (killed / "model").exists(), "the run finished before it was killed: nothing was tested"
    stopped_at = len(train_records(killed))
    assert main(_cli_args(folders, config_file, killed, steps, 3) + ["--resume"]) == 0
    whole, resumed = train_records(tmp_path / "whole"), train_records(killed)
    assert [r["step"] for r in resumed] == list(range(1, steps + 1)) and stopped_at < steps
    assert [(r["step"], r["loss"], r["lr"]) for r in resumed] == [(r["step"], r["loss"], r["lr"]) for r in whole]
    ours = torch.load(killed / "checkpoint.pt", weights_only=False)["model"]
    for name, p in torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=False)["model"].items():
        assert torch.equal(ours[name], p), name


def test_mlm_loss_falls_on_real_text(folders, tmp_path):
    summary = train_pretraining(settings(folders, tmp_path, batch_size=32, lr=2e-3, warmup=5, max_steps=60,
                                         eval_data=folders["dev"], eval_every=30,
                                         model=config(folders["tokenizer"], hidden_size=64, intermediate_size=128)))
    records = train_records(tmp_path)
    start, end = records[0]["mlm_loss"], np.mean([r["mlm_loss"] for r in records[-10:]])
    assert start > 7.0 and end < start - 1.3, (start, end)  # ln(1,581) = 7.37 at the start
    held = summary["held_out"]
    assert held["mlm_loss"] < start - 1.3 and 0.05 < held["mlm_accuracy"] and 0 <= held["nsp_accuracy"] <= 1
    # evaluation inside the run sees the weights the optimizer just wrote (no stale inference cache)
    fresh = BertForPreTraining(summary["model"].config)
    fresh.load_state_dict(summary["model"].state_dict())
    assert evaluate(fresh, PretrainingData(folders["dev"]), 32, "cpu") == pytest.approx(held, rel=1e-6)
    assert [r["step"] for r in train_records(tmp_path, "eval")] == [30, 60]
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 60
    # the floor to read it against: always the token most often masked in training, counted by hand
    def labels(folder):
        data = PretrainingData(folder)
        r = data.rows(np.arange(len(data)))
        return [int(i) for row, n in zip(r["masked_lm_ids"], r["masked_lm_counts"]) for i in row[:n]], data
    (train, data), (dev, _) = labels(folders["train"]), labels(folders["dev"])
    top = Counter(train).most_common(1)[0][0]
    floor = summary["held_out_most_frequent_token"]
    assert floor == {"token": data.vocab.id_to_token[top], "mlm_accuracy": pytest.approx(dev.count(top) / len(dev))}
    # 60 steps reach the unigram level the docs describe: the model predicts the floor's token
    assert 0 < floor["mlm_accuracy"] <= held["mlm_accuracy"]
    assert json.loads((tmp_path / "summary.json").read_text())["held_out_most_frequent_token"] == floor


def test_export_loads_in_transformers_with_equal_logits_and_finetune_starts_from_it(folders, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bertlab.finetune.classification import SequenceClassificationTask
    from bertlab.finetune.setup import load_base_model
    from bertlab.interop import load_pretrained
    summary = train_pretraining(settings(folders, tmp_path, max_steps=3, optimizer="lamb"))
    folder = tmp_path / "model"
    config_json = json.loads((folder / "config.json").read_text())
    assert config_json["architectures"] == ["BertForPreTraining"]
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    theirs, info = transformers.BertForPreTraining.from_pretrained(folder, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ours = summary["model"].eval()
    batch = PretrainingData(folders["dev"]).batch(np.arange(6))
    with torch.no_grad():
        mlm, nsp = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        want = theirs.eval()(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                             attention_mask=batch["attention_mask"])
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(mlm[real], want.prediction_logits[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(nsp, want.seq_relationship_logits, atol=1e-5, rtol=1e-5)
    loaded = load_pretrained(folder, BertForPreTraining)  # strict: every tensor present
    again, tokenizer = loaded.model, loaded.tokenizer
    assert tokenizer.do_lower_case and len(tokenizer.vocab) == ours.config.vocab_size
    torch.testing.assert_close(again.mlm.bias, ours.mlm.bias)
    model = load_base_model(SequenceClassificationTask(["a", "b"]), folder, quiet=True).model
    torch.testing.assert_close(model.bert.get_embedding_table(), ours.bert.get_embedding_table())


def test_two_phases_read_their_own_folders(folders, tmp_path):
    long_folder, _, _ = make_folders(tmp_path / "long", max_seq_length=64, masked=4, held_out=10, limit=300,
                                     tokenizer=folders["tokenizer"])
    train_pretraining(settings(folders, tmp_path, data_512=long_folder, phase2_fraction=0.25, max_steps=8,
                               phase2_batch_size=4))
    assert [r["phase"] for r in train_records(tmp_path)] == [1] * 6 + [2] * 2
    state = checkpoint(tmp_path)["data"][0]["objective"]["orders"]
    assert state[0]["index"] == 6 * 8 and state[1]["index"] == 2 * 4


def test_init_from_a_model_folder_and_the_time_budget(folders, tmp_path):
    first = train_pretraining(settings(folders, tmp_path / "first", max_steps=2))["model"]
    again = train_pretraining(settings(folders, tmp_path / "again", init_from=str(tmp_path / "first" / "model"),
                                       lr=0.0, max_steps=5, max_minutes=0.0))
    assert again["steps"] == 1 and again["stopped_by_time"]  # the budget is checked after every step
    for (name, p), q in zip(first.state_dict().items(), again["model"].state_dict().values()):
        assert torch.equal(p, q), name  # lr 0: the weights are the ones it started from
    assert checkpoint(tmp_path / "again")["step"] == 1 and (tmp_path / "again" / "model").exists()


def test_dynamic_masking_resumes_exactly(folders, tmp_path, monkeypatch):
    static = PretrainingData(folders["train"])
    rows = static.rows(np.arange(200))
    instances = []
    for i in range(200):  # the originals back in place of the masks
        ids = rows["input_ids"][i, :rows["lengths"][i]].astype(int).tolist()
        for pos, orig in zip(rows["masked_lm_positions"][i], rows["masked_lm_ids"][i]):
            ids[pos] = int(orig)
        instances.append({"input_ids": ids, "segment_ids": rows["segment_ids"][i, :len(ids)].tolist(),
                          "next_sentence_label": int(rows["next_sentence_labels"][i])})
    folder = str(tmp_path / "dynamic")
    os.makedirs(folder)
    writer = ShardWriter(folder, "train", 32, 5, len(folders["tokenizer"].vocab), dynamic_masking=True)
    for inst in instances:
        writer.add(inst)
    folders["tokenizer"].vocab.save(os.path.join(folder, "vocab.txt"))
    write_meta(folder, writer.close(), max_seq_length=32, max_predictions_per_seq=5,
               vocab_size=len(folders["tokenizer"].vocab), dynamic_masking=True, nsp=True)
    dyn = {**folders, "train": folder}
    train_pretraining(settings(dyn, tmp_path / "whole", eval_data=folder, eval_every=3))
    crash_after_saving_at(3, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train_pretraining(settings(dyn, tmp_path / "part", eval_data=folder, eval_every=3, save_every=3))
    monkeypatch.undo()
    train_pretraining(settings(dyn, tmp_path / "part", eval_data=folder, eval_every=3, resume=True))
    assert without_speed(tmp_path / "whole") == without_speed(tmp_path / "part")
    evals = train_records(tmp_path / "whole", "eval")
    assert evals == train_records(tmp_path / "part", "eval") and len(evals) == 2


def test_resume_refuses_another_optimizer(folders, tmp_path):
    """Adam's and LAMB's moments have the same names: without the check, --resume would silently carry
    one optimizer's state into the other."""
    train_pretraining(settings(folders, tmp_path, max_steps=2))
    with pytest.raises(ValueError, match=r"other settings: optimizer \('adamw', now 'lamb'\)"):
        train_pretraining(settings(folders, tmp_path, max_steps=4, optimizer="lamb", resume=True))


def crash_after_saving_at(step, monkeypatch):
    from bertlab.training import engine
    save = engine.Run.save

    def save_then_crash(run):
        save(run)
        if run.step == step:
            raise KeyboardInterrupt
    monkeypatch.setattr(engine.Run, "save", save_then_crash)


def without_speed(out):
    return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in train_records(out)]


def test_bf16_autocast_trains(folders, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no native bf16" on CPUs without it
        summary = train_pretraining(settings(folders, tmp_path, precision="bf16", max_steps=2, eval_data=folders["dev"],
                                             eval_instances=16))
    assert all(np.isfinite(r["loss"]) for r in train_records(tmp_path)) and summary["held_out"]["instances"] == 16
    assert next(summary["model"].parameters()).dtype is torch.float32  # autocast, not a bf16 model


def test_mlm_only_data_trains_without_nsp(folders, tmp_path):
    rows = PretrainingData(folders["dev"])
    instances = [{"input_ids": r["input_ids"][:r["lengths"]].astype(int).tolist(),
                  "segment_ids": [0] * int(r["lengths"]), "masked_lm_positions": r["masked_lm_positions"].tolist(),
                  "masked_lm_ids": r["masked_lm_ids"].astype(int).tolist()}
                 for r in ({f: v[i] for f, v in rows.rows(np.arange(len(rows))).items()} for i in range(len(rows)))]
    folder = write_folder(tmp_path / "mlm", instances, folders["tokenizer"], 32, 4, nsp=False)
    summary = train_pretraining(settings({**folders, "train": folder}, tmp_path / "out", eval_data=folder,
                                         max_steps=2))
    assert "nsp_loss" not in train_records(tmp_path / "out")[0] and "nsp_accuracy" not in summary["held_out"]


def test_clear_errors(folders, tmp_path, capsys):
    from bertlab.cli import main
    base = ["pretrain", "--out", str(tmp_path / "out"), "--max-steps", "1"]
    assert main(base + ["--data", str(tmp_path / "nowhere")]) == 2
    assert "--data " + str(tmp_path / "nowhere") + ": no such folder" in capsys.readouterr().err
    other = tmp_path / "other.json"
    config(folders["tokenizer"], vocab_size=30522).to_json_file(other)
    assert main(base + ["--data", folders["train"], "--config", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"its instances use a {len(folders['tokenizer'].vocab)}-token vocabulary but the model has vocab_size=30522" in err
    assert main(base + ["--data", folders["train"], "--preset", "tiny", "--precision", "fp16", "--device", "cpu"]) == 2
    assert "fp16 is for GPUs; on the CPU use --precision bf16" in capsys.readouterr().err
    assert not (tmp_path / "out" / "checkpoint.pt").exists()
    tiny = base + ["--data", folders["train"], "--config", str(tmp_path / "tiny.json"), "--batch-size", "4"]
    config(folders["tokenizer"]).to_json_file(tmp_path / "tiny.json")
    assert main(tiny) == 0
    assert main(tiny) == 2 and "pass --resume to continue it or --overwrite" in capsys.readouterr().err


def test_compiled_pretraining_trains_as_eager_in_one_graph(folders, tmp_path):
    """--compile on one process compiles the objective's whole loss (BERT and its masked-LM
    cross-entropy together): the same losses and weights as eager, and no graph break or
    recompilation over the steps (a step's bookkeeping, the objective's list of parts, is replayed)."""
    import torch._dynamo
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    except Exception as e:  # no C compiler, an unsupported platform
        pytest.skip(f"torch.compile (inductor) cannot compile here: {type(e).__name__}")
    cfg = config(folders["tokenizer"], dropout=0.0)  # eager CPU dropout draws with numpy, compiled with torch
    train_pretraining(settings(folders, tmp_path / "eager", model=cfg, max_steps=4))
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    train_pretraining(settings(folders, tmp_path / "compiled", model=cfg, max_steps=4, compile=True))
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    for r, q in zip(train_records(tmp_path / "eager"), train_records(tmp_path / "compiled")):
        assert q["mlm_loss"] == pytest.approx(r["mlm_loss"], rel=1e-5) and q["loss"] == pytest.approx(r["loss"], rel=1e-5)
    assert_same_training_state(tmp_path / "eager", tmp_path / "compiled", atol=1e-5)
