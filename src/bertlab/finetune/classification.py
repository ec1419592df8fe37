"""Sentence and sentence-pair classification, and regression, from the [CLS] vector.

Inputs are `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with segment ids 0/1 (run_classifier.py).
A single text longer than max_seq_length is, by `long_inputs`:
- "truncate": cut to its first max_seq_length - 2 word pieces, as run_classifier.py and HF do;
- "windows": read in sliding windows (windows.py, stride `doc_stride`), every window classified,
  and the example's logits the mean of its windows' logits (each window votes with its whole
  distribution). An epoch then holds one step's work per window, several times a truncated one's
  on long texts.
Pairs are truncated longest-first, as google-research/bert does.
"""
import numpy as np
import torch
import torch.nn.functional as F

from ..tokenization import truncate_seq_pair
from . import metrics
from .examples import TableFormat, read_table
from .task import Task
from .windows import LONG_INPUTS, Window, sliding_windows

METRICS = {"classify": ("accuracy", "macro_f1", "f1", "mcc"), "regression": ("pearson", "spearman", "mse")}


def encode_pairs(tokenizer, texts_a, texts_b, max_seq_length: int):
    """(input_ids, token_type_ids, truncated) of each `[CLS] A [SEP] B [SEP]`, the pair cut
    longest-first to max_seq_length; `truncated` says whether anything was cut."""
    a_ids = tokenizer.tokenize_ids_batch(texts_a, add_special_tokens=False)
    b_ids = tokenizer.tokenize_ids_batch(texts_b, add_special_tokens=False)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    encoded = []
    for a, b in zip(a_ids, b_ids):
        length = len(a) + len(b)
        truncate_seq_pair(a, b, max_seq_length - 3)
        encoded.append(([cls, *a, sep, *b, sep], [0] * (len(a) + 2) + [1] * (len(b) + 1), len(a) + len(b) < length))
    return encoded


