"""fit(objective, settings): the one training loop every model family uses.

The loop owns what all of them share: device and precision, seeding, torchrun data parallelism
(DDP, or FSDP for models too big for one device), gradient accumulation and clipping, autocast and
the fp16 GradScaler, the learning-rate schedule, the evaluation and checkpoint cadence, the step and
time budget, atomic checkpoints that resume exactly (model, optimizer, scheduler, every random
generator, the data position), torch.compile, the FLOP count and MFU, the JSONL metrics log, the PNG
curves, the progress bar and summary.json. An Objective supplies the rest: its model, batches, loss,
evaluation and model folder.
"""
import contextlib
import json
import math
import os
import time

import torch

from .. import progress, validate
from ..models.accelerate import accelerate
from ..device import autocast_dtype, peak_tflops, pick_device, resolve_precision
from .checkpoint import (check_state_against, read_checkpoint, rng_states, same_data, set_rng_states,
                         write_checkpoint)
from . import sharded_checkpoint
from .distributed import all_agree, barrier, cleanup, gather_objects, rank_device, setup_distributed, sum_across
from .memory import HeapBound, peak_rss_mb
from .metrics import MetricsLog, plot_curves
from .parallel import full_state, gradient_sync, load_full_state, meta_copy, unsharded_copy, wrap_model
from .settings import RunSettings


class Objective:
    """What one kind of training supplies to fit(). Override `setup`, `next_batch` and `loss`;
    the rest has defaults that suit a plain language-model-like objective."""
    name = "train"                 # the progress bar's label
    unit = "tokens"                # what step_stats' count counts: speeds are `unit`/s
    keep_checkpoint = True         # False: a completed run removes checkpoint.pt (fine-tuning)
    log_speed = True               # False: metrics.jsonl holds only what the run computes, so a resumed
                                   # run's log equals the uninterrupted run's line for line (fine-tuning)
    find_unused_parameters = False  # DDP: parameters some steps leave without a gradient
    compile_whole_loss = False     # --compile on one process compiles loss() whole, model and loss in one
                                   # graph; for a loss that traces as one (no data-dependent shapes, no
                                   # value that changes every step), else the model alone is compiled
    position_is_global = False     # True: state_dict() is the same in every process (a place in one
                                   # sequence the processes share out), so a checkpoint resumes with
                                   # another process count; False: each reads a stream of its own
    updates_itself = False         # True: a step is update() (an exact update without gradients, at the
                                   # schedule's rate), not loss() + backward + the optimizer

    def setup(self, run: "Run") -> torch.nn.Module:
        """Open the data (this rank's share: run.info) and return the model on run.device.
        Called after torch is seeded with settings.seed, so every rank builds the same weights."""
        raise NotImplementedError

    def config(self):
        """The model's config (a JsonConfig): a checkpoint of another model is refused on resume."""
        return None

    def optimizer(self, model, s: RunSettings):
        from .optim import make_adamw
        return make_adamw(model, s.lr, s.weight_decay)

    def scheduler(self, optimizer, s: RunSettings, total_steps: int):
        from .schedules import make_scheduler
        return make_scheduler(optimizer, "linear", s.warmup, total_steps, min_ratio=0.0)

    def plan(self, s: RunSettings) -> tuple[int, int]:
        """(total optimizer steps, steps between evaluations)."""
        return s.max_steps, s.eval_every or s.max_steps

    def micro_batches(self, k: int):
        """The k micro-batches of one optimizer step (a generator, so each is made when needed)."""
        return (self.next_batch() for _ in range(k))

    def next_batch(self):
        raise NotImplementedError

    def loss(self, model, batch) -> torch.Tensor:
        """The micro-batch's mean loss (fit divides it by grad_accum)."""
        raise NotImplementedError

    def update(self, model, batch, lr: float) -> float:
        """For an objective that updates_itself: train the model in place on the micro-batch at rate
        lr (the optimizer's, as the schedule sets it) and return the batch's loss. word2vec's
        per-example SGD (word2vec/kernels.py) takes this path: its update is exact without autograd,
        and it must be made one example at a time."""
        raise NotImplementedError

    def step_stats(self) -> tuple[dict, float]:
        """({name: value} to log for the last step, averaged over processes; units it processed
        on this process, summed). Called once after every step."""
        return {}, 0.0

    def context_length(self) -> int | None:
        """The positions each token attends over now (the sequence length): attention's term in
        the FLOP estimate. None: unknown (no FLOP count unless flops_per_unit is overridden)."""
        return None

    def flops_per_unit(self, model) -> float | None:
        """Training FLOPs (forward and backward) per unit that step_stats counts, for the TFLOP/s
        and MFU the engine reports; None: not reported. Asked after every step (a phase may change
        the sequence length). By default, where the unit is tokens: training.flops' estimate."""
        context = self.context_length()
        if self.unit != "tokens" or context is None:
            return None
        from .flops import transformer_flops_per_token
        return transformer_flops_per_token(model, context)

    def log_fields(self) -> dict:
        """Position fields logged with each training step (epoch, phase)."""
        return {}

    def evaluate(self, model) -> dict | None:
        """Held-out metrics (every rank calls it), or None where there is nothing to evaluate."""
        return None

    def describe(self, metrics: dict) -> str:
        return ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))

    def stop_reason(self) -> str | None:
        """After an evaluation: why to stop now (patience run out), or None to go on."""
        return None

    def state_dict(self) -> dict:
        """This process's data position (and anything else the objective counts), as plain data."""
        return {}

    def load_state_dict(self, state: dict):
        pass

    def shared_state(self) -> dict:
        """What the objective keeps that is the same in every process and may be large (translation's
        weight snapshots): saved once, by the main process, among the checkpoint's "extra" keys, where
        state_dict() is gathered from every process. Its keys must not be the engine's own."""
        return {}

    def load_shared_state(self, extra: dict):
        """Restore what shared_state() saved, from the checkpoint's "extra" (in every process)."""

    def identity(self) -> dict:
        """What a resumed run must share with the one it continues, besides the model (plain data).
        A "data" entry (a fingerprint of the training data) is named as such when it differs."""
        return {}

    def final_model(self, model):
        """The model the run delivers (translation averages its last checkpoints here)."""
        return model

    def export(self, run: "Run", model, summary: dict):
        """Write OUT/model (main process only)."""

    def summary(self, summary: dict) -> dict:
        """The summary with the objective's own fields added."""
        return summary

    def curves(self, records: list[dict], out: str, title: str):
        plot_curves(records, os.path.join(out, "curves.png"), title=title)


