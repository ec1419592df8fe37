"""Training the Transformer for translation: the loss is the paper's, accumulation and resume are
exact, averaging averages, and `bertlab translate-train` / `bertlab translate` work end to end."""
import json
import os
import random

import pytest
import torch

from bertlab.cli import main
from bertlab.data.parallel import ParallelData, collate, read_parallel
from bertlab.models.transformer import Seq2SeqTransformer, TransformerConfig
from bertlab.tokenization.subword import SubwordTokenizer
from bertlab.training.engine import fit, train_step
from bertlab.translation.objective import (Translation, TranslationSettings, average_state_dicts,
                                                  label_smoothed_loss, step_loss_of, train_translation)

LEXICON = {"open": "öffne", "the": "die", "file": "datei", "save": "speichere", "a": "eine", "new": "neue",
           "window": "fenster", "close": "schließe", "this": "diese", "page": "seite"}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls on a loaded 2-core machine: one thread is much faster
    yield
    torch.set_num_threads(before)


def write_corpus(folder, n_train=60, n_valid=8, seed=0):
    """A word-for-word toy language pair in the layout `bertlab data gettext` writes."""
    rng, words = random.Random(seed), sorted(LEXICON)
    for split, n in (("train", n_train), ("valid", n_valid)):
        pairs = [rng.choices(words, k=rng.randint(2, 5)) for _ in range(n)]
        (folder / f"{split}.en").write_text("".join(" ".join(p) + "\n" for p in pairs), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(" ".join(LEXICON[w] for w in p) + "\n" for p in pairs),
                                            encoding="utf-8")
    return folder


def toy_data(folder):
    write_corpus(folder)
    text = read_parallel(folder / "train.en", folder / "train.de")
    tokenizer = SubwordTokenizer.train(text.sources + text.targets, vocab_size=80, min_frequency=1)
    train = ParallelData.from_text(text, tokenizer, tokenizer)
    valid = ParallelData.from_files(folder / "valid.en", folder / "valid.de", tokenizer, tokenizer)
    config = TransformerConfig.preset("test", source_vocab_size=len(tokenizer), target_vocab_size=len(tokenizer),
                                      share_embeddings=True, dropout=0.1)
    return train, valid, tokenizer, config


def test_label_smoothing_matches_a_hand_computation():
    torch.manual_seed(0)
    logits, eps, pad = torch.randn(2, 3, 5), 0.1, 0
    target = torch.tensor([[1, 4, 0], [2, 0, 0]])
    expected = 0.0
    for b in range(2):
        for t in range(3):
            if target[b, t] == pad:
                continue
            log_p = logits[b, t].log_softmax(-1)
            # (1 - eps) on the reference token, eps spread uniformly over all 5 tokens
            expected -= (1 - eps) * log_p[target[b, t]] + eps / 5 * log_p.sum()
    assert label_smoothed_loss(logits, target, pad, eps).item() == pytest.approx(expected.item(), rel=1e-6)


def test_training_loss_skips_padding_but_equals_the_full_loss():
    # step_loss_of projects only the real target positions to the vocabulary
    config = TransformerConfig.preset("test", source_vocab_size=12, target_vocab_size=12)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(config).eval()
    batch = collate([([5, 6, 7], [8, 9, 10, 11, 4]), ([4], [5]), ([6, 6], [7, 8])], config.pad_token_id,
                    config.bos_token_id, config.eos_token_id)
    assert (batch.tgt_out == config.pad_token_id).any()
    full = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, config.pad_token_id, 0.1)
    step = step_loss_of(config.pad_token_id, 0.1, batch.num_tokens, 1, "cpu")(model, batch)
    assert step.item() == pytest.approx(full.item() / batch.num_tokens, rel=1e-6)


def test_gradient_accumulation_equals_one_big_batch():
    config = TransformerConfig.preset("test", source_vocab_size=12, target_vocab_size=12)
    g = torch.Generator().manual_seed(0)
    pairs = [(torch.randint(4, 12, (n,), generator=g).tolist(), torch.randint(4, 12, (m,), generator=g).tolist())
             for n, m in [(3, 5), (6, 2), (2, 2), (7, 6)]]
    weights = []
    for groups in ([pairs], [pairs[:1], pairs[1:]]):  # one batch; two micro-batches of unequal size
        torch.manual_seed(0)
        model = Seq2SeqTransformer(config)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        batches = [collate(group, config.pad_token_id, config.bos_token_id, config.eos_token_id) for group in groups]
        loss_of = step_loss_of(config.pad_token_id, 0.1, sum(b.num_tokens for b in batches), len(batches), "cpu")
        loss = train_step(model, optimizer, scheduler, iter(batches).__next__, len(batches), 0.0, loss_of=loss_of)
        weights.append((loss, {k: v.clone() for k, v in model.state_dict().items()}))
    assert weights[0][0] == pytest.approx(weights[1][0], rel=1e-5)
    for name, value in weights[0][1].items():
        torch.testing.assert_close(weights[1][1][name], value, rtol=1e-5, atol=1e-6, msg=name)


