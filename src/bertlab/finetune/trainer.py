"""Fine-tuning, the same loop for every task: AdamW with BERT's settings, warmup then linear decay,
length-grouped dynamic padding, gradient accumulation and clipping, mixed precision where the device
has it, evaluation on the dev set, early stopping, and the best model kept as a folder that
`bertlab predict` needs alone.
"""
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from tqdm import tqdm

from ..device import autocast_dtype, pick_device
from ..inference.embed import length_sorted_batches
from ..training.lm_trainer import autocast_context, train_step
from ..training.metrics import MetricsLog
from ..training.optim import make_adamw
from ..training.schedules import make_scheduler
from .folder import save_finetuned


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
    grad_clip: float = 1.0
    eval_every: int | None = None  # optimizer steps; default once per epoch
    patience: int | None = None  # stop after this many evaluations without a better dev score
    max_steps: int | None = None
    max_minutes: float | None = None
    group_by_length: bool = False  # plain shuffling; grouping cost ~1.4 points on short texts (README)
    eval_batch_size: int = 64
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    progress: bool = True


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
    """An endless supply of training batches, epoch after epoch, moved to the device."""

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


@torch.no_grad()
def predict_outputs(task, model, features, pad_id=0, batch_size=64, autocast=None, progress=False) -> list:
    """The model's outputs for every feature, in feature order, padding cut off (Task.unbatch)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    outputs = [None] * len(features)
    lengths = [task.feature_length(f) for f in features]
    batches = list(length_sorted_batches(lengths, batch_size, max_tokens=batch_size * 512))
    for indices in tqdm(batches, desc="predict", unit="batch", disable=not progress, leave=False):
        batch = {k: v.to(device) for k, v in task.collate([features[i] for i in indices], pad_id).items()}
        with autocast or autocast_context(device, None):
            result = task.forward(model, batch)
        for i, out in zip(indices, task.unbatch(result, batch)):
            outputs[i] = out
    model.train(was_training)
    return outputs


def finetune(task, model, tokenizer, train_examples, dev_examples, out_dir, s: FinetuneSettings) -> dict:
    """Train `model` on the task; after each evaluation the best model so far is saved to
    `out_dir/model`. Returns a summary: best dev score, its step, examples/s, minutes."""
    torch.manual_seed(s.seed)
    device = pick_device(s.device)
    dtype = autocast_dtype(s.precision, device)
    model.to(device).train()
    train_features = task.featurize(train_examples, tokenizer)
    dev_features = task.featurize(dev_examples, tokenizer) if dev_examples else []
    steps_per_epoch = math.ceil(len(train_features) / (s.batch_size * s.grad_accum))
    total = s.max_steps or max(1, math.ceil(s.epochs * steps_per_epoch))
    optimizer = make_adamw(model, s.lr, s.weight_decay, betas=(0.9, 0.999), eps=1e-6)
    scheduler = make_scheduler(optimizer, "linear", int(s.warmup_proportion * total), total, min_ratio=0.0)
    eval_every = s.eval_every or steps_per_epoch
    log = MetricsLog(f"{out_dir}/metrics.jsonl")
    log.truncate_after(-1)  # a fresh run starts a fresh log
    batches = _Batches(task, train_features, s, tokenizer.pad_token_id, device)
    loss_of = lambda m, b: task.loss(task.forward(m, b), b)  # noqa: E731
    best = {"score": -math.inf, "step": 0, "metrics": {}}
    evaluations_since_best, start, train_seconds = 0, time.perf_counter(), 0.0
    bar = tqdm(total=total, desc=f"finetune {task.name}", unit="step", disable=not s.progress)
    for step in range(1, total + 1):
        tick = time.perf_counter()
        loss = train_step(model, optimizer, scheduler, batches, s.grad_accum, s.grad_clip,
                          autocast_context(device, dtype), loss_of=loss_of)
        train_seconds += time.perf_counter() - tick
        elapsed = time.perf_counter() - start
        log.write(step, "train", loss=loss, lr=scheduler.get_last_lr()[0], epoch=batches.epoch)
        bar.update()
        bar.set_postfix(loss=f"{loss:.4f}", ex_per_s=f"{batches.examples_seen / train_seconds:.1f}")
        out_of_time = s.max_minutes is not None and elapsed > 60 * s.max_minutes
        if step % eval_every == 0 or step == total or out_of_time:
            scores = evaluate(task, model, dev_examples, dev_features, tokenizer.pad_token_id, s, dtype) \
                if dev_examples else {}
            log.write(step, "eval", **scores)
            score = scores.get(task.metric, -math.inf) if dev_examples else step
            if score > best["score"]:
                best, evaluations_since_best = {"score": score, "step": step, "metrics": scores}, 0
                save_finetuned(f"{out_dir}/model", model, tokenizer, task)
            else:
                evaluations_since_best += 1
            bar.write(f"step {step}: dev {_fmt(scores)}" + (" (best)" if best["step"] == step else ""))
            if s.patience is not None and evaluations_since_best >= s.patience:
                bar.write(f"early stop: no better dev {task.metric} in {s.patience} evaluations")
                break
        if out_of_time:
            bar.write(f"stopping: the {s.max_minutes}-minute budget is spent")
            break
    bar.close()
    return {"task": task.name, "metric": task.metric, "best_score": best["score"], "best_step": best["step"],
            "dev": best["metrics"], "steps": step, "train_examples_per_s": batches.examples_seen / train_seconds,
            "minutes": (time.perf_counter() - start) / 60, "settings": asdict(s)}


def evaluate(task, model, examples, features, pad_id, s: FinetuneSettings, dtype=None) -> dict:
    device = next(model.parameters()).device
    outputs = predict_outputs(task, model, features, pad_id, s.eval_batch_size, autocast_context(device, dtype))
    return task.evaluate(examples, features, outputs)


def _fmt(scores: dict) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in scores.items() if isinstance(v, float)) or "(no dev set)"
