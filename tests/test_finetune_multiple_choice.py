"""Multiple choice (SWAG): reading SWAG's CSV layout, (batch, choices, len) features, a tiny model
that learns to pick the ending, and its folder predicting alone."""
import json

import numpy as np
import pytest
import torch

from bertlab.finetune.tasks import task_from_state
from bertlab.interop.finetuned import load_finetuned
from bertlab.finetune.tasks import make_task
from bertlab.finetune.objective import FinetuneSettings, finetune, predict_outputs
from test_finetune_classification import tiny_config, tiny_tokenizer, write

HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
POSITIVE, NEGATIVE = ["good", "great", "fine"], ["bad", "awful", "poor"]


def swag_rows(n, seed=0, labelled=True):
    """The right ending is the one good word among three bad ones (a rule a tiny model learns fast;
    the context is noise here -- what is tested is the choice machinery)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        same, other = POSITIVE, NEGATIVE
        answer = int(rng.integers(4))
        endings = [str(rng.choice(other)) for _ in range(4)]
        endings[answer] = str(rng.choice(same))
        context = f"the {rng.choice(['movie', 'film'])} was {rng.choice(POSITIVE + NEGATIVE)}"
        label = str(answer) if labelled else ""
        lines.append(f"v{i},{i},x,{context},the plot was,gold,{','.join(endings)},{label}\n")
    return HEADER + "".join(lines)


def test_swag_csv_reads_as_context_and_prefixed_endings(tmp_path):
    task = make_task("swag")
    examples = task.read(write(tmp_path / "train.csv", HEADER + "a,1,x,the film was good,the plot was,gold,"
                                                                 "fine,bad,awful,poor,0\n"))
    e = examples[0]
    assert e.context == "the film was good" and e.label == 0
    assert e.endings == ["the plot was fine", "the plot was bad", "the plot was awful", "the plot was poor"]
    task.fit_labels(examples)
    tokenizer = tiny_tokenizer()
    features = task.featurize(examples, tokenizer)
    batch = task.collate(features, tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (1, 4, 2 + 4 + 4 + 1)
    first = tokenizer.convert_ids_to_tokens(batch["input_ids"][0, 0].tolist())
    assert first == ["[CLS]", "the", "film", "was", "good", "[SEP]", "the", "plot", "was", "fine", "[SEP]"]
    assert batch["token_type_ids"][0, 0].tolist() == [0] * 6 + [1] * 5
    assert task.feature_length(features[0]) == 4 * 11


def test_bad_swag_rows_name_the_line(tmp_path):
    task = make_task("swag")
    with pytest.raises(ValueError, match=r"b.csv:2: the label '7' is not a choice index 0..3"):
        task.read(write(tmp_path / "b.csv", HEADER + "a,1,x,ctx,pre,gold,e0,e1,e2,e3,7\n"))
    with pytest.raises(ValueError, match=r"m.csv:2: no column 'ending3'"):
        task.read(write(tmp_path / "m.csv", HEADER.replace(",ending3", "") + "a,1,x,ctx,pre,gold,e0,e1,e2,0\n"))
    with pytest.raises(ValueError, match=r"two or more ending columns"):
        make_task("multiple_choice", endings="only")


def test_a_tiny_model_learns_to_choose_and_its_folder_predicts_alone(tmp_path):
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    task = make_task("swag")
    train = task.read(write(tmp_path / "train.csv", swag_rows(64)))
    dev = task.read(write(tmp_path / "dev.csv", swag_rows(32, seed=1)))
    task.fit_labels(train)
    model = task.build_model(tiny_config(len(tokenizer.vocab)))
    summary = finetune(task, model, tokenizer, train, dev, tmp_path / "out",
                       FinetuneSettings(epochs=8, batch_size=8, lr=1e-3, progress=False))
    assert summary["best_score"] >= 0.95
    losses = [json.loads(line)["loss"] for line in open(tmp_path / "out" / "metrics.jsonl")
              if json.loads(line)["kind"] == "train"]
    assert np.mean(losses[-5:]) < 0.3 * np.mean(losses[:5])

    _loaded = load_finetuned(tmp_path / "out" / "model")
    task2, model2, tokenizer2 = task_from_state(_loaded), _loaded.model, _loaded.tokenizer
    assert task2.state() == task.state() and task2.name == "multiple_choice"
    unlabelled = task2.read(write(tmp_path / "test.csv", swag_rows(32, seed=1, labelled=False)))
    assert all(e.label is None for e in unlabelled)
    outputs = predict_outputs(task2, model2, task2.featurize(unlabelled, tokenizer2))
    rows = task2.predictions(unlabelled, None, outputs)
    assert np.mean([r["label"] == e.label for r, e in zip(rows, dev)]) >= 0.95
    assert rows[0]["ending"] == unlabelled[0].endings[rows[0]["label"]]