class Run:
    """Device, processes, model, optimizer and counters of one fit() call: what the objective may read."""

    def __init__(self, objective: Objective, s: RunSettings):
        self.objective, self.s = objective, s
        device = pick_device(s.device)
        self.precision = resolve_precision(s.precision, device)
        self.dtype = autocast_dtype(self.precision, device)  # fp16 on a CPU is refused here, before any work
        self.info = setup_distributed(device)
        self.device = rank_device(device, self.info)
        sharded = s.sharding == "fsdp" and self.info.enabled
        if sharded and self.dtype is torch.float16:
            # torch.amp.GradScaler's overflow check would see each process's shard of the gradients
            # alone, so processes could disagree on skipping a step
            raise ValueError("fp16 under sharding fsdp: its loss scaling is not supported here; use --precision bf16")
        config = objective.config()
        if config is not None:  # weights, gradients and Adam's moments must fit before any is allocated
            config.check_size(training=True)
        torch.manual_seed(s.seed)  # the same initial weights on every rank
        # the CPU speed paths swapped in (models.accelerate): the same outputs, faster
        self.model = accelerate(objective.setup(self))
        # under FSDP the model's own parameters become shards: the skeleton (no memory) is what
        # whole_model() fills to hand out an ordinary model
        self.skeleton = meta_copy(self.model) if sharded else None
        self.net = wrap_model(self.model, self.info, self.device, s.sharding, objective.find_unused_parameters)
        # what the training step calls; self.net keeps the parameter names checkpoints use. On one
        # process --compile compiles an objective's whole loss where it traces as one graph: the
        # model and what follows it together (a masked LM's cross-entropy over the vocabulary, left
        # eager, took a third of a BERT-small step on an H100); else the (DDP, FSDP) module
        compile_loss = s.compile and not self.info.enabled and objective.compile_whole_loss
        self.step_net = torch.compile(self.net) if s.compile and not compile_loss else self.net
        self.step_loss = torch.compile(objective.loss) if compile_loss else objective.loss
        self.peak_tflops = peak_tflops(self.device, self.precision)
        self.total_steps, self.eval_every = objective.plan(s)
        self.save_every = s.save_every or self.eval_every
        self.optimizer = objective.optimizer(self.model, s)
        self.scheduler = objective.scheduler(self.optimizer, s, self.total_steps)
        self.scaler = torch.amp.GradScaler() if self.dtype is torch.float16 else None
        self.autocast = autocast_context(self.device, self.dtype)
        self.log = MetricsLog(os.path.join(s.out, "metrics.jsonl"), self.info.is_main)
        self.ckpt = os.path.join(s.out, "checkpoint.pt")
        self.step, self.units, self.train_seconds, self.last_eval = 0, 0.0, 0.0, None
        # under --compile, the first step of each process compiles: its seconds, units and FLOPs are
        # kept out of the rates (units/s, TFLOP/s, MFU), which then say what the compiled step does
        self.compile_seconds, self.compile_units, self.compile_flops = 0.0, 0.0, 0.0
        self.flops = None  # training FLOPs so far, every process's (None: the objective has no estimate)
        torch.manual_seed(s.seed + 1 + self.info.rank)  # dropout differs per rank
        if s.resume:
            self.restore()
        else:
            self.log.truncate_after(-1)  # a fresh run in a used folder starts a fresh log

    @property
    def is_main(self) -> bool:
        return self.info.is_main

    def _extra(self) -> dict:
        config = self.objective.config()
        return {"model": config.to_dict(hf=False) if config is not None else None,
                "objective": self.objective.identity(), "settings": self.s.to_dict()}

    def save(self):
        ranks = gather_objects({"objective": self.objective.state_dict(), "rng": rng_states()}, self.info)
        shards = None
        if self.s.checkpoint_format == "sharded":  # every process writes its part; nothing is gathered
            shards = sharded_checkpoint.save(self.net, self.optimizer, self.s.out, self.step, self.info)
            model_state, optimizer_state = {}, {}
        else:
            model_state, optimizer_state = full_state(self.net, self.optimizer, self.info)
        if self.is_main:
            extra = {**self.objective.shared_state(), **self._extra(), "units": self.units,
                     "flops": self.flops, "train_seconds": self.train_seconds, "last_eval": self.last_eval,
                     "compile": [self.compile_seconds, self.compile_units, self.compile_flops],
                     "scaler": self.scaler.state_dict() if self.scaler else None, "shards": shards}
            write_checkpoint(self.ckpt, {"model": model_state, "optimizer": optimizer_state,
                                         "scheduler": self.scheduler.state_dict(), "step": self.step,
                                         "rng": ranks[0]["rng"], "data": ranks, "extra": extra})
            sharded_checkpoint.remove_unreferenced(self.s.out, keep=shards)  # the previous step's, or all
        barrier(self.info)

    def restore(self):
        state = read_checkpoint(self.ckpt)
        saved, now = state["extra"], self._extra()
        if not same_data(saved.get("model"), now["model"]):
            raise ValueError(f"{self.ckpt}: was trained with {self._trained_with(saved.get('model'))}, not "
                             f"{self.objective.config()}; use another --out")
        if not same_data(saved.get("objective"), now["objective"]):
            try:
                other = differences(saved.get("objective"), now["objective"])
            except (RuntimeError, TypeError, ValueError):  # a crafted entry (a tensor) that == cannot compare
                other = "training data or settings"
            raise ValueError(f"{self.ckpt}: the run was started with other {other}; --resume needs the same "
                             "data and settings (or start again with --overwrite)")
        ranks = state["data"]
        source = self._source_process(ranks)
        # every entry against what it is loaded into, before anything is loaded: a moment of the wrong
        # shape made the fused AdamW write out of bounds (training/checkpoint.py)
        shards = saved.get("shards")
        check_state_against(self.model, self.optimizer, state, self.ckpt, scheduler=self.scheduler,
                            scaler=self.scaler, total_steps=self.total_steps, rank=source,
                            whole=self.skeleton, tensors=shards is None)
        if shards is None:
            load_full_state(self.net, self.optimizer, state["model"], state["optimizer"])
        else:  # DCP reads each process's part, whichever process count and sharding wrote it
            sharded_checkpoint.load(self.net, self.optimizer, self.s.out, shards, self.ckpt)
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler and saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])
        # the counters first, so that an objective can check its position against the step
        self.step, self.units, self.train_seconds = state["step"], saved["units"], saved["train_seconds"]
        self.compile_seconds, self.compile_units, self.compile_flops = saved.get("compile", (0.0, 0.0, 0.0))
        self.flops = saved.get("flops")
        self.last_eval = saved.get("last_eval")
        try:  # the objective's own checks name the entry; the file is named here
            self.objective.load_state_dict(ranks[source]["objective"])
        except ValueError as e:
            raise ValueError(f"{self.ckpt}: data position of process {source}: {e}") from None
        try:
            self.objective.load_shared_state(saved)
        except ValueError as e:
            raise ValueError(f"{self.ckpt}: {e}") from None
        if len(ranks) == self.info.world_size:
            set_rng_states(ranks[self.info.rank]["rng"])
        else:  # no saved process draws for this one: a seed of its own for this run, step and process
            torch.manual_seed(self.s.seed + 1 + self.info.rank + 1_000_003 * self.step)
        self.log.truncate_after(self.step)
        if self.is_main:  # said even with progress off: which checkpoint was continued is part of the result
            progress.write(f"resuming {self.ckpt} at step {self.step} of {self.total_steps}")

    def _source_process(self, ranks: list) -> int:
        """Whose saved entry (data position, random generators) this process continues from: its own;
        or, when the checkpoint was saved by another number of processes, the first's, which every
        process shares where the objective's position is global (a checkpoint of N processes resumes
        on M: the model and optimizer states are whole in it, under DDP and FSDP alike)."""
        if len(ranks) == self.info.world_size:
            return self.info.rank
        if not self.objective.position_is_global:
            raise ValueError(f"{self.ckpt}: saved by {len(ranks)} processes, resumed with {self.info.world_size}: "
                             f"each process of {self.objective.name} reads a data stream of its own, so its "
                             f"position cannot move to another process count; resume with {len(ranks)}")
        positions = [r.get("objective") if isinstance(r, dict) else None for r in ranks]
        if not positions or any(not same_data(p, positions[0]) for p in positions):
            raise ValueError(f"{self.ckpt}: its {len(ranks)} processes saved different data positions; "
                             f"resume with {len(ranks)} processes")
        return 0

    def _trained_with(self, saved_model) -> str:
        """The model a checkpoint names, in words (its config), or "another model" where that is not
        a config at all."""
        config = self.objective.config()
        try:
            return str(type(config).from_dict(saved_model))
        except Exception:  # noqa: BLE001 - a crafted entry: any config error means "not this model"
            return "another model"

    def whole_model(self) -> torch.nn.Module:
        """The model to evaluate and hand out: self.model, or under FSDP an ordinary module holding
        the whole weights (a fresh copy on every process: each process evaluates its share of the
        held-out data, and a share may take more forward passes than another's, which a sharded
        model could not, as every forward pass gathers its weights from all processes)."""
        if self.skeleton is None:
            return self.model
        return unsharded_copy(self.net, self.skeleton, self.device)

    def tflop_per_s(self) -> float | None:
        """Achieved training TFLOP/s, all processes together."""
        return None if self.flops is None else (self.flops - self.compile_flops) / max(self.train_seconds, 1e-9) / 1e12

    def units_per_s(self) -> float:
        """Training units (tokens, examples) a second, all processes together."""
        return (self.units - self.compile_units) / max(self.train_seconds, 1e-9)

    def mfu(self) -> float | None:
        """Model FLOPs utilisation: achieved FLOP/s over the devices' peak at this precision."""
        achieved = self.tflop_per_s()
        if achieved is None or self.peak_tflops is None:
            return None
        return achieved / (self.peak_tflops * self.info.world_size)

    def evaluate(self, model) -> dict | None:
        with self.autocast:
            metrics = self.objective.evaluate(model)
        if metrics is not None:
            self.log.write(self.step, "eval", **metrics)
            self.last_eval = [self.step, metrics]
            if self.is_main and self.s.progress:
                progress.write(f"step {self.step}: {self.objective.describe(metrics)}")
        return metrics


