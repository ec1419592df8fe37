"""The settings every training run shares, named once (the CLI's flags of the same names map onto
them one to one). An objective's settings add its own fields and checks to these."""
import os
from dataclasses import dataclass, fields

from .. import validate
from ..device import PRECISIONS
from ..models.config import JsonConfig
from . import elastic

SHARDING = ("ddp", "fsdp")
CHECKPOINT_FORMATS = ("file", "sharded")


@dataclass(kw_only=True)
class RunSettings:
    out: str                          # the run folder: checkpoint.pt, metrics.jsonl, curves.png, summary.json
    batch_size: int = 32              # examples (sequences, instances) per micro-batch, per process
    grad_accum: int = 1               # micro-batches per optimizer step
    lr: float = 1e-4                  # the peak learning rate
    weight_decay: float = 0.01
    warmup: int = 0                   # steps of linear warmup
    grad_clip: float = 1.0            # global gradient-norm clip; 0: none
    max_steps: int | None = 1000      # optimizer steps; the schedule ends here
    max_minutes: float | None = None  # stop (with a resumable checkpoint) after this much time; 0: one step
    eval_every: int | None = 500      # steps between evaluations
    save_every: int | None = None     # steps between checkpoints; None: at each evaluation
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"           # fp32, or bf16 / fp16 autocast; auto: bf16 on a CUDA device with it, else fp32
    sharding: str = "ddp"             # under torchrun: ddp replicates the model, fsdp shards it
    checkpoint_format: str = "file"   # file: one checkpoint.pt; sharded: each process writes its part with
                                      # torch.distributed.checkpoint (training/sharded_checkpoint.py)
    compile: bool = False             # torch.compile the module the training step calls
    resume: bool = False              # continue from out/checkpoint.pt exactly (set by itself in a worker
                                      # torchrun's agent restarted: training/elastic.py)
    progress: bool = True

    def checks(self) -> dict:
        """{field: check} for this settings class's own fields; subclasses extend it."""
        v = validate
        return {"batch_size": v.positive_int, "grad_accum": v.positive_int, "lr": v.nonnegative_float,
                "weight_decay": v.nonnegative_float, "warmup": v.nonnegative_int, "grad_clip": v.nonnegative_float,
                "max_steps": optional(v.positive_int), "max_minutes": optional(v.nonnegative_float),
                "eval_every": optional(v.positive_int), "save_every": optional(v.positive_int),
                "seed": v.nonnegative_int}

    def __post_init__(self):
        validate.check_fields(self, self.checks())
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: choose one of {PRECISIONS}")
        if self.sharding not in SHARDING:
            raise ValueError(f"sharding {self.sharding!r}: choose one of {SHARDING}")
        if self.checkpoint_format not in CHECKPOINT_FORMATS:
            raise ValueError(f"checkpoint_format {self.checkpoint_format!r}: choose one of {CHECKPOINT_FORMATS}")
        if not self.resume and self.out and os.path.exists(os.path.join(self.out, "checkpoint.pt")) \
                and elastic.claimed_by_this_launch(self.out):
            self.resume = True

    def to_dict(self) -> dict:
        """Plain data (model configs as their dicts), as checkpoints and summaries record it."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict(hf=False) if isinstance(value, JsonConfig) else value
        return out


def optional(check):
    """The check, letting None (the default: 'not set') through."""
    return lambda name, value: check(name, value, optional=True)
