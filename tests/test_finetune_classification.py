"""Sentence / pair classification and regression: reading tables (and their errors), GLUE layouts,
long inputs, a tiny model that learns, and a fine-tuned folder that predicts alone."""
import json

import numpy as np
import pytest
import torch

from bertlab.finetune.tasks import task_from_state
from bertlab.finetune.classification import RegressionTask, SequenceClassificationTask
from bertlab.finetune.examples import TableFormat, read_table
from bertlab.interop.finetuned import load_finetuned
from bertlab.finetune.glue import glue_files, glue_task
from bertlab.finetune.objective import FinetuneSettings, finetune, length_grouped_batches, predict_outputs
from bertlab.models import BertConfig
from bertlab.tokenization import BertTokenizer, Vocab

WORDS = "good great fine bad awful poor movie film plot the a is was not very".split()


def tiny_tokenizer():
    return BertTokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS), do_lower_case=True)


def tiny_config(vocab_size):
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def sentiment_rows(n, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        label = int(rng.integers(2))
        word = rng.choice(["good", "great", "fine"] if label else ["bad", "awful", "poor"])
        rows.append((f"the {rng.choice(['movie', 'film', 'plot'])} was {'very ' * int(rng.integers(2))}{word}", str(label)))
    return rows


def test_tables_read_alike_from_tsv_csv_and_jsonl(tmp_path):
    tsv = write(tmp_path / "a.tsv", "sentence\tlabel\nthe film was good\t1\nthe plot was bad\t0\n")
    csv = write(tmp_path / "a.csv", 'sentence,label\n"the film was good",1\nthe plot was bad,0\n')
    jsonl = write(tmp_path / "a.jsonl", '{"sentence": "the film was good", "label": 1}\n'
                                        '{"sentence": "the plot was bad", "label": 0}\n')
    for path in (tsv, csv, jsonl):
        examples = read_table(path, TableFormat())
        assert [(e.text_a, str(e.label)) for e in examples] == [("the film was good", "1"), ("the plot was bad", "0")]
        assert examples[1].guid.endswith(":3" if path.suffix != ".jsonl" else ":2")


def test_bad_tables_name_the_file_and_line(tmp_path):
    ragged = write(tmp_path / "r.tsv", "sentence\tlabel\nok\t1\nno label here\n")
    with pytest.raises(ValueError, match=r"r.tsv:3: 1 fields, but the header has 2"):
        read_table(ragged, TableFormat())
    with pytest.raises(ValueError, match=r"m.tsv:2: no column 'text'"):
        read_table(write(tmp_path / "m.tsv", "sentence\tlabel\nok\t1\n"), TableFormat(text_a="text"))
    with pytest.raises(ValueError, match=r"e.tsv: the file is empty"):
        read_table(write(tmp_path / "e.tsv", ""), TableFormat())
    with pytest.raises(ValueError, match=r"h.tsv: no examples"):
        read_table(write(tmp_path / "h.tsv", "sentence\tlabel\n"), TableFormat())
    with pytest.raises(ValueError, match=r"b.jsonl:2: not a JSON object"):
        read_table(write(tmp_path / "b.jsonl", '{"sentence": "a", "label": 1}\n{oops\n'), TableFormat())
    with pytest.raises(ValueError, match=r"x.tsv:2: the text_a column 'sentence' is empty"):
        read_table(write(tmp_path / "x.tsv", "sentence\tlabel\n \t1\n"), TableFormat())


def test_labels_unseen_in_training_are_an_error(tmp_path):
    task = SequenceClassificationTask()
    train = task.read(write(tmp_path / "train.tsv", "sentence\tlabel\ngood\tpos\nbad\tneg\n"))
    task.fit_labels(train)
    dev_path = write(tmp_path / "dev.tsv", "sentence\tlabel\nfine\tpos\nmeh\tneutral\n")
    with pytest.raises(ValueError, match=r"labels never seen in training: 'neutral' first at .*dev.tsv:3"):
        task.check_labels(task.read(dev_path), dev_path)


def test_glue_layouts_read_the_official_files(tmp_path):
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    write(mrpc / "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                              '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " .\t'
                              'Referring to him as only " the witness " , Amrozi accused his brother .\n')
    task = glue_task("mrpc")
    [e] = task.read(glue_files("mrpc", mrpc)["train"])
    assert e.text_b.startswith("Referring") and e.label == "1" and task.metric == "f1"
    cola = write(tmp_path / "cola.tsv", "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n")
    [e] = glue_task("cola").read(cola)
    assert e.text_a.startswith("Our friends") and e.label == "1"
    stsb = write(tmp_path / "sts.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
                                       "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\t"
                                       "An air plane is taking off.\t5.000\n")
    [e] = glue_task("sts-b").read(stsb)
    assert e.label == 5.0 and isinstance(glue_task("stsb"), RegressionTask)


def test_long_texts_are_read_in_windows_and_their_logits_averaged():
    tokenizer = tiny_tokenizer()
    task = SequenceClassificationTask(["0", "1"], max_seq_length=8, long_inputs="windows")
    from bertlab.finetune.examples import InputExample
    examples = [InputExample("x:1", " ".join(["good"] * 20), label="1"), InputExample("x:2", "bad", label="0")]
    features = task.featurize(examples, tokenizer)
    assert [f["example_index"] for f in features].count(0) > 1 and all(len(f["input_ids"]) <= 8 for f in features)
    outputs = [np.array([0.0, float(i)]) for i in range(len(features))]
    merged = task.example_outputs(examples, features, outputs)
    first = [o for f, o in zip(features, outputs) if f["example_index"] == 0]
    np.testing.assert_allclose(merged[0], np.mean(first, 0))


def test_length_grouped_batches_cover_every_example_once():
    lengths = np.random.default_rng(0).integers(3, 100, 1000).tolist()
    batches = length_grouped_batches(lengths, 16, np.random.default_rng(1))
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches])
    assert spread < 10  # grouped: a random batch of 16 would spread over ~90


