"""The notes' hyper-parameter sweep: batch {16, 32} x learning rate {5e-5, 3e-5, 2e-5} x epochs
{2, 3, 4}, each run from the same checkpoint, the best dev score kept."""
import itertools
import json
import os
import shutil
from dataclasses import replace

from ..interop.finetuned import replace_folder
from ..io import atomic_write_text
from ..progress import write
from .objective import finetune

GRID = {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}


def run_grid(task, load_base, splits, out_dir, settings, grid=GRID) -> dict:
    """Every combination trained into out_dir/grid/NAME; the winner's model copied to out_dir/model.
    Results go to out_dir/grid.jsonl as they finish. The winner is chosen by dev score, so a dev set
    is required."""
    if not splits["dev"]:
        raise ValueError("--grid picks the best run by its dev score: give --dev (or --data-dir)")
    results, best = [], None
    combos = list(itertools.product(*grid.values()))
    for i, values in enumerate(combos, 1):
        run = replace(settings, **dict(zip(grid, values)))
        name = f"bs{run.batch_size}-lr{run.lr:g}-ep{run.epochs:g}"
        folder = os.path.join(out_dir, "grid", name)
        write(f"grid {i}/{len(combos)}: {name}")
        base = load_base()
        model, tokenizer = base.model, base.tokenizer
        summary = finetune(task, model, tokenizer, splits["train"], splits["dev"], folder, replace(run, out=folder))
        results.append({"run": name, "best_score": summary["best_score"], "dev": summary["dev"]})
        atomic_write_text(os.path.join(out_dir, "grid.jsonl"), "".join(json.dumps(r) + "\n" for r in results))
        if best is None or summary["best_score"] > best[1]["best_score"]:
            best = (name, summary)
    name, summary = best
    replace_folder(os.path.join(out_dir, "model"),
                   lambda tmp: shutil.copytree(os.path.join(out_dir, "grid", name, "model"), tmp))
    write(f"grid: best {task.metric} {summary['best_score']:.4f} with {name}")
    return {**summary, "grid_best": name, "grid": results}
