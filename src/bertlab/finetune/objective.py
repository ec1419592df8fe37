"""Fine-tuning, one objective on the engine for every task: AdamW with BERT's settings (eps 1e-6),
warmup for a proportion of the steps then linear decay, shuffled (or length-grouped) batches with
dynamic padding, the task's loss, evaluation on the dev set, early stopping, and the best model kept
as a folder that `bertlab predict` needs alone. fit() does the rest: accumulation, clipping,
precision, torchrun, the time budget, checkpoints that `resume` continues exactly, the metrics log.
"""
import hashlib
import math
import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from .. import validate
from ..inference.embed import length_sorted_batches
from ..interop.finetuned import finish_swap, save_finetuned
from ..progress import progress_bar, write
from ..training.distributed import gather_objects
from ..training.engine import Objective, autocast_context, fit
from ..training.metrics import plot_learning_curve
from ..training.optim import make_adamw
from ..training.schedules import make_scheduler
from ..training.settings import RunSettings, optional


@dataclass(kw_only=True)
class FinetuneSettings(RunSettings):
    """The shared run settings with google-research/bert's run_classifier defaults, and fine-tuning's
    own; the notes sweep batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs {2, 3, 4} (grid.py)."""
    out: str | None = None  # the run folder; finetune() sets it from its out_dir
    epochs: float = 3.0
    lr: float = 5e-5
    warmup_proportion: float = 0.1  # the share of the steps spent warming up (`warmup` stays 0)
    max_steps: int | None = None  # when set, replaces epochs
    eval_every: int | None = None  # steps between dev evaluations and checkpoints; default once per epoch
    patience: int | None = None  # stop after this many evaluations without a better dev score
    group_by_length: bool = False  # plain shuffling; grouping cost ~1.4 points on short texts (docs/results/fine-tuning.md)
    eval_batch_size: int = 64

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "epochs": v.positive_float, "lr": v.positive_float,
                "warmup_proportion": v.fraction, "patience": optional(v.positive_int),
                "eval_batch_size": v.positive_int}

    def __post_init__(self):
        super().__post_init__()
        if self.warmup:
            raise ValueError(f"warmup {self.warmup}: fine-tuning warms up for warmup_proportion of its steps")


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


class Batches:
    """An endless stream of training batches, epoch after epoch, drawn from `seed` alike in every
    process; of each `world_size` batches in a row, process `rank` takes its own, so N processes
    read what one process reads with N times the accumulation. The position (state_dict) is plain
    lists and numbers, so a checkpoint resumes it exactly."""

    def __init__(self, task, features, batch_size: int, group_by_length: bool, seed: int, pad_id: int, device,
                 rank: int = 0, world_size: int = 1):
        self.task, self.features, self.batch_size, self.group_by_length = task, features, batch_size, group_by_length
        self.pad_id, self.device, self.rank, self.world_size = pad_id, device, rank, world_size
        self.lengths = [task.feature_length(f) for f in features]
        self.rng = np.random.default_rng(seed)
        self.queue, self.epoch, self.examples = [], 0, 0

    def __call__(self) -> dict:
        indices = [self._draw() for _ in range(self.world_size)][self.rank]
        self.examples += len(indices)
        batch = self.task.collate([self.features[i] for i in indices], self.pad_id)
        return {k: v.to(self.device) for k, v in batch.items()}

    def _draw(self):
        if not self.queue:
            self.epoch += 1
            if self.group_by_length:
                self.queue = length_grouped_batches(self.lengths, self.batch_size, self.rng)
            else:
                order = self.rng.permutation(len(self.features))
                self.queue = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        return self.queue.pop(0)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "rng": self.rng.bit_generator.state,
                "queue": [[int(i) for i in batch] for batch in self.queue]}

    def load_state_dict(self, state: dict):
        from ..training.checkpoint import check_count, expect_fields, set_bit_generator_state
        expect_fields(state, {"epoch": int, "rng": dict, "queue": list}, "the batch position")
        epoch = check_count(state["epoch"], "the batch position's epoch", whole=True)
        # the epoch's batches still to read: each of 1 to batch_size indices of this run's examples
        # (a crafted index past them would fail mid-run, a negative one silently read another example)
        n = len(self.features)
        for i, batch in enumerate(state["queue"]):
            if not (isinstance(batch, list) and 1 <= len(batch) <= self.batch_size and
                    all(type(k) is int and 0 <= k < n for k in batch)):
                raise ValueError(f"the batch position's queue[{i}] is not a batch of 1 to {self.batch_size} "
                                 f"example indices below {n}")
        set_bit_generator_state(self.rng, state["rng"], "the batch generator")
        self.epoch, self.queue = epoch, state["queue"]


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


