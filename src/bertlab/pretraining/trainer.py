"""run_pretraining.py's loop: masked-LM + next-sentence training of BertForPreTraining on shard
folders, in the notes' two phases (most steps at 128 tokens, the last fraction at 512).

BERT's optimiser settings (AdamW, or LAMB, with weight decay 0.01 except LayerNorm and biases,
eps 1e-6, linear warmup then linear decay to 0), gradient accumulation and clipping, mixed precision,
torchrun data parallelism (each rank reads its slice of every global batch), step and time budgets,
exact resume from atomic checkpoints, held-out evaluation, and the final model in HF format.
"""
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .. import progress, validate
from ..device import autocast_dtype, pick_device
from ..models import BertConfig, BertForPreTraining
from ..training.checkpoint import restore_run, rng_states, save_checkpoint, set_rng_states
from ..training.distributed import (DistInfo, all_agree, barrier, cleanup, gather_objects, rank_device,
                                    setup_distributed, sum_across)
from ..training.engine import autocast_context, train_step
from ..training.metrics import MetricsLog
from ..training.optim import make_adamw, param_groups
from ..training.schedules import make_scheduler
from .data_order import DataOrder
from .evaluation import evaluate, plot_pretraining_curves
from .lamb import Lamb
from .loss import pretraining_loss
from .shards import PretrainingData

# BERT-tiny and BERT-small of Turc et al. (2019), the sizes the issue benchmarks; BERT-base of the paper.
PRESETS = {"tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512),
           "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024),
           "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)}
OPTIMIZERS = ("adamw", "lamb")


def preset_config(name: str, vocab_size: int, **overrides) -> BertConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return BertConfig(**{**PRESETS[name], "vocab_size": vocab_size, **overrides})


@dataclass
class PretrainSettings:
    data: str                          # phase-1 shard folder (create-pretraining-data, e.g. 128 tokens)
    out: str                           # checkpoint.pt, metrics.jsonl, curves.png, summary.json, model/
    model: BertConfig
    data_512: str | None = None        # phase-2 shard folder (512 tokens), read for the last steps
    phase2_fraction: float = 0.1
    eval_data: str | None = None       # shards built from held-out documents
    init_from: str | None = None       # HF-format BERT folder whose weights start the run
    batch_size: int = 32               # instances per micro-batch, per process
    phase2_batch_size: int | None = None
    grad_accum: int = 1
    optimizer: str = "adamw"
    lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    max_steps: int = 1000
    max_minutes: float | None = None
    eval_every: int = 500
    eval_instances: int | None = None  # held-out instances evaluated (default all)
    save_every: int = 500
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    resume: bool = False
    progress: bool = True

    def __post_init__(self):
        v = validate
        optional = lambda check: lambda name, value: check(name, value, optional=True)  # noqa: E731
        v.check_fields(self, {
            "batch_size": v.positive_int, "grad_accum": v.positive_int, "max_steps": v.positive_int,
            "eval_every": v.positive_int, "save_every": v.positive_int, "warmup": v.nonnegative_int,
            "seed": v.nonnegative_int, "lr": v.nonnegative_float, "weight_decay": v.nonnegative_float,
            "grad_clip": v.nonnegative_float, "phase2_fraction": v.fraction,
            "phase2_batch_size": optional(v.positive_int), "eval_instances": optional(v.positive_int),
            # lr 0 and a budget of 0 minutes (one step) are a frozen run and a smoke test, not mistakes
            "max_minutes": optional(v.nonnegative_float)})
        if self.phase2_fraction == 1:  # phase 1 would get no steps: train on --data-512 alone instead
            raise ValueError("phase2_fraction 1.0: must be less than 1 (the share of steps read from data_512)")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {OPTIMIZERS}")


def make_optimizer(model, name: str, lr: float, weight_decay: float):
    """BERT's AdamW (eps 1e-6, betas 0.9/0.999) or LAMB, neither decaying LayerNorm or biases."""
    if name == "adamw":
        return make_adamw(model, lr, weight_decay, betas=(0.9, 0.999), eps=1e-6)
    if name == "lamb":
        return Lamb(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.999), eps=1e-6)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


