"""Causal language-model training: random blocks of a token stream, AdamW with warmup + cosine,
gradient accumulation, mixed precision, torchrun data parallelism, a time budget and exact resume.
"""
import contextlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass

import torch

from .. import progress, validate
from ..data.token_stream import TokenStream, eval_blocks
from ..device import autocast_dtype, pick_device
from ..models.gpt import GPT, GPTConfig
from .checkpoint import restore_run, rng_states, save_checkpoint, set_rng_states
from .distributed import (DistInfo, all_agree, barrier, cleanup, gather_objects, mean_across, rank_device,
                          setup_distributed)
from .metrics import MetricsLog, plot_curves
from .optim import make_adamw
from .schedules import SCHEDULES, make_scheduler


@dataclass
class TrainSettings:
    data: str                 # folder with train.bin, val.bin, meta.json (data.token_stream)
    out: str                  # checkpoint.pt, metrics.jsonl, curves.png, summary.json
    model: GPTConfig
    batch_size: int = 16      # sequences per micro-batch, per process
    block_size: int = 256
    grad_accum: int = 1
    lr: float = 6e-4
    min_lr_ratio: float = 0.1
    warmup: int = 100
    schedule: str = "cosine"
    schedule_steps: int | None = None  # length of the decay; default max_steps
    max_steps: int = 1000
    max_minutes: float | None = None
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 200
    eval_tokens: int = 100_000
    save_interval: int = 200
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    resume: bool = False
    progress: bool = True

    def __post_init__(self):
        validate.check_fields(self, {
            "batch_size": validate.positive_int, "block_size": validate.positive_int,
            "grad_accum": validate.positive_int, "lr": validate.positive_float, "min_lr_ratio": validate.fraction,
            "warmup": validate.nonnegative_int, "max_steps": validate.positive_int,
            "weight_decay": validate.nonnegative_float, "grad_clip": validate.nonnegative_float,
            "eval_interval": validate.positive_int, "eval_tokens": validate.positive_int,
            "save_interval": validate.positive_int, "seed": validate.nonnegative_int})
        validate.positive_int("schedule_steps", self.schedule_steps, optional=True)
        validate.nonnegative_float("max_minutes", self.max_minutes, optional=True)  # 0: stop after one step
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {SCHEDULES}")
        if self.block_size > self.model.n_positions:
            raise ValueError(f"block_size {self.block_size}: more than the model's {self.model.n_positions} positions")


