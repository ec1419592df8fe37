"""A small training toolkit shared by the model families: schedules, AdamW groups, exact-resume
checkpoints, metrics log and curves, torchrun data parallelism; and the causal-LM loop."""
from .checkpoint import read_checkpoint, rng_states, set_rng_states, write_checkpoint
from .distributed import DistInfo, setup_distributed
from .metrics import MetricsLog, plot_curves
from .optim import make_adamw, param_groups
from .schedules import SCHEDULES, lr_multiplier, make_scheduler

__all__ = ["read_checkpoint", "rng_states", "set_rng_states", "write_checkpoint", "DistInfo", "setup_distributed",
           "MetricsLog", "plot_curves", "make_adamw", "param_groups", "SCHEDULES", "lr_multiplier", "make_scheduler"]