def open_shards(folder, what: str) -> PretrainingData:
    """The shard folder given as `what` (a flag), its files checked; vocab.txt now, not after training."""
    if not os.path.isdir(folder):
        if os.path.exists(folder):
            raise NotADirectoryError(f"{what} {folder}: is a file; give the folder create-pretraining-data wrote")
        raise FileNotFoundError(f"{what} {folder}: no such folder")
    data = PretrainingData(folder)
    data.vocab  # noqa: B018
    return data


def open_data(folder, config: BertConfig, what: str) -> PretrainingData:
    """The shard folder, checked against the model: same vocabulary size, positions enough."""
    data = open_shards(folder, what)
    meta = data.meta
    if meta["vocab_size"] != config.vocab_size:
        raise ValueError(f"{what} {folder}: its instances use a {meta['vocab_size']}-token vocabulary but the "
                         f"model has vocab_size={config.vocab_size}; train with the vocabulary the data was made with")
    if meta["max_seq_length"] > config.max_position_embeddings:
        raise ValueError(f"{what} {folder}: instances of {meta['max_seq_length']} tokens exceed the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    return data


class DynamicMasks:
    """Mask functions for a folder written with dynamic masking (RoBERTa): a fresh draw per batch,
    seeded by the batch's data position so that a resumed run draws the masks it would have drawn."""

    def __init__(self, data: PretrainingData):
        self.vocab = data.vocab
        settings = data.meta.get("settings", {})
        self.prob, self.whole_word = settings.get("masked_lm_prob", 0.15), settings.get("do_whole_word_mask", False)
        self.max_predictions = data.meta["max_predictions_per_seq"]

    def __call__(self, *position: int):
        from .masking import make_mask_fn
        seed = int(np.random.SeedSequence(list(position)).generate_state(1)[0])
        return make_mask_fn(self.vocab, self.prob, self.max_predictions, self.whole_word, seed)


class Phase:
    """One stretch of the schedule, steps [first, last), read from one shard folder."""

    def __init__(self, number: int, data: PretrainingData, first: int, last: int, batch_size: int, seed: int,
                 info: DistInfo, device):
        self.number, self.data, self.first, self.last, self.device = number, data, first, last, device
        self.seed, self.rank, self.nsp = seed, info.rank, data.meta["nsp"]
        self.order = DataOrder(len(data), batch_size, seed + 1000 * number, info.rank, info.world_size)
        self.parts, self.tokens = [], 0
        self.masks = DynamicMasks(data) if data.dynamic else None

    def next_batch(self) -> dict:
        indices = self.order.next_indices()
        mask_fn = self.masks(self.seed, self.number, self.order.epoch, self.order.index, self.rank) \
            if self.masks else None
        batch = self.data.batch(indices, mask_fn)
        self.tokens += int(batch["attention_mask"].sum())  # real tokens, counted before any device copy
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    def loss_of(self, model, batch):
        loss, parts = pretraining_loss(model, batch, self.nsp)
        self.parts.append(parts)
        return loss

    def take_stats(self) -> torch.Tensor:
        """[mlm_loss, nsp_loss, real tokens] of the micro-batches since the last call (losses averaged)."""
        k = len(self.parts)
        mlm = sum(p["mlm_loss"] for p in self.parts) / k
        nsp = sum(p["nsp_loss"] for p in self.parts) / k if self.nsp else torch.zeros(())
        out = torch.tensor([float(mlm), float(nsp), self.tokens], dtype=torch.float64)
        self.parts, self.tokens = [], 0
        return out


class _Run:
    """The state of one pretraining run, so the loop below reads as the algorithm."""

    def __init__(self, s: PretrainSettings):
        self.s = s
        device = pick_device(s.device)
        self.dtype = autocast_dtype(s.precision, device)  # fp16 on a CPU fails here, before any work
        self.info = setup_distributed(device)
        self.device = rank_device(device, self.info)
        self.phases = self._phases()
        self.eval_data = open_data(s.eval_data, s.model, "--eval-data") if s.eval_data else None
        if self.eval_data is not None:
            _check_same_vocab(self.phases[0].data, self.eval_data)
        self.eval_masks = DynamicMasks(self.eval_data) if self.eval_data is not None and self.eval_data.dynamic else None
        torch.manual_seed(s.seed)  # the same initial weights on every rank
        self.model = BertForPreTraining(s.model).to(self.device)
        if s.init_from:
            self._init_from(s.init_from)
        self.optimizer = make_optimizer(self.model, s.optimizer, s.lr, s.weight_decay)
        self.scheduler = make_scheduler(self.optimizer, "linear", s.warmup, s.max_steps, min_ratio=0.0)
        self.scaler = torch.amp.GradScaler() if self.dtype is torch.float16 else None
        self.log = MetricsLog(os.path.join(s.out, "metrics.jsonl"), self.info.is_main)
        self.ckpt = os.path.join(s.out, "checkpoint.pt")
        self.step, self.last_eval = 0, None
        torch.manual_seed(s.seed + 1 + self.info.rank)  # dropout differs per rank
        if s.resume and os.path.exists(self.ckpt):
            self._restore()
        else:
            self.log.truncate_after(-1)  # a fresh run in a used folder starts a fresh log
        self.net = self.model
        if self.info.enabled:
            from torch.nn.parallel import DistributedDataParallel
            self.net = DistributedDataParallel(
                self.model, device_ids=[self.device] if self.device.type == "cuda" else None,
                find_unused_parameters=not all(p.nsp for p in self.phases))  # MLM only: NSP head unused

    def _phases(self) -> list[Phase]:
        s = self.s
        first = open_data(s.data, s.model, "--data")
        if not s.data_512 or s.phase2_fraction == 0:
            return [Phase(1, first, 0, s.max_steps, s.batch_size, s.seed, self.info, self.device)]
        second = open_data(s.data_512, s.model, "--data-512")
        _check_same_vocab(first, second)
        switch = s.max_steps - max(1, round(s.max_steps * s.phase2_fraction))
        return [Phase(1, first, 0, switch, s.batch_size, s.seed, self.info, self.device),
                Phase(2, second, switch, s.max_steps, s.phase2_batch_size or s.batch_size, s.seed, self.info,
                      self.device)]

    def _init_from(self, folder):
        from ..interop.folder import read_state_dict
        from ..interop.hf_bert import init_from_state_dict
        report = init_from_state_dict(self.model, read_state_dict(folder))
        if report.mismatched:
            raise ValueError(f"--init-from {folder}: " + str(report))
        if self.info.is_main:
            print(f"--init-from {folder}: {report}", file=sys.stderr)

    def phase(self) -> Phase:
        return next(p for p in self.phases if p.first <= self.step < p.last)

    def _restore(self):
        state = restore_run(self.ckpt, self.s.model, model=self.model, optimizer=self.optimizer,
                            scheduler=self.scheduler, restore_rng=False)
        if self.scaler and state["extra"].get("scaler"):
            self.scaler.load_state_dict(state["extra"]["scaler"])
        ranks = state["data"]
        if len(ranks) != self.info.world_size:
            raise ValueError(f"{self.ckpt}: saved by {len(ranks)} processes, resumed with {self.info.world_size}")
        mine = ranks[self.info.rank]
        if len(mine["orders"]) != len(self.phases):
            raise ValueError(f"{self.ckpt}: saved with {len(mine['orders'])} data phase(s), resumed with "
                             f"{len(self.phases)}; give the same --data/--data-512")
        for phase, order in zip(self.phases, mine["orders"]):
            phase.order.load_state_dict(order)
        set_rng_states(mine["rng"])
        self.step = state["step"]
        self.log.truncate_after(self.step)

    def save(self):
        ranks = gather_objects({"orders": [p.order.state_dict() for p in self.phases], "rng": rng_states()}, self.info)
        if self.info.is_main:
            extra = {"model": self.s.model.to_dict(hf=False), "settings": _settings_dict(self.s)}
            if self.scaler:
                extra["scaler"] = self.scaler.state_dict()
            save_checkpoint(self.ckpt, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
                            step=self.step, data_state=ranks, extra=extra)
        barrier(self.info)

    def evaluate(self) -> dict:
        masks = self.eval_masks
        metrics = evaluate(self.model, self.eval_data, self.phases[0].order.batch_size, self.device,
                           autocast_context(self.device, self.dtype), self.info, self.s.eval_instances,
                           masks and (lambda i: masks(self.s.seed, 0, i, self.info.rank)))
        self.log.write(self.step, "eval", **metrics)
        self.last_eval = (self.step, metrics)
        return metrics


def _check_same_vocab(a: PretrainingData, b: PretrainingData):
    if a.vocab.id_to_token != b.vocab.id_to_token:
        raise ValueError(f"{a.folder} and {b.folder} were made with different vocabularies (vocab.txt differs)")


def _settings_dict(s: PretrainSettings) -> dict:
    d = asdict(s)
    d["model"] = s.model.to_dict(hf=False)
    return d


def _describe(metrics: dict) -> str:
    text = f"held-out MLM loss {metrics['mlm_loss']:.3f}, accuracy {metrics['mlm_accuracy']:.3f}"
    if "nsp_loss" in metrics:
        text += f"; NSP loss {metrics['nsp_loss']:.3f}, accuracy {metrics['nsp_accuracy']:.3f}"
    return text


def train_pretraining(s: PretrainSettings) -> dict:
    """Train (or resume) to max_steps or max_minutes, then write OUT/model (HF format) and
    OUT/summary.json; returns the summary with the model under "model"."""
    run = _Run(s)
    info, start = run.info, time.time()
    bar = progress.progress_bar(total=s.max_steps, initial=run.step, unit="step", desc="pretrain",
                                enabled=info.is_main and s.progress)
    autocast, stopped_early, tokens, last = autocast_context(run.device, run.dtype), False, 0.0, {}
    run.net.train()
    while run.step < s.max_steps:
        phase, lr = run.phase(), run.optimizer.param_groups[0]["lr"]
        loss = train_step(run.net, run.optimizer, run.scheduler, phase.next_batch, s.grad_accum, s.grad_clip,
                          autocast, run.scaler, loss_of=phase.loss_of)
        run.step += 1
        # one all-reduce for everything logged: [total, MLM, NSP loss summed over ranks, real tokens]
        stats = sum_across(torch.cat([torch.tensor([loss], dtype=torch.float64), phase.take_stats()]), info)
        tokens += stats[3].item()
        elapsed = time.time() - start
        last = {"loss": stats[0].item() / info.world_size, "mlm_loss": stats[1].item() / info.world_size}
        if phase.nsp:
            last["nsp_loss"] = stats[2].item() / info.world_size
        run.log.write(run.step, "train", **last, lr=lr, tokens_per_s=tokens / elapsed, phase=phase.number)
        bar.update(1)
        bar.set_postfix(loss=f"{last['loss']:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens / elapsed:,.0f}", refresh=False)
        if run.eval_data is not None and run.step % s.eval_every == 0:
            metrics = run.evaluate()
            if info.is_main:
                progress.write(f"step {run.step}: {_describe(metrics)}")
        if run.step % s.save_every == 0:
            run.save()
        if s.max_minutes is not None and all_agree(elapsed > s.max_minutes * 60, info):
            stopped_early = run.step < s.max_steps
            break
    bar.close()
    seconds = time.time() - start
    run.save()
    held_out = None
    if run.eval_data is not None:
        held_out = run.last_eval[1] if run.last_eval and run.last_eval[0] == run.step else run.evaluate()
    summary = {"steps": run.step, "stopped_by_time": stopped_early, "seconds": round(seconds, 1),
               "real_tokens": int(tokens), "tokens_per_s": round(tokens / max(seconds, 1e-9), 1),
               "last_train": last, "held_out": held_out, "parameters": sum(p.numel() for p in run.model.parameters()),
               "world_size": info.world_size}
    if info.is_main:
        _finish(run, summary)
    barrier(info)
    cleanup(info)
    return {**summary, "model": run.model}


def _finish(run: _Run, summary: dict):
    """OUT/model in HF format, summary.json, curves.png."""
    from ..interop.hf_bert import save_pretrained
    from ..io import atomic_write_text
    s = run.s
    save_pretrained(run.model, os.path.join(s.out, "model"), _tokenizer(run.phases[0].data))
    atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2) + "\n")
    c = s.model
    plot_pretraining_curves(run.log.read(), os.path.join(s.out, "curves.png"),
                            title=f"BERT L{c.num_hidden_layers}/H{c.hidden_size}, {s.optimizer}")


def _tokenizer(data: PretrainingData):
    """The tokenizer the data was made with: its vocab.txt and the casing it recorded (or that the
    vocabulary implies), saved beside the model so the folder is complete."""
    from ..interop.pretrained import checkpoint_casing
    from ..tokenization import BertTokenizer
    vocab = data.vocab
    lower = data.meta.get("settings", {}).get("do_lower_case")
    if lower is None:
        lower = checkpoint_casing(data.folder, vocab)[0]
    return BertTokenizer(vocab, do_lower_case=bool(lower))