def flops_postfix(run: Run) -> dict:
    """The progress line's achieved TFLOP/s (all processes) and MFU, where known."""
    achieved, mfu = run.tflop_per_s(), run.mfu()
    return {**({"tflop_s": f"{achieved:.3g}"} if achieved is not None else {}),
            **({"mfu": f"{mfu:.1%}"} if mfu is not None else {})}


def flops_summary(run: Run) -> dict:
    achieved, mfu = run.tflop_per_s(), run.mfu()
    return {"train_flops": run.flops, "tflop_per_s": None if achieved is None else float(f"{achieved:.4g}"),
            "peak_tflop_per_s": run.peak_tflops, "mfu": None if mfu is None else float(f"{mfu:.4g}")}


def differences(saved, now) -> str:
    if not (isinstance(saved, dict) and isinstance(now, dict)):
        return "training data"
    changed = [f"{k} ({saved.get(k)!r}, now {now.get(k)!r})" for k in sorted(set(saved) | set(now))
               if k != "data" and saved.get(k) != now.get(k)]
    data = ["training data"] if saved.get("data") != now.get("data") else []
    return " and ".join(data + (["settings: " + ", ".join(changed)] if changed else []))


def autocast_context(device, dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def train_step(model, optimizer, scheduler, next_batch, grad_accum=1, grad_clip=1.0, autocast=None,
               scaler=None, loss_of=lambda model, batch: model(*batch)[1]) -> float:
    """One optimizer step over `grad_accum` micro-batches; returns their mean loss. `next_batch` is
    a function returning the next micro-batch or an iterable of them; `loss_of(model, batch)` is the
    batch's mean loss (default: a GPT called as model(x, y)).

    Each micro-batch's loss is divided by grad_accum, so the summed gradients equal those of one
    batch grad_accum times as large. Under DDP and FSDP, gradients are synchronised only on the last
    micro-batch (parallel.gradient_sync): one communication per step instead of one per micro-batch.
    Under FSDP the gradients are shards (DTensors), and clip_grad_norm_ computes the global norm
    across processes.
    """
    validate.positive_int("grad_accum", grad_accum)
    validate.nonnegative_float("grad_clip", grad_clip)  # a negative norm would flip the gradients
    batches = iter(next_batch) if not callable(next_batch) else (next_batch() for _ in range(grad_accum))
    losses = []
    for micro, batch in enumerate(batches):
        with gradient_sync(model, micro == grad_accum - 1):
            with autocast or contextlib.nullcontext():
                loss = loss_of(model, batch) / grad_accum
            (scaler.scale(loss) if scaler else loss).backward()
        losses.append(loss.detach())
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
    # the losses are read once the optimizer's work is queued: read after each backward pass, they
    # left a GPU idle while the host queued the clipping and the optimizer step (docs/models/gpt.md)
    return sum(loss.item() for loss in losses)


def fit(objective: Objective, s: RunSettings) -> dict:
    """Train (or resume) to the objective's step count, max_minutes or an early stop; write the
    checkpoint, OUT/model (objective.export), summary.json and curves.png; return the summary with
    the trained model under "model"."""
    run = Run(objective, s)
    info, start, first_step = run.info, time.perf_counter(), run.step
    bar = progress.progress_bar(total=run.total_steps, initial=run.step, unit="step", desc=objective.name,
                                enabled=run.is_main and s.progress)
    stopped_by_time, stop, last = False, None, {}
    run.net.train()
    heap = HeapBound()  # steps of varying shapes would otherwise grow the C heap step after step (memory.py)
    compiling = s.compile  # this process's first step compiles (Run.compile_seconds)
    while run.step < run.total_steps:
        lr = run.optimizer.param_groups[0]["lr"]
        tick = time.perf_counter()
        if objective.updates_itself:
            loss = sum(objective.update(run.model, batch, lr) for batch in objective.micro_batches(s.grad_accum))
            # no gradient to apply: the step tells the scheduler (and its hooks) that one was taken
            run.optimizer.step()
            run.scheduler.step()
        else:
            loss = train_step(run.step_net, run.optimizer, run.scheduler, objective.micro_batches(s.grad_accum),
                              s.grad_accum, s.grad_clip, run.autocast, run.scaler, loss_of=run.step_loss)
        heap.after_step()  # the step's tensors are freed by now; a trim's time counts in the step's
        seconds = time.perf_counter() - tick
        run.step += 1
        values, count = objective.step_stats()
        per_unit = objective.flops_per_unit(run.model)
        # one all-reduce for everything logged: [loss, the objective's values] averaged, count and FLOPs summed
        summed = sum_across(torch.tensor([loss, *values.values(), count, count * (per_unit or 0.0)],
                                         dtype=torch.float64), info)
        last = {"loss": summed[0].item() / info.world_size,
                **{k: summed[i + 1].item() / info.world_size for i, k in enumerate(values)}}
        if not math.isfinite(last["loss"]):
            raise ValueError(f"step {run.step}: the training loss is {last['loss']}; the run diverged "
                             "(try a smaller --lr)")
        units, flops = summed[-2].item(), summed[-1].item()
        run.units += units
        if per_unit is not None:
            run.flops = (run.flops or 0.0) + flops
        if compiling:  # kept out of the rates
            run.compile_seconds += seconds
            run.compile_units += units
            run.compile_flops += flops
            compiling = False
        else:
            run.train_seconds += seconds
        speed = run.units_per_s()
        timing = {f"{objective.unit}_per_s": speed} if objective.log_speed else {}
        run.log.write(run.step, "train", **last, lr=lr, **timing, **objective.log_fields())
        bar.update(1)
        bar.set_postfix(loss=f"{last['loss']:.3f}", lr=f"{lr:.2e}", **{f"{objective.unit[:3]}_s": f"{speed:,.1f}"},
                        **flops_postfix(run), refresh=False)
        out_of_time = s.max_minutes is not None and all_agree(time.perf_counter() - start > s.max_minutes * 60, info)
        if run.step % run.eval_every == 0 or out_of_time:
            run.evaluate(run.whole_model())
            stop = objective.stop_reason()
            if stop:
                break
        if out_of_time:
            stopped_by_time = run.step < run.total_steps
            break
        if run.step % run.save_every == 0 and run.step < run.total_steps:
            run.save()
    bar.close()
    if stopped_by_time or objective.keep_checkpoint:
        run.save()
    elif run.is_main and os.path.exists(run.ckpt):
        os.remove(run.ckpt)  # the run is complete: nothing to resume, and it is three times the model's size
        sharded_checkpoint.remove_unreferenced(s.out, keep=None)
    trained = run.whole_model()
    model = objective.final_model(trained)
    if run.last_eval is None or run.last_eval[0] != run.step or model is not trained:
        run.evaluate(model)
    seconds = time.perf_counter() - start
    summary = {"steps": run.step, "total_steps": run.total_steps, "stopped_by_time": stopped_by_time,
               "stopped_early": stop, "seconds": round(seconds, 1), "train_seconds": round(run.train_seconds, 1),
               objective.unit: run.units, f"{objective.unit}_per_s": round(run.units_per_s(), 1),
               **({"compile_seconds": round(run.compile_seconds, 1)} if s.compile else {}),
               "resumed_from_step": first_step if s.resume else None, "last_train": last,
               "held_out": run.last_eval[1] if run.last_eval else None,
               "parameters": sum(p.numel() for p in run.model.parameters()), "world_size": info.world_size,
               "precision": run.precision, "sharding": s.sharding if info.enabled else None, "compile": s.compile,
               "peak_rss_mb": peak_rss_mb(),  # this process's (rank 0's under torchrun)
               **flops_summary(run)}
    summary = objective.summary(summary)
    if run.is_main:
        objective.export(run, model, summary)
        from ..io import atomic_write_text
        atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2, default=str) + "\n")
        objective.curves(run.log.read(), s.out, objective.name)
    barrier(info)
    cleanup(info)
    return {**summary, "model": model}