class SequenceClassificationTask(Task):
    name = "classify"
    family = "classify"  # which metrics apply (GLUE tasks have their own names)
    metric = "accuracy"

    def __init__(self, labels=None, max_seq_length=128, *, text_a="sentence", text_b=None, label="label",
                 header=True, kind="auto", quoting=True, metric=None, doc_stride=None, long_inputs=None):
        if long_inputs not in (None, *LONG_INPUTS):
            raise ValueError(f"long_inputs {long_inputs!r}: choose one of {', '.join(LONG_INPUTS)}")
        if text_b is not None and (long_inputs == "windows" or doc_stride is not None):
            raise ValueError("pairs are truncated longest-first (as google-research/bert does), not read in "
                             "windows: long_inputs='windows' and doc_stride are for single texts")
        # Truncation by default: on long texts windows cost 4.3x an epoch's work and scored lower at equal
        # compute (docs/guide/finetune.md). Folders saved before the option were trained on windows (folder.py).
        long_inputs = long_inputs or "truncate"
        super().__init__(labels, max_seq_length, text_a=text_a, text_b=text_b, label=label, header=header,
                         kind=kind, quoting=quoting, metric=metric or self.metric, doc_stride=doc_stride,
                         long_inputs=long_inputs)
        if long_inputs == "truncate" and doc_stride is not None:
            raise ValueError("doc_stride is the stride of long_inputs='windows' (--long-inputs windows); "
                             "truncated inputs have no windows")
        self.metric = self.options["metric"]
        if self.metric not in METRICS[self.family]:
            raise ValueError(f"unknown metric {self.metric!r} for {self.name}; "
                             f"choose one of {METRICS[self.family]}")
        self.format = TableFormat(text_a, text_b, label, header, kind, quoting)

    def read(self, path) -> list:
        examples = read_table(path, self.format)
        for e in examples:
            if e.label is not None:
                e.label = self.parse_label(e.label, e.guid)
        return examples

    def parse_label(self, value, where):
        return str(value).strip()

    def fit_labels(self, train_examples):
        _require_labels(train_examples)
        if self.labels is None:
            self.labels = sorted({e.label for e in train_examples})
        if len(self.labels) < 2:
            raise ValueError(f"the training data has only the label {self.labels}; classification needs two or more")

    def check_labels(self, examples, path):
        known = set(self.labels)
        unseen = {}
        for e in examples:
            if e.label is not None and e.label not in known:
                unseen.setdefault(e.label, e.guid)
        if unseen:
            found = "; ".join(f"{label!r} first at {where}" for label, where in unseen.items())
            raise ValueError(f"{path}: labels never seen in training: {found}. "
                             f"Training labels: {self.labels}")

    def label_target(self, label):
        return self.labels.index(label)

    def target_fields(self):
        return ["label"]

    # --- features ---------------------------------------------------------------------------
    def featurize(self, examples, tokenizer) -> list[dict]:
        if examples and examples[0].text_b is not None:
            encoded = encode_pairs(tokenizer, [e.text_a for e in examples], [e.text_b for e in examples],
                                   self.max_seq_length)
            return [self._feature(i, e, *enc) for i, (e, enc) in enumerate(zip(examples, encoded))]
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        room = self.max_seq_length - 2
        stride = self.options.get("doc_stride") or max(room // 2, 1)
        truncate = self.options["long_inputs"] == "truncate"
        features = []
        for i, (e, ids) in enumerate(zip(examples, tokenizer.tokenize_ids_batch([e.text_a for e in examples],
                                                                                  add_special_tokens=False))):
            for w in [Window(0, min(len(ids), room))] if truncate else sliding_windows(len(ids), room, stride):
                window = [cls] + ids[w.start:w.start + w.length] + [sep]
                features.append(self._feature(i, e, window, [0] * len(window), truncate and len(ids) > room))
        return features

    def _feature(self, index, example, input_ids, token_type_ids, truncated=False):
        target = self.label_target(example.label) if example.label is not None else self.no_target
        return {"example_index": index, "input_ids": input_ids, "token_type_ids": token_type_ids, "label": target,
                "truncated": truncated}

    no_target = 0  # unlabelled rows (prediction) still collate

    # --- model and loss ---------------------------------------------------------------------------
    def num_outputs(self):
        return len(self.labels)

    def loss(self, outputs, batch):
        return F.cross_entropy(outputs.float(), batch["label"])

    # --- outputs -> answers ---------------------------------------------------------------------
    def example_outputs(self, examples, features, outputs):
        """The mean of each example's window logits (one window unless the text was long)."""
        sums, counts = np.zeros((len(examples),) + outputs[0].shape), np.zeros(len(examples))
        for f, o in zip(features, outputs):
            sums[f["example_index"]] += o
            counts[f["example_index"]] += 1
        return sums / counts.reshape((-1,) + (1,) * (sums.ndim - 1))

    def evaluate(self, examples, features, outputs):
        pred = [self.labels[i] for i in self.example_outputs(examples, features, outputs).argmax(-1)]
        gold = [e.label for e in examples]
        scores = {"accuracy": metrics.accuracy(gold, pred), "macro_f1": metrics.f1(gold, pred)}
        if len(self.labels) == 2:
            scores["f1"] = metrics.f1(gold, pred, "binary", positive=self.labels[1])
        scores["mcc"] = metrics.matthews_corrcoef(gold, pred)
        return scores

    def predictions(self, examples, features, outputs):
        logits = self.example_outputs(examples, features, outputs)
        probs = torch.softmax(torch.tensor(logits), -1).numpy()
        return [{"id": e.guid, "label": self.labels[int(p.argmax())], "probability": round(float(p.max()), 6),
                 **({"gold": e.label} if e.label is not None else {})} for e, p in zip(examples, probs)]


class RegressionTask(SequenceClassificationTask):
    """One real-valued score per text or pair (STS-B: similarity 0-5); mean squared error."""
    name = "regression"
    family = "regression"
    metric = "pearson"

    def parse_label(self, value, where):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: the label {value!r} is not a number (regression needs numeric scores)") from None

    def fit_labels(self, train_examples):
        _require_labels(train_examples)
        self.labels = None

    def check_labels(self, examples, path):
        pass

    def label_target(self, label):
        return float(label)

    no_target = 0.0

    def num_outputs(self):
        return 1

    def loss(self, outputs, batch):
        return F.mse_loss(outputs.float().squeeze(-1), batch["label"].float())

    def evaluate(self, examples, features, outputs):
        pred = self.example_outputs(examples, features, outputs)[:, 0]
        gold = [e.label for e in examples]
        return {"pearson": metrics.pearson(gold, pred), "spearman": metrics.spearman(gold, pred),
                "mse": float(np.mean((np.asarray(gold) - pred) ** 2))}

    def predictions(self, examples, features, outputs):
        pred = self.example_outputs(examples, features, outputs)[:, 0]
        return [{"id": e.guid, "score": round(float(p), 6), **({"gold": e.label} if e.label is not None else {})}
                for e, p in zip(examples, pred)]


def _require_labels(examples):
    missing = next((e for e in examples if e.label is None), None)
    if missing is not None:
        raise ValueError(f"{missing.guid}: a training example without a label (no label column in that table?)")