def settings(out, config, **overrides):
    return TranslationSettings(**{"out": str(out), "model": config, "max_tokens": 64, "lr": 3e-3, "warmup": 2,
                                  "max_steps": 6, "eval_every": 3, "save_every": 3, "bleu_sentences": 4,
                                  "device": "cpu", "progress": False, **overrides})


def train_records(out):
    return [(r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if r["kind"] == "train"]


def test_stopped_and_resumed_run_equals_the_uninterrupted_one(tmp_path):
    train, valid, tokenizer, config = toy_data(tmp_path)
    whole = train_translation(settings(tmp_path / "whole", config), train, valid, tokenizer, tokenizer)
    train_translation(settings(tmp_path / "parts", config, max_steps=3), train, valid, tokenizer, tokenizer)
    parts = train_translation(settings(tmp_path / "parts", config, resume=True), train, valid, tokenizer, tokenizer)
    assert train_records(tmp_path / "parts") == train_records(tmp_path / "whole")
    assert len(train_records(tmp_path / "whole")) == 6
    for name, value in whole["model"].state_dict().items():
        assert torch.equal(parts["model"].state_dict()[name], value), name
    assert parts["valid_loss"] == whole["valid_loss"]


def test_time_budget_stops_with_a_resumable_checkpoint(tmp_path):
    train, valid, tokenizer, config = toy_data(tmp_path)
    out = tmp_path / "run"
    summary = train_translation(settings(out, config, max_minutes=0.0, bleu_sentences=0), train, valid, tokenizer,
                                tokenizer)
    assert summary["steps"] == 1 and summary["stopped_by_time"] and "valid_bleu" not in summary
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 1
    resumed = train_translation(settings(out, config, max_steps=2, resume=True, bleu_sentences=0), train, valid,
                                tokenizer, tokenizer)
    assert resumed["steps"] == 2 and [step for step, _ in train_records(out)] == [1, 2]


def test_average_last_writes_the_mean_of_the_snapshots(tmp_path):
    train, valid, tokenizer, config = toy_data(tmp_path)
    out = tmp_path / "run"
    summary = train_translation(settings(out, config, max_steps=6, save_every=2, average_last=2),
                                train, valid, tokenizer, tokenizer)
    assert summary["averaged_steps"] == [4, 6]
    snapshots = torch.load(out / "checkpoint.pt", weights_only=False)["extra"]["snapshots"]
    expected = {k: (snapshots[0][1][k] + snapshots[1][1][k]) / 2 for k in snapshots[0][1]}
    from bertlab.interop.translation_folder import load_translation_model
    model = load_translation_model(out / "model").model
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, expected[name], msg=name)


def test_average_state_dicts():
    a, b = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}, {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(5)}
    out = average_state_dicts([a, b])
    assert out["w"].tolist() == [2.0, 4.0] and out["n"].item() == 5
    with pytest.raises(ValueError):
        average_state_dicts([])


