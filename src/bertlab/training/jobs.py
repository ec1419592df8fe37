"""What every family's job does before it trains: claim the run folder (files there, no run in the
way unless resumed or overwritten, a resumed run's inputs unchanged) and make the tokenizer and data
on the main process first under torchrun (lm/job.py, translation/job.py)."""
import os

from ..device import pick_device
from . import run_inputs
from .checkpoint import check_resume
from .distributed import barrier, setup_distributed


def claim_run(out, files, resume: bool, overwrite: bool, data_settings: dict, outputs=(), command: str = "") -> bool:
    """Check before any work: the files exist, OUT holds no run unless asked to resume or
    overwrite it (and then only in a folder bertlab made), and a resumed run's files and data
    settings are those it started with. Returns whether the run resumes (asked, or a worker
    torchrun's agent restarted: training/elastic.py)."""
    for path in files:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
    resume = check_resume(out, resume, overwrite, outputs, command)
    if resume:
        run_inputs.check(out, files, data_settings)
    return resume


def main_process_first(device, prepare, resume: bool):
    """prepare(reuse) on the main process (reuse=resume), then, once it has written its files, on
    the others with reuse=True: under torchrun one process makes the tokenizer and data, and the
    rest read them."""
    info = setup_distributed(pick_device(device))
    if info.is_main:
        made = prepare(resume)
    barrier(info)
    return made if info.is_main else prepare(True)
