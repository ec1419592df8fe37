"""Prediction with a fine-tuned model folder: read a file in the layout the model was trained on,
write one JSON object per example, and score the file when it carries gold answers."""
import json
import os
import sys

from ..io import atomic_write_text
from ..progress import write
from .folder import load_finetuned
from .trainer import predict_outputs


def predict_file(model_dir, path, output=None, batch_size=64, progress=True, int8=False) -> dict:
    """Predict every example of `path` into `output` (a JSONL file; None: standard output); returns
    the metrics (empty when the file is unlabelled). int8: with the linear layers in dynamic int8
    (inference.int8, CPU)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    task, model, tokenizer = load_finetuned(model_dir)
    if int8:
        from ..inference.int8 import quantize_int8
        quantize_int8(model)
    examples = task.read(path)
    features = task.featurize(examples, tokenizer)
    task.check_positions(features, model.config.max_position_embeddings)
    write(f"{path}: {task.describe(examples, features)}")
    if task.is_labelled(examples):
        task.check_labels(examples, path)  # before the work: an unknown gold label cannot be scored
    outputs = predict_outputs(task, model, features, tokenizer.pad_token_id, batch_size, progress=progress)
    rows = task.predictions(examples, features, outputs)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if output:
        atomic_write_text(output, text)
    else:
        sys.stdout.write(text)
    return task.evaluate(examples, features, outputs) if task.is_labelled(examples) else {}