@pytest.fixture
def sentiment_files(tmp_path):
    for split, n, seed in (("train", 64, 0), ("dev", 32, 1)):
        write(tmp_path / f"{split}.tsv", "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in sentiment_rows(n, seed)))
    return tmp_path


def test_a_tiny_model_learns_and_its_folder_predicts_alone(sentiment_files, tmp_path):
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    task = SequenceClassificationTask()
    train, dev = task.read(sentiment_files / "train.tsv"), task.read(sentiment_files / "dev.tsv")
    task.fit_labels(train)
    model = task.build_model(tiny_config(len(tokenizer.vocab)))
    settings = FinetuneSettings(epochs=15, batch_size=8, lr=1e-3, progress=False)
    summary = finetune(task, model, tokenizer, train, dev, tmp_path / "out", settings)
    assert summary["best_score"] == 1.0
    log = [json.loads(line) for line in open(tmp_path / "out" / "metrics.jsonl")]
    losses = [r["loss"] for r in log if r["kind"] == "train"]
    assert np.mean(losses[-5:]) < 0.2 * np.mean(losses[:5])

    _loaded = load_finetuned(tmp_path / "out" / "model")
    task2, model2, tokenizer2 = task_from_state(_loaded), _loaded.model, _loaded.tokenizer
    assert task2.labels == ["0", "1"] and task2.state() == task.state()
    features = task2.featurize(dev, tokenizer2)
    outputs = predict_outputs(task2, model2, features)
    assert task2.evaluate(dev, features, outputs)["accuracy"] == 1.0
    rows = task2.predictions(dev, features, outputs)
    assert all(r["label"] == r["gold"] for r in rows)


def test_regression_learns_a_score(tmp_path):
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    rows = [(t, "1.0" if y == "1" else "-1.0") for t, y in sentiment_rows(64)]  # centred: the head starts at 0
    write(tmp_path / "train.tsv", "sentence\tscore\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    task = RegressionTask(label="score")
    train = task.read(tmp_path / "train.tsv")
    task.fit_labels(train)
    model = task.build_model(tiny_config(len(tokenizer.vocab)))
    summary = finetune(task, model, tokenizer, train, train, tmp_path / "out",
                       FinetuneSettings(epochs=15, batch_size=8, lr=1e-3, progress=False))
    assert summary["best_score"] > 0.95 and summary["dev"]["spearman"] > 0.8
    with pytest.raises(ValueError, match=r"bad.tsv:2: the label 'high' is not a number"):
        task.read(write(tmp_path / "bad.tsv", "sentence\tscore\ngood\thigh\n"))


def test_added_special_tokens_stay_whole_and_get_embedding_rows(tmp_path):
    from bertlab import save_pretrained
    from bertlab.finetune.setup import load_base_model
    from bertlab.models import BertModel
    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    base = BertModel(tiny_config(len(tokenizer.vocab)))
    save_pretrained(base, tmp_path / "base", tokenizer)
    task = SequenceClassificationTask(["0", "1"])
    built = load_base_model(task, tmp_path / "base", added_tokens=["[S-PER]", "[E-PER]"], quiet=True)
    model, tok = built.model, built.tokenizer
    n = len(WORDS) + 5
    assert len(tok.vocab) == n + 2 and model.bert.get_embedding_table().shape[0] == n + 2
    torch.testing.assert_close(model.bert.get_embedding_table()[:n], base.get_embedding_table())
    text = "[S-PER]the film[E-PER] was good [S-PER]"
    assert tok.tokenize(text) == ["[S-PER]", "the", "film", "[E-PER]", "was", "good", "[S-PER]"]
    ids, offsets = tok.tokenize_with_offsets(text)
    assert ids == tok.tokenize_ids(text) and [text[a:b] for a, b in offsets][:4] == ["[S-PER]", "the", "film", "[E-PER]"]
    tok.save_pretrained(tmp_path / "tok")
    again = BertTokenizer.from_pretrained(tmp_path / "tok")
    assert again.tokenize(text) == tok.tokenize(text) and again.special_tokens == ["[S-PER]", "[E-PER]"]


def test_finetune_and_predict_commands(sentiment_files, tmp_path, capsys):
    from bertlab import save_pretrained
    from bertlab.cli import main
    from bertlab.models import BertModel
    tokenizer = tiny_tokenizer()
    save_pretrained(BertModel(tiny_config(len(tokenizer.vocab))), tmp_path / "base", tokenizer)
    out = tmp_path / "run"
    args = ["finetune", "--task", "classify", "--model", str(tmp_path / "base"), "--train", str(sentiment_files / "train.tsv"),
            "--dev", str(sentiment_files / "dev.tsv"), "--test", str(sentiment_files / "dev.tsv"), "--epochs", "2",
            "--batch-size", "8", "--lr", "1e-3", "--quiet", "-o", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test"]["accuracy"] == summary["dev"]["accuracy"]  # test = dev file, scored by the best model
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    write(tmp_path / "new.tsv", "sentence\nthe plot was awful\n")
    capsys.readouterr()
    assert main(["predict", "--model", str(out / "model"), str(tmp_path / "new.tsv")]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["label"] in ("0", "1") and 0.5 <= row["probability"] <= 1
    write(tmp_path / "ragged.tsv", "sentence\tlabel\ngood\t1\nbad\n")
    assert main(args[:5] + ["--train", str(tmp_path / "ragged.tsv"), "-o", str(out)]) == 2
    assert "ragged.tsv:3: 1 fields" in capsys.readouterr().err


def test_long_inputs_default_to_truncation_and_old_folders_keep_their_windows(tmp_path):
    """Truncation is the default (measured in docs/guide/finetune.md); a folder saved before the option
    existed was trained on windows and is still read that way."""
    import json

    from bertlab.interop.finetuned import load_finetuned, save_finetuned
    tokenizer = tiny_tokenizer()
    task = SequenceClassificationTask(["0", "1"], max_seq_length=8)
    assert task.options["long_inputs"] == "truncate"
    save_finetuned(tmp_path / "model", task.build_model(tiny_config(len(tokenizer.vocab))), tokenizer, task.state())
    assert task_from_state(load_finetuned(tmp_path / "model")).options["long_inputs"] == "truncate"
    path = tmp_path / "model" / "task.json"
    state = json.loads(path.read_text())
    del state["long_inputs"]
    path.write_text(json.dumps(state))
    assert task_from_state(load_finetuned(tmp_path / "model")).options["long_inputs"] == "windows"