class FineTuning(Objective):
    """A task's loss on its training examples. With dev examples, each evaluation that beats the best
    dev score so far saves the model to OUT/model (and patience counts those that do not); without,
    the last step's model is saved there."""
    unit = "examples"
    keep_checkpoint = False  # a complete run has nothing to resume, and the checkpoint is 3x the model
    log_speed = False        # metrics.jsonl holds what the run computes: a resumed log equals the whole one

    def __init__(self, task, model, tokenizer, train_examples, dev_examples, s: FinetuneSettings):
        if s.patience is not None and not dev_examples:
            raise ValueError("patience counts evaluations without a better dev score: it needs dev examples")
        self.task, self.model, self.tokenizer, self.s = task, model, tokenizer, s
        self.train_examples, self.dev_examples = train_examples, dev_examples
        self.name = f"finetune {task.name}"
        self.find_unused_parameters = task.per_token_outputs  # token and span heads leave the pooler unused
        self.folder = os.path.join(s.out, "model")
        # the best dev evaluation so far (score None before the first), and evaluations since it
        self.best = {"score": None, "step": 0, "metrics": None, "since": 0}
        self.is_best = False

    def config(self):
        return self.model.config

    def setup(self, run):
        task, tokenizer, s, self.run = self.task, self.tokenizer, self.s, run
        self.train_features = task.featurize(self.train_examples, tokenizer)
        self.dev_features = task.featurize(self.dev_examples, tokenizer) if self.dev_examples else []
        task.check_positions(self.train_features + self.dev_features, self.model.config.max_position_embeddings)
        if run.is_main:  # how much an epoch holds (examples, windows, truncations): windows multiply its work
            write(f"{task.name}: an epoch holds {task.describe(self.train_examples, self.train_features)}")
            if self.dev_examples:
                write(f"{task.name}: dev holds {task.describe(self.dev_examples, self.dev_features)}")
            finish_swap(self.folder)  # a model replacement that a kill interrupted
        self.fingerprint = hashlib.sha256(repr(self.train_features).encode()).hexdigest()
        self.batches = Batches(task, self.train_features, s.batch_size, s.group_by_length, s.seed,
                               tokenizer.pad_token_id, run.device, run.info.rank, run.info.world_size)
        return self.model.to(run.device)

    def plan(self, s):
        per_epoch = math.ceil(len(self.train_features) / (s.batch_size * s.grad_accum * self.run.info.world_size))
        return s.max_steps or max(1, math.ceil(s.epochs * per_epoch)), s.eval_every or per_epoch

    def optimizer(self, model, s):
        return make_adamw(model, s.lr, s.weight_decay, betas=(0.9, 0.999), eps=1e-6)

    def scheduler(self, optimizer, s, total_steps):
        return make_scheduler(optimizer, "linear", int(s.warmup_proportion * total_steps), total_steps, min_ratio=0.0)

    def next_batch(self):
        return self.batches()

    def loss(self, model, batch):
        return self.task.training_loss(model, batch)

    def step_stats(self):
        examples, self.batches.examples = self.batches.examples, 0
        return {}, examples

    def log_fields(self):
        return {"epoch": self.batches.epoch}

    def evaluate(self, model):
        """The dev scores (each process predicts every N-th feature; all score the whole set), and
        the model saved to OUT/model when they are the best so far."""
        if not self.dev_examples:
            return None
        info, features = self.run.info, self.dev_features
        mine = predict_outputs(self.task, model, features[info.rank::info.world_size], self.tokenizer.pad_token_id,
                               self.s.eval_batch_size)
        outputs = [None] * len(features)
        for rank, part in enumerate(gather_objects(mine, info)):
            outputs[rank::info.world_size] = part
        scores = self.task.evaluate(self.dev_examples, features, outputs)
        score = scores[self.task.metric]
        score = -math.inf if math.isnan(score) else score  # NaN never compares better, and must not stick
        self.is_best = self.best["score"] is None or score > self.best["score"]
        if self.is_best:
            self.best = {"score": score, "step": self.run.step, "metrics": scores, "since": 0}
            if self.run.is_main:
                save_finetuned(self.folder, model, self.tokenizer, self.task.state())
        else:
            self.best["since"] += 1
        return scores

    def describe(self, metrics):
        text = " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float)) or "(no scores)"
        return f"dev {text}" + (" (best)" if self.is_best else "")

    def stop_reason(self):
        if self.s.patience is not None and self.best["since"] >= self.s.patience:
            return f"no better dev {self.task.metric} in {self.s.patience} evaluations"
        return None

    def state_dict(self):
        return {"batches": self.batches.state_dict(), "best": self.best}

    def load_state_dict(self, state):
        from ..training.checkpoint import check_count, expect_fields
        expect_fields(state, {"batches": dict, "best": dict}, "the fine-tuning position")
        self.batches.load_state_dict(state["batches"])
        best = expect_fields(state["best"], {"score": (float, type(None)), "step": int, "metrics": (dict, type(None)),
                                             "since": int}, "the best evaluation")
        if best["score"] is not None and not math.isfinite(best["score"]):  # a NaN would never be beaten
            raise ValueError(f"the best evaluation's score is {best['score']!r}; it must be finite")
        check_count(best["step"], "the best evaluation's step", whole=True, most=self.run.step)
        check_count(best["since"], "the evaluations since the best", whole=True)
        self.best = best

    def identity(self):
        """The task, the settings that decide what the run computes, and the training data."""
        settings = {k: v for k, v in self.s.to_dict().items()
                    if k not in ("out", "max_minutes", "save_every", "device", "sharding", "progress", "resume")}
        return {**settings, "task": self.task.state(), "data": self.fingerprint}

    def export(self, run, model, summary):
        if not self.dev_examples:
            save_finetuned(self.folder, model, self.tokenizer, self.task.state())

    def summary(self, summary):
        metric, best = self.task.metric, self.best
        kept = {"kept_model": f"best dev {metric}", "best_score": best["score"], "best_step": best["step"],
                "dev": best["metrics"]} if self.dev_examples else {"kept_model": "last step (no dev set to score)"}
        return {"task": self.task.name, "metric": metric, **summary, **kept, "settings": self.s.to_dict(),
                "train_examples_per_s": summary["examples_per_s"], "minutes": summary["seconds"] / 60}

    def curves(self, records, out, title):
        c = self.model.config
        plot_learning_curve(records, os.path.join(out, "curves.png"), self.task.metric,
                            title=f"{self.task.name}, BERT L{c.num_hidden_layers}/H{c.hidden_size}")


def finetune(task, model, tokenizer, train_examples, dev_examples, out_dir, s: FinetuneSettings) -> dict:
    """Train `model` on the task: fit(FineTuning(...), s) with `out_dir` as the run folder. With dev
    examples, each evaluation that beats the best dev score saves the model to `out_dir/model`;
    without, the last step's model is saved there and no score is reported. A checkpoint
    (out_dir/checkpoint.pt) is written at each evaluation and removed when the run completes;
    `s.resume` continues from it. Returns the summary (also out_dir/summary.json)."""
    out_dir = os.fspath(out_dir)
    if s.out is not None and os.fspath(s.out) != out_dir:
        raise ValueError(f"settings.out {s.out} and out_dir {out_dir}: give one run folder")
    s = replace(s, out=out_dir)
    objective = FineTuning(task, model, tokenizer, train_examples, dev_examples, s)
    summary = fit(objective, s)
    del summary["model"]  # `model` itself, trained in place
    if objective.run.is_main:
        if summary["stopped_early"]:
            write(f"early stop: {summary['stopped_early']}")
        if summary["stopped_by_time"]:
            write(f"stopped at step {summary['steps']}: the {s.max_minutes}-minute budget is spent; "
                  "--resume continues the run")
    return summary
