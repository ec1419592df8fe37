"""`bertlab finetune` as one function a notebook can call: the splits read and checked, the base
model loaded, the run folder claimed, one run (or the notes' grid) trained, the test file predicted
with the kept model, and OUT/summary.json written."""
import json
import os

from ..io import atomic_write_text
from .grid import run_grid
from .objective import FinetuneSettings, finetune
from .predict import predict_file
from .setup import load_base_model, prepare_output, read_splits


def finetune_job(task, base_model, s: FinetuneSettings, *, train=None, dev=None, test=None, data_dir=None,
                 init="pretrained", added_tokens=(), grid=False, overwrite=False) -> dict:
    """Fine-tune `base_model` (a BERT folder or 'minilm'; init="random": its shape from random weights)
    on the task's `train` file, or a GLUE task's `data_dir`, into the run folder s.out: the best dev
    model in OUT/model (the last step's without `dev`), its curves, and with `test` its predictions
    (OUT/test_predictions.jsonl) and scores. An earlier run in s.out is replaced only with
    `overwrite`, continued only with s.resume. Returns the summary (also OUT/summary.json)."""
    if s.out is None:
        raise ValueError("settings.out: give the run folder")
    if grid and s.resume:
        raise ValueError("--resume continues one run; a --grid is started again with --overwrite")
    if not (dev or data_dir):
        for name, wanted in (("grid", grid), ("patience", s.patience is not None)):
            if wanted:
                raise ValueError(f"--{name} compares dev scores: give --dev (or --data-dir for a GLUE task)")
    splits = read_splits(task, train, dev, test, data_dir)
    # a task's own special tokens (relation's entity markers) join those asked for
    added_tokens = (*added_tokens, *(t for t in getattr(task, "special_tokens", ()) if t not in added_tokens))
    base = lambda: load_base_model(task, base_model, init, added_tokens, quiet=not s.progress, seed=s.seed)  # noqa: E731
    loaded = base()  # a broken model folder is found before OUT is touched
    model, tokenizer = loaded.model, loaded.tokenizer
    prepare_output(s.out, s.resume, overwrite)
    if grid:
        del model  # every run of the grid starts from a fresh copy
        summary = run_grid(task, base, splits, s.out, s)
    else:
        summary = finetune(task, model, tokenizer, splits["train"], splits["dev"], s.out, s)
    if splits["test"] and not summary["stopped_by_time"]:
        summary["test"] = predict_file(os.path.join(s.out, "model"), splits["test_path"],
                                       os.path.join(s.out, "test_predictions.jsonl"), progress=s.progress)
    atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2, default=str) + "\n")
    return summary
