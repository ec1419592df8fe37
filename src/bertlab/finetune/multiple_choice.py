"""Multiple choice, SWAG style: a context and N candidate endings; pick the ending that follows.

Each choice is the pair `[CLS] context [SEP] prefix + ending [SEP]` (the BERT paper's SWAG set-up;
SWAG's `sent2` is the start of the ending every candidate shares). BertForMultipleChoice scores each
pair from its [CLS] vector with one shared linear layer, and a softmax over the N scores is trained
with cross-entropy against the index of the right ending. Pairs are truncated longest-first.
"""
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from . import metrics
from .classification import encode_pairs
from .examples import TableFormat, field, read_rows
from .task import Task


@dataclass
class MultipleChoiceExample:
    guid: str
    context: str
    endings: list[str]
    label: int | None = None


class MultipleChoiceTask(Task):
    name = "multiple_choice"
    metric = "accuracy"

    def __init__(self, labels=None, max_seq_length=128, *, context="sent1", prefix="sent2",
                 endings=("ending0", "ending1", "ending2", "ending3"), label="label"):
        endings = list(endings.split(",") if isinstance(endings, str) else endings)
        if len(endings) < 2:
            raise ValueError(f"multiple choice needs two or more ending columns, got {endings}")
        super().__init__(labels, max_seq_length, context=context, prefix=prefix, endings=endings, label=label)
        self.format = TableFormat(context, None, label)

    @property
    def num_choices(self):
        return len(self.options["endings"])

    def read(self, path) -> list:
        o, examples = self.options, []
        for where, row in read_rows(path, self.format):
            prefix = field(row, o["prefix"], where, "prefix").strip() if o["prefix"] else ""
            endings = [" ".join(filter(None, [prefix, field(row, c, where, "ending").strip()])) for c in o["endings"]]
            label = None
            if o["label"] in row and str(row[o["label"]]).strip() != "":
                label = _choice_index(row[o["label"]], self.num_choices, where)
            examples.append(MultipleChoiceExample(where, field(row, o["context"], where, "context"), endings, label))
        if not examples:
            raise ValueError(f"{path}: no examples: the file holds no data rows (only a header or blank lines)")
        return examples

    def fit_labels(self, train_examples):
        missing = next((e for e in train_examples if e.label is None), None)
        if missing is not None:
            raise ValueError(f"{missing.guid}: a training example without a label")
        self.labels = [str(i) for i in range(self.num_choices)]

    def featurize(self, examples, tokenizer) -> list[dict]:
        n = self.num_choices
        encoded = encode_pairs(tokenizer, [e.context for e in examples for _ in range(n)],
                               [ending for e in examples for ending in e.endings], self.max_seq_length)
        features = []
        for i, e in enumerate(examples):
            ids, types, truncated = zip(*encoded[i * n:(i + 1) * n])
            features.append({"example_index": i, "input_ids": list(ids), "token_type_ids": list(types),
                             "label": e.label if e.label is not None else 0, "truncated": any(truncated)})
        return features

    def feature_length(self, feature):
        return len(feature["input_ids"]) * max(len(ids) for ids in feature["input_ids"])

    def collate(self, features, pad_id=0):
        """(batch, choices, longest choice in the batch) tensors."""
        length = max(len(ids) for f in features for ids in f["input_ids"])
        pad = lambda rows, value: [r + [value] * (length - len(r)) for r in rows]  # noqa: E731
        return {"input_ids": torch.tensor([pad(f["input_ids"], pad_id) for f in features]),
                "token_type_ids": torch.tensor([pad(f["token_type_ids"], 0) for f in features]),
                "attention_mask": torch.tensor([pad([[1] * len(r) for r in f["input_ids"]], 0) for f in features]),
                "label": torch.tensor([f["label"] for f in features])}

    def loss(self, outputs, batch):
        return F.cross_entropy(outputs.float(), batch["label"])

    def evaluate(self, examples, features, outputs):
        pred = [int(np.argmax(o)) for o in outputs]
        return {"accuracy": metrics.accuracy([e.label for e in examples], pred)}

    def predictions(self, examples, features, outputs):
        probs = torch.softmax(torch.tensor(np.stack(outputs)), -1).numpy()
        return [{"id": e.guid, "label": int(p.argmax()), "ending": e.endings[int(p.argmax())],
                 "probability": round(float(p.max()), 6), **({"gold": e.label} if e.label is not None else {})}
                for e, p in zip(examples, probs)]


def _choice_index(value, choices, where):
    try:
        index = int(str(value).strip())
    except ValueError:
        index = -1
    if not 0 <= index < choices:
        raise ValueError(f"{where}: the label {value!r} is not a choice index 0..{choices - 1}")
    return index
