"""A fine-tuned model as one folder: HF-format weights and config (with the label map), the
tokenizer, and task.json — everything `bertlab predict` needs, nothing else."""
import json
import os
import shutil

from ..interop.hf_bert import load_state_dict_strict, read_state_dict, save_pretrained
from ..interop.pretrained import load_tokenizer, read_config, resolve
from ..io import atomic_write_text


def save_finetuned(folder, model, tokenizer, task):
    """Written into a sibling temporary folder first, then swapped in, so a crash mid-save leaves
    the previous best model whole."""
    folder = os.fspath(folder)
    tmp, old = folder + ".tmp", folder + ".old"
    shutil.rmtree(tmp, ignore_errors=True)
    extra = {}
    if task.labels:
        extra["id2label"] = {str(i): str(label) for i, label in enumerate(task.labels)}
        extra["label2id"] = {str(label): i for i, label in enumerate(task.labels)}
    elif getattr(model, "num_labels", None) == 1:
        extra["problem_type"] = "regression"
    save_pretrained(model, tmp, tokenizer, extra_config=extra)
    atomic_write_text(os.path.join(tmp, "task.json"), json.dumps(task.state(), indent=2) + "\n")
    if os.path.exists(folder):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(folder, old)
    os.rename(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def load_finetuned(folder):
    """(task, model, tokenizer) from a folder written by save_finetuned."""
    from .tasks import make_task
    folder = resolve(folder)
    path = os.path.join(folder, "task.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{folder}: no task.json — not a model fine-tuned by `bertlab finetune`")
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    task = make_task(**state)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config=config)
    model = task.build_model(config, init_weights=False)
    load_state_dict_strict(model, read_state_dict(folder), folder)
    return task, model.eval(), tokenizer
