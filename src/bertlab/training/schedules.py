"""Learning-rate schedules as multipliers of the peak rate, wrapped in torch's LambdaLR so their
state is saved and restored with the optimizer's."""
import math

import torch

from .. import validate

SCHEDULES = ("cosine", "linear", "inverse_sqrt", "constant")


def lr_multiplier(step: int, kind: str, warmup: int, total: int, min_ratio: float = 0.1) -> float:
    """Linear warmup over `warmup` steps to 1, then:
    cosine (GPT-2/3) or linear decay to `min_ratio` at `total`; inverse square root ("Attention Is All
    You Need": sqrt(warmup / step)); or constant."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {SCHEDULES}")
    if step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    if kind == "inverse_sqrt":
        return math.sqrt(max(warmup, 1) / (step + 1))
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if kind == "linear":
        return 1.0 - (1.0 - min_ratio) * progress
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_scheduler(optimizer, kind: str = "cosine", warmup: int = 0, total: int = 1, min_ratio: float = 0.1):
    # validate now, not at the first step
    validate.nonnegative_int("warmup", warmup)
    validate.nonnegative_int("total", total)
    validate.fraction("min_ratio", min_ratio)
    lr_multiplier(0, kind, warmup, total, min_ratio)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_multiplier(step, kind, warmup, total, min_ratio))
