"""The one fine-tuning pipeline, as run_classifier.py / run_squad.py lay it out:

    examples (read from files) -> features (token ids + targets) -> model -> outputs -> metrics

A `Task` supplies each arrow for one kind of problem; `trainer.py` and `bertlab predict` run any task
the same way. A feature is a plain dict: `input_ids` and `token_type_ids` (lists of ints) plus the
task's targets; `collate` pads a list of them into tensors.
"""
from abc import ABC, abstractmethod
from collections import Counter

import numpy as np
import torch

from ..validate import positive_int


class Task(ABC):
    """One kind of fine-tuning problem. Subclasses set `name`, `metric` (the dev score to maximise)
    and `padded_fields` ({feature key: pad value} for per-token targets, e.g. {"label_ids": -100})."""

    name: str = ""
    metric: str = ""
    padded_fields: dict = {}
    min_seq_length = 3  # [CLS], one word piece, [SEP]

    def __init__(self, labels: list[str] | None = None, max_seq_length: int = 128, **options):
        positive_int("max_seq_length", max_seq_length)
        if max_seq_length < self.min_seq_length:
            raise ValueError(f"max_seq_length {max_seq_length}: too small for {self.name}, which needs at least "
                             f"{self.min_seq_length} (the special tokens and one word piece)")
        stride = positive_int("doc_stride", options.get("doc_stride"), optional=True)
        if stride is not None and stride >= max_seq_length:
            raise ValueError(f"doc_stride {stride}: must be less than max_seq_length {max_seq_length}")
        self.labels = labels
        self.max_seq_length = max_seq_length
        self.options = options

    # --- examples -------------------------------------------------------------------------------
    @abstractmethod
    def read(self, path) -> list:
        """The examples of one file; bad input raises ValueError naming the file, line and problem."""

    def fit_labels(self, train_examples: list) -> None:
        """Fix the label list from the training examples (classification and tagging tasks)."""

    def is_labelled(self, examples: list) -> bool:
        """Whether the examples carry gold answers (then `predict` also scores them)."""
        return all(getattr(e, "label", None) is not None for e in examples)

    def check_labels(self, examples: list, path) -> None:
        """Dev/test examples whose labels were never seen in training: a ValueError naming them."""

    # --- features, model, loss --------------------------------------------------------------------
    @abstractmethod
    def featurize(self, examples: list, tokenizer) -> list[dict]:
        """Token ids and targets; every feature carries `example_index` (several features may come
        from one example: the sliding windows of long inputs)."""

    def build_model(self, config, init_weights: bool = True, head_seed: int | None = None) -> torch.nn.Module:
        """The BertFor* model for this task (models.task_model: the head by task name, sized by
        num_outputs; `head_seed` seeds a span head's draw)."""
        from ..models.bert_tasks import task_model
        return task_model(self.name, config, self.num_outputs(), init_weights, head_seed)

    def num_outputs(self) -> int:
        """The rows of a labelled head: one per label (regression: 1; QA and multiple choice: unused)."""
        return len(self.labels or ())

    @abstractmethod
    def loss(self, outputs, batch: dict) -> torch.Tensor:
        """Mean loss of a batch from the model's outputs and the collated targets."""

    def training_loss(self, model, batch: dict) -> torch.Tensor:
        """The loss a training step minimises: `loss` of `forward`'s outputs, unless the task computes
        less for the same value (token classification: the labelled pieces alone)."""
        return self.loss(self.forward(model, batch), batch)

    # --- outputs -> answers ---------------------------------------------------------------------
    @abstractmethod
    def evaluate(self, examples: list, features: list[dict], outputs: list) -> dict[str, float]:
        """Metrics from per-feature outputs (numpy arrays, padding removed); includes self.metric."""

    @abstractmethod
    def predictions(self, examples: list, features: list[dict], outputs: list) -> list[dict]:
        """One JSON-able prediction per example, for `bertlab predict`."""

    def describe(self, examples: list, features: list[dict]) -> str:
        """How much the model reads for these examples: the windows of long inputs, or how many
        inputs were cut to max_seq_length (a long-text set can hold several windows per example)."""
        line = f"{len(examples):,} examples"
        if len(features) != len(examples):
            long = sum(n > 1 for n in Counter(f["example_index"] for f in features).values())
            line += f" in {len(features):,} windows of up to {self.max_seq_length} tokens ({long:,} examples longer than one)"
        truncated = sum(bool(f.get("truncated")) for f in features)
        if truncated:
            line += f", {truncated:,} truncated to {self.max_seq_length} tokens"
        return line

    def check_positions(self, features: list[dict], positions: int):
        """Refuse inputs longer than the model has positions for (max_seq_length above the model's
        max_position_embeddings), which would otherwise fail as an index error inside the embedding."""
        sequences = (ids for f in features for ids in (f["input_ids"] if isinstance(f["input_ids"][0], list)
                                                       else [f["input_ids"]]))
        longest = max(map(len, sequences), default=0)
        if longest > positions:
            raise ValueError(f"max_seq_length {self.max_seq_length} is more than the model's {positions} positions, "
                             f"and an input has {longest} tokens: fine-tune with --max-seq-length {positions} or less")

    def state(self) -> dict:
        """What `predict` needs to rebuild this task from a model folder (task.json)."""
        return {"task": self.name, "labels": self.labels, "max_seq_length": self.max_seq_length, **self.options}

    # --- shared machinery --------------------------------------------------------------------------
    def collate(self, features: list[dict], pad_id: int = 0) -> dict:
        """Pad to the longest feature of the batch (dynamic padding) and stack into tensors."""
        length = max(len(f["input_ids"]) for f in features)
        batch = {"input_ids": _pad(features, "input_ids", length, pad_id),
                 "token_type_ids": _pad(features, "token_type_ids", length, 0),
                 "attention_mask": torch.tensor([[1] * len(f["input_ids"]) + [0] * (length - len(f["input_ids"]))
                                                 for f in features])}
        for key, pad in self.padded_fields.items():
            batch[key] = _pad(features, key, length, pad)
        for key in self.target_fields():
            batch[key] = torch.tensor(np.array([f[key] for f in features]))
        return batch

    per_token_outputs: bool = False  # tagging and span tasks: outputs are (batch, len, ...)

    def feature_length(self, feature: dict) -> int:
        """Positions the model computes for a feature (for length-grouped and length-sorted batches)."""
        return len(feature["input_ids"])

    def target_fields(self) -> list[str]:
        """Per-feature scalar targets collated as tensors (e.g. ["label"])."""
        return []

    def forward(self, model, batch: dict):
        return model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])

    def unbatch(self, outputs, batch: dict) -> list:
        """Per-feature numpy outputs with padding cut off; sentence-level logits stay whole."""
        if isinstance(outputs, tuple):
            parts = [self.unbatch(o, batch) for o in outputs]
            return [tuple(p[i] for p in parts) for i in range(len(parts[0]))]
        outputs = outputs.float().cpu().numpy()
        if self.per_token_outputs:
            lengths = batch["attention_mask"].sum(1).tolist()
            return [o[:n] for o, n in zip(outputs, lengths)]
        return list(outputs)


def _pad(features, key, length, value):
    return torch.tensor([f[key] + [value] * (length - len(f[key])) for f in features])
