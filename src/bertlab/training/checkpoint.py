"""Training checkpoints that resume exactly: model, optimizer, scheduler, every random number
generator and the data position, written atomically so a crash never leaves half a file.

A checkpoint holds only tensors and plain Python data (numbers, strings, lists, tuples, dicts) and
is read with torch.load(weights_only=True): a run folder is something people share, and
unpickling anything else could run code hidden in the file."""
import os
import random
import sys

import numpy as np
import torch

from ..io import (atomic_write, check_output_folder_path, claim_output_folder, output_entries, read_torch_file,
                  remove_stale_temp_files)
from .distributed import is_main_process


def rng_states() -> dict:
    _, keys, position, has_gauss, cached_gaussian = np.random.get_state()  # ("MT19937", uint32 array, ...)
    # int64, not uint32: torch's uint32 tensors do not survive all_gather_object (DDP's gather)
    numpy_state = {"keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position), "has_gauss": int(has_gauss),
                   "cached_gaussian": float(cached_gaussian)}
    states = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict):
    random.setstate(states["python"])
    n = states["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["position"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def write_checkpoint(path, state: dict):
    """Write `state` (the keys read_checkpoint requires) atomically: a kill mid-write leaves the
    previous checkpoint whole."""
    atomic_write(path, lambda f: torch.save(state, f), mode="wb")


def read_checkpoint(path) -> dict:
    """The checkpoint's dict, read without running code: weights_only=True refuses any pickled
    object other than tensors and plain data, so a crafted file's payload never executes."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    state = read_torch_file(path)  # sizes checked before anything is inflated; no code runs
    missing = [k for k in ("model", "optimizer", "scheduler", "step", "rng", "data", "extra")
               if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{path}: not a bertlab training checkpoint (no {', '.join(missing)})")
    return state


# What every training run (engine.fit) writes into OUT; a command adds its own (check_resume's `outputs`).
RUN_OUTPUTS = ("checkpoint.pt", "model", "summary.json", "metrics.jsonl", "curves.png")


def check_resume(out, resume: bool, overwrite: bool, outputs=(), command: str = "", remove: bool = False):
    """The CLI rule for a run folder: --resume needs OUT/checkpoint.pt; a folder that has one is
    neither started over silently nor resumed without being asked (--resume or --overwrite); a
    folder holding a finished run (anything a run writes: RUN_OUTPUTS and the command's `outputs`,
    not only a checkpoint, which a finished run deletes) is replaced only with --overwrite, and only
    in a folder bertlab made (io.claim_output_folder, which also refuses a link and marks a new
    folder). `remove`: delete the earlier run's files now (else the new run replaces them as it
    writes). Removes the temporary files of an interrupted write (bertlab's own, of ended processes)."""
    check_output_folder_path(out)
    has_checkpoint = os.path.exists(os.path.join(out, "checkpoint.pt"))
    if resume and not has_checkpoint:
        raise FileNotFoundError(f"{out}: no checkpoint.pt to --resume from")
    if has_checkpoint and not (resume or overwrite):
        raise ValueError(f"{out} holds a training checkpoint: pass --resume to continue it or "
                         "--overwrite to start again (replacing it)")
    if not resume:
        names = tuple(dict.fromkeys(RUN_OUTPUTS + tuple(outputs)))
        found = output_entries(out, names)
        claim_output_folder(out, names, overwrite, what=f"an earlier run ({', '.join(found)})",
                            command=command, remove=remove)
    if not is_main_process():
        return
    freed = remove_stale_temp_files(out)
    if freed:
        print(f"{out}: removed temporary files ({freed / 1e6:,.1f} MB) left by an interrupted write", file=sys.stderr)
