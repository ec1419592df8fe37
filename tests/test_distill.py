"""Distillation (DistilBERT): the student starts from the teacher's every other layer exactly, the
three loss terms equal their values computed by hand, task distillation trains through fit() into a
folder that load_model and predict read, general distillation runs on shards with and without a
teacher masked-LM head, and bad input is a clear error. Tiny models, seconds each."""
import json
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from bertlab.finetune.tasks import task_from_state
from bertlab.cli import main
from bertlab.distillation.objective import (TaskDistillation, TaskDistillSettings, cosine_loss, logits_with_hidden,
                                            soft_target_loss, unmasked)
from bertlab.distillation.student import student_from_teacher, teacher_layers_for
from bertlab.models import BertForPreTraining, BertForSequenceClassification, BertModel

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 4-layer base model, the tiny sentiment files, and a teacher fine-tuned on them."""
    from test_finetune_training import tokenizer_and_config, write_files

    from bertlab import save_pretrained
    root = tmp_path_factory.mktemp("distill")
    tokenizer, config = tokenizer_and_config(dropout=0.1)
    config = replace(config, num_hidden_layers=4)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), root / "base", tokenizer)
    files = write_files(root)
    code = main(["finetune", "--task", "classify", "--model", str(root / "base"), "--train", files["classify", "train"],
                 "--dev", files["classify", "dev"], "--lr", "3e-3", "--epochs", "4", "--batch-size", "4",
                 "--device", "cpu", "--quiet", "-o", str(root / "teacher")])
    assert code == 0
    return {"root": root, "tokenizer": tokenizer, "config": config, "train": files["classify", "train"],
            "dev": files["classify", "dev"], "teacher": str(root / "teacher" / "model")}


# ---- the student -----------------------------------------------------------------------------------
def test_layer_choice_is_every_other_layer():
    assert teacher_layers_for(3, 6) == [0, 2, 4]
    assert teacher_layers_for(6, 12) == [0, 2, 4, 6, 8, 10]
    assert teacher_layers_for(1, 6) == [0]
    assert teacher_layers_for(4, 6) == [0, 1, 3, 4]  # an even spread where every other does not fit


def test_student_init_copies_every_other_layer_exactly(tiny):
    torch.manual_seed(1)
    teacher = BertForSequenceClassification(tiny["config"], num_labels=3)
    student = student_from_teacher(teacher, 2, lambda c: BertForSequenceClassification(c, num_labels=3))
    assert student.config.num_hidden_layers == 2 and len(student.bert.layers) == 2
    for i, t in enumerate([0, 2]):
        for (name, p), q in zip(student.bert.layers[i].named_parameters(), teacher.bert.layers[t].parameters()):
            assert torch.equal(p, q), (i, name)
    for part in ("bert.embeddings", "bert.pooler", "classifier"):
        for p, q in zip(student.get_submodule(part).parameters(), teacher.get_submodule(part).parameters()):
            assert torch.equal(p, q), part
    assert sum(p.numel() for p in student.parameters()) < sum(p.numel() for p in teacher.parameters())
    # a masked-LM student keeps its decoder tied to its own word embeddings
    pre = student_from_teacher(BertForPreTraining(tiny["config"]), 2, lambda c: BertForPreTraining(c, False))
    assert pre.mlm.embedding_table is pre.bert.embeddings.word_embeddings.weight


# ---- the loss terms, by hand ---------------------------------------------------------------------------
def test_soft_target_loss_by_hand():
    student, teacher, t = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], [[3.0, 2.0, 1.0], [1.0, 0.0, -1.0]], 2.0

    def by_hand(s, z):
        p = [math.exp(x / t) / sum(math.exp(y / t) for y in z) for x in z]
        log_q = [x / t - math.log(sum(math.exp(y / t) for y in s)) for x in s]
        return -sum(pi * lq for pi, lq in zip(p, log_q))
    rows = [by_hand(s, z) for s, z in zip(student, teacher)]
    got = soft_target_loss(torch.tensor(student), torch.tensor(teacher), t)
    assert got.item() == pytest.approx(t * t * sum(rows) / 2, rel=1e-6)
    weighted = soft_target_loss(torch.tensor(student), torch.tensor(teacher), t, torch.tensor([0.0, 1.0]))
    assert weighted.item() == pytest.approx(t * t * rows[1], rel=1e-6)
    # equal logits: the loss is T^2 times the teacher's entropy, its minimum
    z = torch.tensor([[0.5, -1.0, 2.0]])
    entropy = -(F.softmax(z / t, -1) * F.log_softmax(z / t, -1)).sum()
    assert soft_target_loss(z, z, t).item() == pytest.approx(t * t * entropy.item(), rel=1e-6)


def test_cosine_loss_by_hand_skips_padding():
    student = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]]])
    teacher = torch.tensor([[[1.0, 1.0], [0.0, -1.0], [-5.0, 5.0]]])  # cos 1/sqrt(2), -1; the third is padding
    got = cosine_loss(student, teacher, torch.tensor([[1, 1, 0]]))
    assert got.item() == pytest.approx(((1 - 1 / math.sqrt(2)) + 2) / 2, rel=1e-6)


def test_task_loss_is_the_weighted_sum_of_hand_computed_terms(tiny):
    """TaskDistillation.loss on a tiny batch equals alpha_soft·T²·CE + alpha_hard·CE(labels) +
    alpha_cos·(1 - cos), each term computed here from the two models' outputs directly."""
    from bertlab.interop.finetuned import load_finetuned
    _loaded = load_finetuned(tiny["teacher"])
    task, teacher, tokenizer = task_from_state(_loaded), _loaded.model, _loaded.tokenizer
    student = student_from_teacher(teacher, 2, lambda c: task.build_model(c, init_weights=False)).eval()
    examples = task.read(tiny["train"])[:5]
    batch = task.collate(task.featurize(examples, tokenizer), tokenizer.pad_token_id)
    s = TaskDistillSettings(out="unused", alpha_soft=0.7, alpha_hard=0.2, alpha_cos=3.0, temperature=3.0)
    objective = TaskDistillation(task, student, teacher, tokenizer, examples, [], s)
    got = objective.loss(student, batch)
    with torch.no_grad():
        ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        hs, ht = student.bert(ids, types, mask), teacher.bert(ids, types, mask)
        zs, zt = student(ids, types, mask), teacher(ids, types, mask)
    torch.testing.assert_close(logits_with_hidden(student, batch)[0], zs)  # the head on the full forward
    soft = -(F.softmax(zt / 3, -1) * F.log_softmax(zs / 3, -1)).sum(-1).mean() * 9
    hard = F.cross_entropy(zs, batch["label"])
    real = mask.bool()
    cos = (1 - F.cosine_similarity(hs.sequence_output[real], ht.sequence_output[real], dim=-1)).mean()
    torch.testing.assert_close(got, 0.7 * soft + 0.2 * hard + 3.0 * cos)
    values = objective.terms.step_values()
    assert values == pytest.approx({"soft_loss": soft.item(), "hard_loss": hard.item(), "cos_loss": cos.item()})


