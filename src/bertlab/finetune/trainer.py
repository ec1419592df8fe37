"""Fine-tuning, the same loop for every task: AdamW with BERT's settings, warmup then linear decay,
shuffled batches with dynamic padding, gradient accumulation and clipping, mixed precision where the
device has it, evaluation on the dev set, early stopping, the best model kept as a folder that
`bertlab predict` needs alone, and a checkpoint at each evaluation that `resume` continues exactly.
"""
import hashlib
import math
import os
import time
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import torch

from ..device import autocast_dtype, pick_device
from ..inference.embed import length_sorted_batches
from ..progress import progress_bar, write
from ..training.checkpoint import restore_run, save_checkpoint
from ..training.engine import autocast_context, train_step
from ..training.metrics import MetricsLog
from ..training.optim import make_adamw
from ..training.schedules import make_scheduler
from ..validate import check_fields, fraction, nonnegative_float, nonnegative_int, positive_float, positive_int
from .folder import finish_swap, save_finetuned


@dataclass
class FinetuneSettings:
    # google-research/bert's run_classifier defaults; the notes sweep batch {16, 32} x lr {5e-5, 3e-5,
    # 2e-5} x epochs {2, 3, 4} (see grid.py)
    epochs: float = 3.0
    batch_size: int = 32
    lr: float = 5e-5
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    grad_accum: int = 1
    grad_clip: float = 1.0  # 0: no clipping
    eval_every: int | None = None  # optimizer steps between evaluations and checkpoints; default once per epoch
    patience: int | None = None  # stop after this many evaluations without a better dev score
    max_steps: int | None = None
    max_minutes: float | None = None
    group_by_length: bool = False  # plain shuffling; grouping cost ~1.4 points on short texts (README)
    eval_batch_size: int = 64
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    progress: bool = True
    resume: bool = False  # continue from out_dir/checkpoint.pt

    def __post_init__(self):
        optional = lambda check: partial(check, optional=True)  # noqa: E731
        check_fields(self, {"epochs": positive_float, "batch_size": positive_int, "lr": positive_float,
                            "warmup_proportion": fraction, "weight_decay": nonnegative_float,
                            "grad_accum": positive_int, "grad_clip": nonnegative_float,
                            "eval_every": optional(positive_int), "patience": optional(positive_int),
                            "max_steps": optional(positive_int), "max_minutes": optional(positive_float),
                            "eval_batch_size": positive_int, "seed": nonnegative_int})

    def trajectory(self) -> dict:
        """The settings that decide what the run computes: a resumed run must have the same ones."""
        return {k: v for k, v in asdict(self).items() if k not in ("max_minutes", "device", "progress", "resume")}