def autocast_context(device, dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def train_step(model, optimizer, scheduler, next_batch, grad_accum=1, grad_clip=1.0, autocast=None,
               scaler=None, loss_of=lambda model, batch: model(*batch)[1]) -> float:
    """One optimizer step over `grad_accum` micro-batches; returns their mean loss.
    `loss_of(model, batch)` is the batch's mean loss (default: a GPT called as model(x, y)).

    Each micro-batch's loss is divided by grad_accum, so the summed gradients equal those of one
    batch grad_accum times as large. Under DDP, gradients are all-reduced only on the last
    micro-batch (no_sync before it): one communication per step instead of one per micro-batch.
    """
    validate.positive_int("grad_accum", grad_accum)
    validate.nonnegative_float("grad_clip", grad_clip)  # a negative norm would flip the gradients
    total = 0.0
    for micro in range(grad_accum):
        batch = next_batch()
        sync = micro == grad_accum - 1 or not hasattr(model, "no_sync")
        with (contextlib.nullcontext() if sync else model.no_sync()), (autocast or contextlib.nullcontext()):
            loss = loss_of(model, batch) / grad_accum
        (scaler.scale(loss) if scaler else loss).backward()
        total += loss.item()
    if scaler:
        scaler.unscale_(optimizer)
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return total


@torch.no_grad()
def evaluate(model, x, y, batch_size, autocast=None, info: DistInfo = DistInfo()) -> float:
    """Mean next-token loss over held-out blocks (each rank takes every world_size-th block)."""
    was_training = model.training
    model.eval()
    x, y = x[info.rank::info.world_size], y[info.rank::info.world_size]
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for i in range(0, len(x), batch_size):
        with autocast or contextlib.nullcontext():
            _, loss = model(x[i:i + batch_size].to(device), y[i:i + batch_size].to(device))
        n = y[i:i + batch_size].numel()
        total, count = total + loss.item() * n, count + n
    model.train(was_training)
    return mean_across(total / max(count, 1), info)


class _Run:
    """The state of one training run, so the loop below reads as the algorithm."""

    def __init__(self, s: TrainSettings):
        self.s = s
        device = pick_device(s.device)
        self.info = setup_distributed(device)
        self.device = rank_device(device, self.info)
        self.dtype = autocast_dtype(s.precision, self.device)
        torch.manual_seed(s.seed)  # the same initial weights on every rank
        self.model = GPT(s.model).to(self.device)
        self.optimizer = make_adamw(self.model, s.lr, s.weight_decay)
        self.scheduler = make_scheduler(self.optimizer, s.schedule, s.warmup, s.schedule_steps or s.max_steps,
                                        s.min_lr_ratio)
        self.stream = TokenStream(os.path.join(s.data, "train.bin"), s.block_size, s.seed, self.info.rank,
                                  self.info.world_size)
        self.val = eval_blocks(os.path.join(s.data, "val.bin"), s.block_size, s.eval_tokens)
        self.log = MetricsLog(os.path.join(s.out, "metrics.jsonl"), self.info.is_main)
        self.ckpt = os.path.join(s.out, "checkpoint.pt")
        self.step, self.last_eval_step = 0, -1
        torch.manual_seed(s.seed + 1 + self.info.rank)  # dropout differs per rank
        if s.resume and os.path.exists(self.ckpt):
            self._restore()
        else:
            self.log.truncate_after(-1)  # a fresh run in a used folder starts a fresh log
        self.net = self.model
        if self.info.enabled:
            from torch.nn.parallel import DistributedDataParallel
            self.net = DistributedDataParallel(self.model, device_ids=[self.device] if self.device.type == "cuda" else None)
        self.scaler = torch.amp.GradScaler() if self.dtype is torch.float16 else None

    def _restore(self):
        state = restore_run(self.ckpt, self.s.model, model=self.model, optimizer=self.optimizer,
                            scheduler=self.scheduler, restore_rng=False)
        ranks = state["data"]
        if len(ranks) != self.info.world_size:
            raise ValueError(f"{self.ckpt}: saved by {len(ranks)} processes, resumed with {self.info.world_size}")
        self.stream.load_state_dict(ranks[self.info.rank]["stream"])
        set_rng_states(ranks[self.info.rank]["rng"])
        self.step = state["step"]
        self.log.truncate_after(self.step)

    def save(self):
        ranks = gather_objects({"stream": self.stream.state_dict(), "rng": rng_states()}, self.info)
        if self.info.is_main:
            save_checkpoint(self.ckpt, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
                            step=self.step, data_state=ranks,
                            extra={"model": self.s.model.to_dict(hf=False), "settings": _settings_dict(self.s)})
        barrier(self.info)

    def next_batch(self):
        x, y = self.stream.batch(self.s.batch_size)
        return x.to(self.device), y.to(self.device)

    def evaluate(self) -> float:
        loss = evaluate(self.model, *self.val, self.s.batch_size, autocast_context(self.device, self.dtype), self.info)
        self.log.write(self.step, "eval", loss=loss, perplexity=math.exp(loss))
        self.last_eval, self.last_eval_step = loss, self.step
        return loss


def _settings_dict(s: TrainSettings) -> dict:
    d = asdict(s)
    d["model"] = s.model.to_dict(hf=False)
    return d


def train_gpt(s: TrainSettings) -> dict:
    """Train (or resume) to max_steps or max_minutes; returns a summary (also out/summary.json)."""
    run = _Run(s)
    info, start, first_step = run.info, time.time(), run.step
    tokens_per_step = s.batch_size * s.block_size * s.grad_accum * info.world_size
    bar = progress.progress_bar(total=s.max_steps, initial=run.step, unit="step", desc="gpt-train",
                                enabled=info.is_main and s.progress)
    autocast, loss, stopped_early = autocast_context(run.device, run.dtype), float("nan"), False
    run.net.train()
    while run.step < s.max_steps:
        lr = run.optimizer.param_groups[0]["lr"]
        loss = mean_across(train_step(run.net, run.optimizer, run.scheduler, run.next_batch, s.grad_accum,
                                      s.grad_clip, autocast, run.scaler), info)
        run.step += 1
        elapsed = time.time() - start
        speed = (run.step - first_step) * tokens_per_step / elapsed
        run.log.write(run.step, "train", loss=loss, lr=lr, tokens_per_s=speed)
        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{speed:,.0f}", refresh=False)
        bar.update(1)
        if run.step % s.eval_interval == 0:
            held_out = run.evaluate()
            if info.is_main:
                progress.write(f"step {run.step}: held-out loss {held_out:.4f}")
        if run.step % s.save_interval == 0:
            run.save()
        if s.max_minutes is not None and all_agree(elapsed > s.max_minutes * 60, info):
            stopped_early = run.step < s.max_steps
            break
    bar.close()
    run.save()
    val_loss = run.last_eval if run.last_eval_step == run.step else run.evaluate()
    summary = {"steps": run.step, "stopped_by_time": stopped_early, "seconds": round(time.time() - start, 1),
               "tokens_per_step": tokens_per_step, "train_tokens_seen": run.step * tokens_per_step,
               "tokens_per_s": round((run.step - first_step) * tokens_per_step / max(time.time() - start, 1e-9), 1),
               "last_train_loss": None if math.isnan(loss) else loss, "val_loss": val_loss, "val_perplexity": math.exp(val_loss),
               "parameters": run.model.num_parameters(), "world_size": info.world_size}
    if info.is_main:
        from ..io import atomic_write_text
        atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2) + "\n")
        plot_curves(run.log.read(), os.path.join(s.out, "curves.png"), title=f"GPT {s.model.n_layer}L/{s.model.n_embd}")
    model = run.model
    cleanup(info)
    return {**summary, "model": model}
