"""The start of a fine-tuning run: its data splits (checked), its output folder (an earlier run is
not replaced unless asked) and the model to train."""
import os
from dataclasses import replace

from ..progress import write
from ..training.checkpoint import check_resume
from .glue import GLUE, glue_files

# What a run writes into OUT; an OUT holding any of these holds an earlier run.
RUN_FILES = ("model", "model.new", "model.old", "model.tmp", "checkpoint.pt", "checkpoint.shards", "metrics.jsonl", "curves.png",
             "summary.json", "test_predictions.jsonl", "grid", "grid.jsonl")


def read_splits(task, train=None, dev=None, test=None, data_dir=None) -> dict:
    """{"train", "dev", "test_path"} from a GLUE task's ``data_dir`` or the files ``train``, ``dev``
    and ``test``; labels are fixed from the training file and every dev label must be one of them."""
    if data_dir:
        if task.name not in GLUE:
            raise ValueError(f"--data-dir is for the GLUE tasks ({', '.join(GLUE)}); "
                             f"for {task.name} give --train and --dev")
        files = glue_files(task.name, data_dir)
        files["test"] = test  # GLUE's test.tsv has no labels and, for CoLA, other columns
    else:
        files = {"train": train, "dev": dev, "test": test}
    if not files["train"]:
        raise ValueError("no training data: give --train FILE (or --data-dir for a GLUE task)")
    for split, path in files.items():
        if path and not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such {split} file")
    train = task.read(files["train"])
    task.fit_labels(train)
    dev = task.read(files["dev"]) if files["dev"] else []
    if files["test"]:
        task.read(files["test"])  # predicted after training: a bad file is found now, not then
    if dev:
        task.check_labels(dev, files["dev"])
    else:
        write("no dev file: the model of the last step is kept, and there is no dev score")
    labels = f", {len(task.labels)} labels" if task.labels else ""
    write(f"{task.name}: {len(train)} training and {len(dev)} dev examples{labels}")
    return {"train": train, "dev": dev, "test": bool(files["test"]), "test_path": files["test"]}


def load_base_model(task, name, init="pretrained", added_tokens=(), quiet=False, seed=0):
    """A LoadedModel (interop.folder) of the task's model, in train mode, with the checkpoint's encoder (init="pretrained") or
    random weights of the same shape (init="random"); the task head is always new, drawn from
    `seed`. `added_tokens` become never-split special tokens with new embedding rows
    (special_tokens.py). A ModernBERT folder gives the task's ModernBertFor* model (load_modernbert_base).
    extra["report"]: what the checkpoint initialised (None with init="random")."""
    import torch

    from ..interop.folder import LoadedModel, read_state_dict
    from ..interop.hf_bert import init_from_state_dict
    from ..interop.load import folder_kind
    from ..interop.pretrained import load_tokenizer, read_config, resolve
    from .special_tokens import grow_word_embeddings
    folder = resolve(name)
    if folder_kind(folder)[0] == "modernbert":
        return load_modernbert_base(task, folder, init, added_tokens, quiet, seed)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config=config)
    added = tokenizer.add_special_tokens(added_tokens) if added_tokens else 0
    torch.manual_seed(seed)  # the new head's weights: the same for the same --seed (a span head: its own generator)
    model = task.build_model(replace(config, vocab_size=config.vocab_size + added), init_weights=True, head_seed=seed)
    report = None
    if init == "pretrained":
        state = read_state_dict(folder)
        report = init_from_state_dict(model, grow_word_embeddings(state, added) if added else state)
        if not quiet:
            write(f"{folder}: initialized {len(report.initialized)} tensors; new: {', '.join(report.new) or 'none'}")
    if added_tokens and not quiet:
        write(f"special tokens {', '.join(added_tokens)}: {added} new, {config.vocab_size} -> "
              f"{config.vocab_size + added} embedding rows")
    return LoadedModel("bert", model, tokenizer, {"report": report}, folder)


def load_modernbert_base(task, folder, init="pretrained", added_tokens=(), quiet=False, seed=0):
    """load_base_model for a ModernBERT folder: the task's ModernBertFor* model (its encoder, and a
    masked-LM folder's prediction head, from the checkpoint, as HF's from_pretrained takes them)
    and tokenizer.json's tokenizer. A task without a ModernBERT head, or added special tokens,
    is an error naming the folder."""
    import torch

    from ..interop.folder import LoadedModel, read_state_dict
    from ..interop.hf_modernbert import load_modernbert_tokenizer, load_state, read_modernbert_config
    from ..models.modernbert import modernbert_task_class
    try:
        modernbert_task_class(task.name)
    except ValueError as e:
        raise ValueError(f"{folder}: a ModernBERT model, and {e}") from None
    config, _ = read_modernbert_config(folder)
    if added_tokens:
        raise ValueError(f"{folder}: a ModernBERT model; special tokens ({', '.join(added_tokens)}) are not added to "
                         "its tokenizer.json by bertlab yet")
    tokenizer = load_modernbert_tokenizer(folder, config)
    if tokenizer is None:
        raise FileNotFoundError(f"{folder}: no tokenizer.json (a ModernBERT folder holds its tokenizer there)")
    torch.manual_seed(seed)  # the new head's weights: the same for the same --seed
    model = task.build_model(config, init_weights=True)
    report = None
    if init == "pretrained":
        report = load_state(model, read_state_dict(folder), folder)
        if report.mismatched:
            raise ValueError(f"{folder}: does not fit {type(model).__name__}:\n  " + "\n  ".join(report.misfits()))
        if not quiet:
            write(f"{folder}: initialized {len(report.initialized)} tensors; new: {', '.join(report.new) or 'none'}")
    return LoadedModel("modernbert", model, tokenizer, {"report": report}, folder)


def prepare_output(out, resume=False, overwrite=False, command="finetune"):
    """The run folder OUT, made ready: created if need be; one holding an earlier run is resumed
    (resume, from its checkpoint), emptied of that run's files (overwrite: only in a folder bertlab
    made, see io.claim_output_folder), or else refused, so that no model is replaced without being
    asked."""
    check_resume(out, resume, overwrite, outputs=RUN_FILES, command=command, remove=True)