def length_grouped_batches(lengths, batch_size: int, rng: np.random.Generator, group_batches: int = 50):
    """One epoch of shuffled batches whose members have similar lengths: shuffle, cut into groups of
    `group_batches` batches, sort each group by length, then shuffle the batches. Dynamic padding
    then pads each batch only to its own longest member."""
    order = rng.permutation(len(lengths))
    batches = []
    for g in range(0, len(order), batch_size * group_batches):
        group = sorted(order[g:g + batch_size * group_batches], key=lambda i: -lengths[i])
        batches += [group[i:i + batch_size] for i in range(0, len(group), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


class _Batches:
    """An endless supply of training batches, epoch after epoch, moved to the device; its position
    (state_dict) is plain lists and numbers, so a checkpoint resumes it exactly."""

    def __init__(self, task, features, settings, pad_id, device):
        self.task, self.features, self.s, self.pad_id, self.device = task, features, settings, pad_id, device
        self.lengths = [task.feature_length(f) for f in features]
        self.rng = np.random.default_rng(settings.seed)
        self.queue, self.epoch, self.examples_seen = [], 0, 0

    def __call__(self):
        if not self.queue:
            self.epoch += 1
            if self.s.group_by_length:
                self.queue = length_grouped_batches(self.lengths, self.s.batch_size, self.rng)
            else:
                order = self.rng.permutation(len(self.features))
                self.queue = [order[i:i + self.s.batch_size] for i in range(0, len(order), self.s.batch_size)]
        indices = self.queue.pop(0)
        self.examples_seen += len(indices)
        batch = self.task.collate([self.features[i] for i in indices], self.pad_id)
        return {k: v.to(self.device) for k, v in batch.items()}

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "examples_seen": self.examples_seen, "rng": self.rng.bit_generator.state,
                "queue": [[int(i) for i in batch] for batch in self.queue]}

    def load_state_dict(self, state: dict):
        self.epoch, self.examples_seen, self.queue = state["epoch"], state["examples_seen"], state["queue"]
        self.rng.bit_generator.state = state["rng"]


@torch.no_grad()
def predict_outputs(task, model, features, pad_id=0, batch_size=64, autocast=None, progress=False) -> list:
    """The model's outputs for every feature, in feature order, padding cut off (Task.unbatch)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    outputs = [None] * len(features)
    lengths = [task.feature_length(f) for f in features]
    batches = list(length_sorted_batches(lengths, batch_size, max_tokens=batch_size * 512))
    for indices in progress_bar(batches, desc="predict", unit="batch", enabled=progress, leave=False):
        batch = {k: v.to(device) for k, v in task.collate([features[i] for i in indices], pad_id).items()}
        with autocast or autocast_context(device, None):
            result = task.forward(model, batch)
        for i, out in zip(indices, task.unbatch(result, batch)):
            outputs[i] = out
    model.train(was_training)
    return outputs


@dataclass
class _Tally:
    """What a run counts as it goes (saved in its checkpoint): the best dev evaluation so far
    (best_score None before the first), evaluations since then, and seconds spent in training steps."""
    best_score: float | None = None
    best_step: int = 0
    best_metrics: dict | None = None
    since_best: int = 0
    train_seconds: float = 0.0


def finetune(task, model, tokenizer, train_examples, dev_examples, out_dir, s: FinetuneSettings) -> dict:
    """Train `model` on the task. With dev examples, each evaluation that beats the best dev score
    saves the model to `out_dir/model`; without, the last step's model is saved there and no score
    is reported. A checkpoint (out_dir/checkpoint.pt) is written at each evaluation and removed when
    the run completes; `s.resume` continues from it. Returns a summary."""
    if s.patience is not None and not dev_examples:
        raise ValueError("patience counts evaluations without a better dev score: it needs dev examples")
    torch.manual_seed(s.seed)
    device = pick_device(s.device)
    dtype = autocast_dtype(s.precision, device)
    model.to(device).train()
    train_features, dev_features = _features(task, tokenizer, train_examples, dev_examples, model.config)
    steps_per_epoch = math.ceil(len(train_features) / (s.batch_size * s.grad_accum))
    total = s.max_steps or max(1, math.ceil(s.epochs * steps_per_epoch))
    optimizer = make_adamw(model, s.lr, s.weight_decay, betas=(0.9, 0.999), eps=1e-6)
    scheduler = make_scheduler(optimizer, "linear", int(s.warmup_proportion * total), total, min_ratio=0.0)
    eval_every = s.eval_every or steps_per_epoch
    log, ckpt, folder = MetricsLog(f"{out_dir}/metrics.jsonl"), f"{out_dir}/checkpoint.pt", f"{out_dir}/model"
    batches = _Batches(task, train_features, s, tokenizer.pad_token_id, device)
    run = {"model": model.config.to_dict(hf=False), "task": task.state(), "settings": s.trajectory(),
           "train_data": hashlib.sha256(repr(train_features).encode()).hexdigest()}
    finish_swap(folder)  # a model replacement that a kill interrupted
    step, tally = 0, _Tally()
    if s.resume:
        step, tally = _restore(ckpt, run, model, optimizer, scheduler, batches)
        log.truncate_after(step)
        write(f"resuming {ckpt} at step {step} of {total}")
    else:
        log.truncate_after(-1)  # a fresh run starts a fresh log
    loss_of = lambda m, b: task.loss(task.forward(m, b), b)  # noqa: E731
    start, first_step, early_stop, stopped_by_time = time.perf_counter(), step, False, False
    bar = progress_bar(total=total, initial=step, desc=f"finetune {task.name}", unit="step", enabled=s.progress)
    while step < total:
        step += 1
        tick = time.perf_counter()
        loss = train_step(model, optimizer, scheduler, batches, s.grad_accum, s.grad_clip,
                          autocast_context(device, dtype), loss_of=loss_of)
        tally.train_seconds += time.perf_counter() - tick
        if not math.isfinite(loss):
            raise ValueError(f"step {step}: the training loss is {loss}; the run diverged (try a smaller --lr)")
        log.write(step, "train", loss=loss, lr=scheduler.get_last_lr()[0], epoch=batches.epoch)
        bar.update()
        bar.set_postfix(loss=f"{loss:.4f}", ex_per_s=f"{batches.examples_seen / tally.train_seconds:.1f}", refresh=False)
        out_of_time = s.max_minutes is not None and time.perf_counter() - start > 60 * s.max_minutes
        if step % eval_every and step < total and not out_of_time:
            continue
        if dev_examples and _evaluate(task, model, tokenizer, dev_examples, dev_features, s, dtype, step, tally, log,
                                      folder):
            early_stop = True
            break
        if step == total:
            break
        save_checkpoint(ckpt, model=model, optimizer=optimizer, scheduler=scheduler, step=step,
                        data_state=batches.state_dict(), extra={**run, "tally": asdict(tally)})
        if out_of_time:
            stopped_by_time = True
            break
    bar.close()
    if early_stop:
        write(f"early stop: no better dev {task.metric} in {s.patience} evaluations")
    if stopped_by_time:
        write(f"stopped at step {step}: the {s.max_minutes}-minute budget is spent; --resume continues the run")
    if not dev_examples:
        save_finetuned(folder, model, tokenizer, task)
    if not stopped_by_time and os.path.exists(ckpt):
        os.remove(ckpt)  # the run is complete: nothing to resume, and it is three times the model's size
    summary = {"task": task.name, "metric": task.metric, "steps": step, "total_steps": total,
               "kept_model": f"best dev {task.metric}" if dev_examples else "last step (no dev set to score)",
               "train_examples_per_s": batches.examples_seen / max(tally.train_seconds, 1e-9),
               "minutes": (time.perf_counter() - start) / 60, "resumed_from_step": first_step if s.resume else None,
               "stopped_by_time": stopped_by_time, "settings": asdict(s)}
    if dev_examples:
        summary.update(best_score=tally.best_score, best_step=tally.best_step, dev=tally.best_metrics)
    return summary


def _features(task, tokenizer, train_examples, dev_examples, config) -> tuple[list, list]:
    """The training and dev features, checked against the model's positions; how much an epoch holds
    (examples, windows, truncations) is said on stderr, since windows multiply its work."""
    train_features = task.featurize(train_examples, tokenizer)
    dev_features = task.featurize(dev_examples, tokenizer) if dev_examples else []
    task.check_positions(train_features + dev_features, config.max_position_embeddings)
    write(f"{task.name}: an epoch holds {task.describe(train_examples, train_features)}")
    if dev_examples:
        write(f"{task.name}: dev holds {task.describe(dev_examples, dev_features)}")
    return train_features, dev_features


def _evaluate(task, model, tokenizer, examples, features, s, dtype, step, tally: _Tally, log, folder) -> bool:
    """Score the dev set, save the model if it is the best so far; True when patience has run out."""
    scores = evaluate(task, model, examples, features, tokenizer.pad_token_id, s, dtype)
    log.write(step, "eval", **scores)
    score = scores[task.metric]
    score = -math.inf if math.isnan(score) else score  # NaN never compares better, and must not stick
    is_best = tally.best_score is None or score > tally.best_score
    if is_best:
        tally.best_score, tally.best_step, tally.best_metrics, tally.since_best = score, step, scores, 0
        save_finetuned(folder, model, tokenizer, task)
    else:
        tally.since_best += 1
    write(f"step {step}: dev {_fmt(scores)}" + (" (best)" if is_best else ""))
    return s.patience is not None and tally.since_best >= s.patience


def _restore(ckpt, run: dict, model, optimizer, scheduler, batches) -> tuple[int, _Tally]:
    """Load a checkpoint of this very run (same model, task, settings and training data) into the
    model, optimizer, scheduler, random generators and data position."""
    state = restore_run(ckpt, model.config, model=model, optimizer=optimizer, scheduler=scheduler)
    saved = state["extra"]
    for key in ("task", "settings", "train_data"):
        if saved.get(key) != run[key]:
            raise ValueError(f"{ckpt}: the run was started with other {_differences(saved.get(key), run[key])}; "
                             "--resume needs the same data and settings (or start again with --overwrite)")
    batches.load_state_dict(state["data"])
    return state["step"], _Tally(**saved["tally"])


def _differences(saved, now) -> str:
    if not (isinstance(saved, dict) and isinstance(now, dict)):
        return "training data"
    changed = [f"{k} ({saved.get(k)!r}, now {now.get(k)!r})" for k in sorted(set(saved) | set(now))
               if saved.get(k) != now.get(k)]
    return "settings: " + ", ".join(changed)


def evaluate(task, model, examples, features, pad_id, s: FinetuneSettings, dtype=None) -> dict:
    device = next(model.parameters()).device
    outputs = predict_outputs(task, model, features, pad_id, s.eval_batch_size, autocast_context(device, dtype))
    return task.evaluate(examples, features, outputs)


def _fmt(scores: dict) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in scores.items() if isinstance(v, float)) or "(no scores)"
