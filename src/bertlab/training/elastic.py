"""Restarts by torchrun's elastic agent: a restarted worker continues its run without being asked.

Under `torchrun --max-restarts N`, when one worker dies (a kill -9, an out-of-memory kill, a node
lost under `--nnodes MIN:MAX`) the agent stops the others and starts the whole group again with the
command line it was given, which has no --resume. Every worker's environment says which attempt it
is (TORCHELASTIC_RESTART_COUNT) and which launch (TORCHELASTIC_RUN_ID: a fresh id under
--standalone, the --rdzv-id given otherwise). So the first attempt, once it has claimed the run
folder, writes the launch's id into OUT/.elastic-run; a later attempt of the same launch that finds
its own id there continues from OUT/checkpoint.pt (the last complete one: checkpoints are written
atomically), or starts again in its own folder when none was written yet. Nothing else may be
resumed or replaced this way: a folder claimed by another launch, or any folder when the launch has
no id of its own ("none", torchrun's default without --standalone or --rdzv-id), is refused as a
first attempt would refuse it, with the reason.

One setting of PyTorch's own is needed for a restart to happen at all: torchrun's agent shares its
rendezvous store with the workers by default, and a restarted group then reads the addresses the
group before it left there and fails to connect (pytorch/pytorch#135712, still so in torch 2.13).
`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` in torchrun's environment gives every attempt a store of its
own; check_launch refuses a launch that asks for restarts without it, at its start rather than at
the first failure, hours in.
"""
import os

from ..io import atomic_write_text

MARKER = ".elastic-run"


def restart_count() -> int:
    """Which attempt this process is under torchrun's agent: 0 for the first (and outside torchrun)."""
    try:
        return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError:
        return 0


def run_id() -> str | None:
    """The launch's id under torchrun's agent, None outside it."""
    return os.environ.get("TORCHELASTIC_RUN_ID")


def check_launch():
    """Refuse `torchrun --max-restarts N` (N > 0) whose agent shares its store with the workers: its
    restarts would fail (the module's docstring)."""
    try:
        restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    except ValueError:
        restarts = 0
    if restarts > 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise ValueError(f"torchrun --max-restarts {restarts}: set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in "
                         "torchrun's environment (e.g. `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun ...`). With "
                         "PyTorch's default the agent shares its rendezvous store with the workers, and a "
                         "restarted group reads the addresses of the group it replaces and cannot connect "
                         "(pytorch/pytorch#135712), so the restarts this launch asks for would fail")


def claimed_by_this_launch(out) -> bool:
    """True in a restarted worker (attempt 1 or later) whose launch's first attempt claimed OUT."""
    if restart_count() == 0 or not run_id():
        return False
    if run_id() == "none":
        raise ValueError(f"{out}: restarted by torchrun's agent (attempt {restart_count()}), but the launch has no id "
                         "of its own (rendezvous id 'none'), so this folder's run cannot be told apart from "
                         "another's: launch with --standalone or --rdzv-id ID to resume automatically, or "
                         "restart by hand with --resume")
    try:
        with open(os.path.join(out, MARKER), encoding="utf-8") as f:
            return f.read().strip() == run_id()
    except OSError:
        return False


def mark_claimed(out, is_main: bool):
    """After the first attempt has claimed OUT: record the launch's id there (the main process)."""
    if is_main and restart_count() == 0 and run_id() and run_id() != "none":
        atomic_write_text(os.path.join(out, MARKER), run_id() + "\n")
