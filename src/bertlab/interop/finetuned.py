"""A fine-tuned model as one folder: HF-format weights and config (with the label map), the
tokenizer, and task.json — everything `bertlab predict` needs, nothing else. task.json is the
task's state (finetune's Task.state(): its name, labels and options); the head is the one
models.task_model gives that name, so this module reads the folder without knowing the tasks.

A new best model replaces the folder while training goes on, so the replacement must never leave
OUT/model missing or half written, even if the process is killed at any point of it:

    1. write the new model into MODEL.tmp       (a kill here: MODEL is untouched, .tmp is discarded)
    2. rename MODEL.tmp -> MODEL.new            (from here on the new model is whole)
    3. rename MODEL -> MODEL.old
    4. rename MODEL.new -> MODEL
    5. delete MODEL.old

A kill between 3 and 4 leaves no MODEL, so a loader reads MODEL.new (or MODEL.old) when MODEL is
missing, and the next save or run finishes the swap first (`finish_swap`).
"""
import json
import os
import shutil

from ..io import atomic_write_text, read_json


def save_finetuned(folder, model, tokenizer, task_state: dict):
    """Write the model, tokenizer and task.json (`task_state`) to `folder`, replacing what is there
    (see above)."""
    replace_folder(folder, lambda tmp: write_finetuned(tmp, model, tokenizer, task_state))


def write_finetuned(folder, model, tokenizer, task_state: dict):
    """The files of save_finetuned written into `folder` itself, each atomically but with no swap of
    the folder: for a folder the caller has claimed (`bertlab convert --task`), whose siblings
    (FOLDER.tmp, .new, .old) are the user's, not ours to remove."""
    from ..models.modernbert_config import ModernBertConfig
    from .hf_bert import save_pretrained
    from .hf_modernbert import save_modernbert
    extra, labels = {}, task_state.get("labels")
    if labels:
        extra["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        extra["label2id"] = {str(label): i for i, label in enumerate(labels)}
    elif getattr(model, "num_labels", None) == 1:
        extra["problem_type"] = "regression"
    save = save_modernbert if isinstance(model.config, ModernBertConfig) else save_pretrained
    save(model, folder, tokenizer, extra_config=extra)
    atomic_write_text(os.path.join(folder, "task.json"), json.dumps(task_state, indent=2) + "\n")


def replace_folder(folder, write):
    """Replace `folder` by what write(path) creates at a temporary path beside it, in the five steps
    of the module docstring."""
    folder = os.fspath(folder)
    finish_swap(folder)
    write(folder + ".tmp")
    os.rename(folder + ".tmp", folder + ".new")  # from here on the new model is whole
    finish_swap(folder)


def finish_swap(folder):
    """Steps 3-5, which also complete a replacement that a kill interrupted: a whole MODEL.new goes
    in (it is the newest model), a partial MODEL.tmp and a replaced MODEL.old go away."""
    folder = os.fspath(folder)
    new, old = folder + ".new", folder + ".old"
    shutil.rmtree(folder + ".tmp", ignore_errors=True)
    if os.path.isdir(new):
        if os.path.isdir(folder):
            shutil.rmtree(old, ignore_errors=True)
            os.rename(folder, old)
        os.rename(new, folder)
    shutil.rmtree(old, ignore_errors=True)


def readable_folder(folder) -> str:
    """The folder to read a model from, without changing anything (a loader must not race a save in
    progress): `folder` itself, or while a swap is under way (or was killed) its whole MODEL.new or
    the MODEL.old it replaces."""
    folder = os.fspath(folder)
    for candidate in (folder, folder + ".new", folder + ".old"):
        if os.path.isdir(candidate):
            return candidate
    return folder


def load_finetuned(folder, device="cpu"):
    """The LoadedModel of a folder written by save_finetuned: kind "finetuned", extra["task_state"]
    the task.json it holds (finetune.tasks.task_from_state makes the Task). A folder that is not one
    (no or a broken task.json, config or weights, weights that do not fit the config) is a
    ValueError or FileNotFoundError naming the file and the problem."""
    from ..models.bert_tasks import task_model
    from .folder import LoadedModel, read_state_dict
    from .hf_bert import load_state_dict_strict
    from .pretrained import load_tokenizer, read_config, resolve
    folder = resolve(readable_folder(folder))
    path = os.path.join(folder, "task.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{folder}: no task.json — not a model fine-tuned by `bertlab finetune`")
    state = read_json(path)
    if not isinstance(state, dict) or not isinstance(state.get("task"), str):
        raise ValueError(f"{path}: no \"task\" name; not a task.json written by `bertlab finetune`")
    config_path = os.path.join(folder, "config.json")
    raw = read_json(config_path) if os.path.exists(config_path) else None
    if isinstance(raw, dict) and raw.get("model_type") == "modernbert":
        return _load_modernbert_finetuned(folder, state, device)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config=config)
    # the head is sized by task.json's labels (weights that do not fit them are refused below), or
    # for a task without labels (regression) by config.json's
    labels = state.get("labels") or read_json(os.path.join(folder, "config.json")).get("id2label") or ()
    model = task_model(state["task"], config, len(labels), init_weights=False)
    load_state_dict_strict(model, read_state_dict(folder), folder)
    return LoadedModel("finetuned", model.eval().to(device), tokenizer, {"task_state": state})


def _load_modernbert_finetuned(folder, state: dict, device):
    """load_finetuned for a ModernBERT folder: the task's ModernBertFor* class, read strictly by
    hf_modernbert (its head sized by config.json's id2label, which save_finetuned wrote from
    task.json's labels)."""
    from ..models.modernbert import modernbert_task_class
    from .folder import LoadedModel
    from .hf_modernbert import load_modernbert
    try:
        model_class = modernbert_task_class(state["task"])
    except ValueError as e:
        raise ValueError(f"{os.path.join(folder, 'task.json')}: {e}") from None
    loaded = load_modernbert(folder, model_class)
    if loaded.tokenizer is None:
        raise FileNotFoundError(f"{folder}: no tokenizer.json (a ModernBERT folder holds its tokenizer there)")
    return LoadedModel("finetuned", loaded.model.to(device), loaded.tokenizer, {"task_state": state, **loaded.extra})
