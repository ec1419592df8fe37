"""The nine GLUE tasks in their official file layouts, as run_classifier.py's processors read them.

`--task mrpc --data-dir glue_data/MRPC` finds train.tsv / dev.tsv / test.tsv there. GLUE's TSVs
contain stray quote characters, so they are split on tabs only (no quoting), as google's reader does.
Test files have no labels and (for CoLA) other columns than train/dev, so they are not read here.
"""
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class GlueLayout:
    text_a: str | int
    text_b: str | int | None
    label: str | int | None
    labels: list | None  # None: regression
    metric: str
    header: bool = True
    dev_file: str = "dev.tsv"


GLUE = {
    "cola": GlueLayout(3, None, 1, ["0", "1"], "mcc", header=False),
    "sst-2": GlueLayout("sentence", None, "label", ["0", "1"], "accuracy"),
    "mrpc": GlueLayout("#1 String", "#2 String", "Quality", ["0", "1"], "f1"),
    "sts-b": GlueLayout("sentence1", "sentence2", "score", None, "pearson"),
    "qqp": GlueLayout("question1", "question2", "is_duplicate", ["0", "1"], "f1"),
    "mnli": GlueLayout("sentence1", "sentence2", "gold_label", ["contradiction", "entailment", "neutral"],
                       "accuracy", dev_file="dev_matched.tsv"),
    "qnli": GlueLayout("question", "sentence", "label", ["entailment", "not_entailment"], "accuracy"),
    "rte": GlueLayout("sentence1", "sentence2", "label", ["entailment", "not_entailment"], "accuracy"),
    "wnli": GlueLayout("sentence1", "sentence2", "label", ["0", "1"], "accuracy"),
}
ALIASES = {"sst2": "sst-2", "stsb": "sts-b"}


def glue_task(name: str, max_seq_length: int = 128, **options):
    """A SequenceClassificationTask (RegressionTask for STS-B) reading the task's official layout."""
    from .classification import RegressionTask, SequenceClassificationTask  # imports torch: only here
    layout = GLUE[ALIASES.get(name, name)]
    task_class = RegressionTask if layout.labels is None else SequenceClassificationTask
    task = task_class(layout.labels, max_seq_length, text_a=layout.text_a, text_b=layout.text_b, label=layout.label,
                      header=layout.header, kind="tsv", quoting=False, metric=layout.metric, **options)
    task.name = ALIASES.get(name, name)
    return task


def glue_files(name: str, data_dir) -> dict:
    layout = GLUE[ALIASES.get(name, name)]
    files = {"train": "train.tsv", "dev": layout.dev_file, "test": "test.tsv"}
    return {split: os.path.join(data_dir, f) for split, f in files.items()}