def test_cli_trains_and_translates(tmp_path, capsys):
    data, out = write_corpus(tmp_path), tmp_path / "run"
    assert main(["translate-train", "--data", str(data), "--src", "en", "--tgt", "de", "--out", str(out),
                 "--joint-vocab", "--vocab-size", "80", "--min-frequency", "1", "--preset", "test",
                 "--max-tokens", "64", "--max-steps", "4", "--warmup", "2", "--lr", "3e-3", "--eval-interval", "2",
                 "--bleu-sentences", "4", "--device", "cpu", "--average-last", "2"]) == 0
    for name in ("model/config.json", "model/model.safetensors", "model/source_tokenizer/vocab.json",
                 "model/target_tokenizer/merges.txt", "model/translation.json", "curves.png", "bleu.png",
                 "metrics.jsonl", "summary.json", "checkpoint.pt"):
        assert (out / name).exists(), name
    assert "BLEU" in capsys.readouterr().err
    model = str(out / "model")

    assert main(["translate", "--model", model, str(data / "valid.en"), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 8

    assert main(["translate", "--model", model, str(data / "valid.en"), "--beam", "3", "--nbest", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16
    numbers, scores = [int(line.split("\t")[0]) for line in lines], [float(line.split("\t")[1]) for line in lines]
    assert numbers == [n for n in range(1, 9) for _ in range(2)]
    assert all(scores[i] >= scores[i + 1] for i in range(0, 16, 2))
    assert all(len(line.split("\t")) == 3 for line in lines)

    assert main(["translate", "--model", model, str(data / "valid.en"), "--ref", str(data / "valid.de")]) == 0
    err = capsys.readouterr().err
    assert "BLEU" in err and "chrF" in err


def test_cli_errors(tmp_path, capsys):
    data = write_corpus(tmp_path)
    assert main(["translate", "--model", str(tmp_path / "nothing")]) == 2
    assert "no such model folder" in capsys.readouterr().err
    assert main(["translate", "--model", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert main(["translate-train", "--data", str(data), "--out", str(tmp_path / "r")]) == 2
    assert "--src" in capsys.readouterr().err
    assert main(["translate-train", "--data", str(data), "--src", "en", "--tgt", "fr", "--out", str(tmp_path / "r")]) == 2
    assert "train.fr: no such file" in capsys.readouterr().err
    assert main(["translate-train", "--data", str(data), "--src", "en", "--tgt", "de", "--out", str(tmp_path / "r"),
                 "--resume"]) == 2
    assert "no checkpoint.pt" in capsys.readouterr().err
    assert main(["translate", "--model", str(tmp_path), "--beam", "2", "--nbest", "3"]) == 2
    assert "--nbest" in capsys.readouterr().err


def test_kill_9_then_resume_through_the_engine(tmp_path):
    """translate-train killed mid-run (SIGKILL) and resumed: the same losses at every step, bitwise
    the same final weights, and the same averaged model (its snapshots come back with the checkpoint)."""
    from engine_checks import kill_9_then_resume, same_weights
    from safetensors.torch import load_file
    data = write_corpus(tmp_path)

    def cli_args(out):
        return ["translate-train", "--data", str(data), "--src", "en", "--tgt", "de", "--out", out, "--joint-vocab",
                "--vocab-size", "80", "--min-frequency", "1", "--preset", "test", "--max-tokens", "64",
                "--max-steps", "12", "--warmup", "2", "--lr", "3e-3", "--eval-every", "4", "--save-every", "2",
                "--bleu-sentences", "4", "--average-last", "6", "--device", "cpu", "--quiet"]
    kill_9_then_resume(cli_args, str(tmp_path / "whole"), str(tmp_path / "killed"), steps=12)
    runs = [tmp_path / out for out in ("whole", "killed")]
    same_weights(*(torch.load(run / "checkpoint.pt")["model"] for run in runs))
    same_weights(*(load_file(run / "model" / "model.safetensors") for run in runs))
    assert json.loads((runs[1] / "summary.json").read_text())["averaged_steps"] == [2, 4, 6, 8, 10, 12]


class PlainSGD(Translation):
    """SGD, whose update is the gradient itself: Adam would blow the rounding noise of gradients that
    are zero in exact arithmetic (the attention keys' bias) up to full-size steps."""

    def optimizer(self, model, s):
        return torch.optim.SGD(model.parameters(), lr=s.lr)


def _fit_one_rank(train, valid, tokenizer, config, out):
    s = settings(out, config, lr=0.1, max_steps=4, eval_every=2, save_every=2, average_last=2)
    summary = fit(PlainSGD(s, train, valid, tokenizer, tokenizer), s)
    if int(os.environ["RANK"]) == 0:
        torch.save({"weights": summary["model"].state_dict(), "held_out": summary["held_out"]},
                   os.path.join(out, "result.pt"))


def test_two_process_fit_equals_one_process_reading_both_shares(tmp_path):
    """Two processes under torchrun (gloo, DDP), each taking every other batch, equal one process
    whose steps read both batches (grad_accum 2): the step's loss is divided by the target tokens of
    both processes, so the gradient is the big batch's."""
    from engine_checks import spawn
    train, valid, tokenizer, config = toy_data(tmp_path)
    config = TransformerConfig.from_dict({**config.to_dict(hf=False), "dropout": 0.0})
    spawn(_fit_one_rank, train, valid, tokenizer, config, str(tmp_path / "ddp"))
    s = settings(tmp_path / "one", config, lr=0.1, max_steps=4, eval_every=2, save_every=2, average_last=2,
                 grad_accum=2)
    one = fit(PlainSGD(s, train, valid, tokenizer, tokenizer), s)
    ddp = torch.load(tmp_path / "ddp" / "result.pt")
    for name, p in one["model"].state_dict().items():
        torch.testing.assert_close(ddp["weights"][name], p, atol=1e-6, rtol=1e-6, msg=name)
    for (step, a), (_, b) in zip(*(train_records(tmp_path / out) for out in ("ddp", "one")), strict=True):
        assert a == pytest.approx(b, rel=1e-6), step
    assert ddp["held_out"] == pytest.approx(one["held_out"], rel=1e-6)
    assert one["averaged_steps"] == [2, 4] and one["world_size"] == 1
