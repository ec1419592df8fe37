"""Prediction with a fine-tuned model folder: read a file in the layout the model was trained on (or
take examples made from in-memory text), write one JSON object per example, and score the file when
it carries gold answers."""
import json
import os
import sys

from ..interop.load import load_model_of
from ..io import atomic_write_text
from ..progress import write
from .objective import predict_outputs
from .tasks import make_task, task_from_state


def predict_file(model_dir, path, output=None, batch_size=64, progress=True, int8=False,
                 options: dict | None = None) -> dict:
    """Predict every example of `path` into `output` (a JSONL file; None: standard output); returns
    the metrics (empty when the file is unlabelled). int8: with the linear layers in dynamic int8
    (inference.int8, CPU). options: task options that replace the folder's task.json ones for this
    prediction (squad's max_answer_length, n_best_size, max_query_length), checked by the task."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    loaded = load_model_of(model_dir, ("finetuned",), "predict (a model `bertlab finetune` wrote)")
    task, model, tokenizer = task_from_state(loaded, model_dir), loaded.model, loaded.tokenizer
    if options:
        if task.name != "squad":
            raise ValueError(f"{model_dir}: fine-tuned for {task.name}; "
                             f"{', '.join('--' + k.replace('_', '-') for k in options)} are squad's settings")
        task = make_task(**{**task.state(), **options})
    if int8:
        from ..inference.int8 import quantize_int8
        quantize_int8(model)
    examples = task.read(path)
    if task.is_labelled(examples):
        task.check_labels(examples, path)  # before the work: an unknown gold label cannot be scored
    rows, features, outputs = _predict(task, model, tokenizer, examples, batch_size, progress, path)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if output:
        atomic_write_text(output, text)
    else:
        sys.stdout.write(text)
    return task.evaluate(examples, features, outputs) if task.is_labelled(examples) else {}


def predict_examples(task, model, tokenizer, examples, batch_size=64) -> list[dict]:
    """One prediction (the JSON-able dict `bertlab predict` writes) per example, for examples made
    in memory (`examples_from_inputs`), e.g. by `bertlab serve`."""
    return _predict(task, model, tokenizer, examples, batch_size, False, None)[0]


def _predict(task, model, tokenizer, examples, batch_size, progress, path):
    features = task.featurize(examples, tokenizer)
    task.check_positions(features, model.config.max_position_embeddings)
    if path is not None:
        write(f"{path}: {task.describe(examples, features)}")
    outputs = predict_outputs(task, model, features, tokenizer.pad_token_id, batch_size, progress=progress)
    return task.predictions(examples, features, outputs), features, outputs


def examples_from_inputs(task, inputs: list[dict]) -> list:
    """Unlabelled examples of `task` from plain dicts: {"text", optional "text_b"} for a
    classification or regression task (a pair when the model was trained on pairs), {"text"} split
    on whitespace into words for ner, {"question", "context"} for squad. A missing or blank field is
    a ValueError naming the input (from 1)."""
    from .classification import SequenceClassificationTask
    from .examples import InputExample
    from .ner import InputExample as NerExample
    from .ner import TokenClassificationTask
    from .squad import QuestionAnsweringTask, SquadExample
    if isinstance(task, SequenceClassificationTask):
        pair = task.format.text_b is not None
        fields = ("text", "text_b") if pair else ("text",)
        return [InputExample(f"input {n}", *_fields(i, fields, n)) for n, i in enumerate(inputs, 1)]
    if isinstance(task, TokenClassificationTask):
        words = [_fields(i, ("text",), n)[0].split() for n, i in enumerate(inputs, 1)]
        return [NerExample(f"input {n}", w, ["O"] * len(w)) for n, w in enumerate(words, 1)]
    if isinstance(task, QuestionAnsweringTask):
        return [SquadExample(f"input {n}", *_fields(i, ("question", "context"), n), answers=[])
                for n, i in enumerate(inputs, 1)]
    raise ValueError(f"task {task.name!r}: predicting from plain text is not supported (only classification, "
                     "regression, ner and squad)")


def _fields(given: dict, names, n: int) -> list[str]:
    values = [given.get(name) for name in names]
    for name, value in zip(names, values):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"input {n}: {name!r} must be non-blank text"
                             + (" (this model was trained on sentence pairs)" if name == "text_b" else ""))
    return values