def test_unmasked_puts_the_original_tokens_back():
    batch = {"input_ids": torch.tensor([[2, 4, 7, 4, 3, 0]]), "masked_lm_positions": torch.tensor([[1, 3, 0]]),
             "masked_lm_ids": torch.tensor([[9, 8, 0]]), "masked_lm_weights": torch.tensor([[1.0, 1.0, 0.0]])}
    assert unmasked(batch).tolist() == [[2, 9, 7, 8, 3, 0]]  # the weight-0 slot leaves [CLS] alone


# ---- task distillation through fit ------------------------------------------------------------------
def test_task_distillation_trains_through_fit_into_a_loadable_folder(tiny, tmp_path, capsys):
    out = tmp_path / "student"
    code = main(["distill", "--teacher", tiny["teacher"], "--student-layers", "2", "--train", tiny["train"],
                 "--dev", tiny["dev"], "--test", tiny["dev"], "--lr", "3e-3", "--epochs", "3", "--batch-size", "4",
                 "--device", "cpu", "--quiet", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    train = [r for r in records if r["kind"] == "train"]
    assert len(train) == 18 and all({"soft_loss", "hard_loss", "cos_loss"} <= set(r) for r in train)
    first, last = (sum(r["soft_loss"] for r in part) / 3 for part in (train[:3], train[-3:]))
    assert last < first  # the student moves toward the teacher
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["teacher_layers"], summary["student_layers"]) == (4, 2) and "accuracy" in summary["test"]
    from bertlab.interop.load import load_model
    loaded = load_model(out / "model")
    assert loaded.kind == "finetuned" and loaded.model.config.num_hidden_layers == 2
    assert main(["predict", "--model", str(out / "model"), tiny["dev"], "-o", str(tmp_path / "p.jsonl")]) == 0
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 6


# ---- general distillation -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from pretraining_data import TINY, make_folders

    from bertlab import save_pretrained
    from bertlab.models import BertConfig
    root = tmp_path_factory.mktemp("general")
    train, dev, tokenizer = make_folders(root, max_seq_length=32, masked=4, held_out=60, limit=400)
    config = BertConfig(vocab_size=len(tokenizer.vocab), **{**TINY, "num_hidden_layers": 4})
    torch.manual_seed(0)
    save_pretrained(BertForPreTraining(config), root / "with_head", tokenizer)
    save_pretrained(BertModel(config), root / "encoder", tokenizer)
    return {"train": train, "dev": dev, "root": root}


def general(shards, teacher, out, *extra):
    return ["distill", "--teacher", str(shards["root"] / teacher), "--student-layers", "2", "--data", shards["train"],
            "--eval-data", shards["dev"], "--max-steps", "4", "--eval-every", "4", "--batch-size", "8",
            "--device", "cpu", "--quiet", "-o", str(out), *extra]


@pytest.mark.parametrize("teacher", ["with_head", "encoder"])
def test_general_distillation_with_and_without_a_masked_lm_head(shards, tmp_path, capsys, teacher):
    out = tmp_path / teacher
    assert main(general(shards, teacher, out)) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    train = [json.loads(line) for line in open(out / "metrics.jsonl") if '"train"' in line]
    held = json.loads((out / "summary.json").read_text())["held_out"]
    assert 0 < held["embedding_cosine"] <= 1 and 0 < held["token_cosine"] <= 1
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    if teacher == "with_head":
        assert {"soft_loss", "hard_loss", "cos_loss"} <= set(train[0]) and "mlm_accuracy" in held
        assert config["architectures"] == ["BertForPreTraining"]
    else:  # no head: said so, the cosine alone, and a bare encoder like the teacher
        assert "no masked-LM head" in err and set(train[0]) & {"soft_loss", "hard_loss"} == set()
        assert config["architectures"] == ["BertModel"]
        code = main(general(shards, teacher, tmp_path / "soft", "--alpha-soft", "1"))
        assert code == 2 and "has no masked-LM head" in capsys.readouterr().err


# ---- bad input ---------------------------------------------------------------------------------------
def test_bad_input_is_a_clear_error(tiny, tmp_path, capsys):
    from test_finetune_training import WORDS

    from bertlab import save_pretrained
    from bertlab.tokenization import BertTokenizer, Vocab
    other = BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS[::-1]))
    save_pretrained(BertModel(replace(tiny["config"], num_hidden_layers=1)), tmp_path / "other", other)
    base = ["--train", tiny["train"], "--device", "cpu", "--quiet", "-o", str(tmp_path / "out")]
    cases = [(["--teacher", tiny["teacher"], "--student", str(tmp_path / "other")], "different vocabularies"),
             (["--teacher", tiny["teacher"], "--student-layers", "4"], "the teacher has 4 layers"),
             (["--teacher", str(tiny["root"] / "base"), "--student-layers", "2"], "not a task folder"),
             (["--teacher", tiny["teacher"], "--student-layers", "2", "--data", tiny["train"]], "one of them"),
             (["--teacher", tiny["teacher"], "--student-layers", "2", "--alpha-soft", "0", "--alpha-hard", "0",
               "--alpha-cos", "0"], "would learn nothing")]
    for args, message in cases:
        assert main(["distill", *args, *base]) == 2, args
        err = capsys.readouterr().err
        assert "error:" in err and message in err, (args, err)
    assert not (tmp_path / "out").exists()  # refused before any output
