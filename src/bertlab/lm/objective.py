"""The causal language-model objective (GPT): random blocks of a token stream, next-token
cross-entropy, AdamW (GPT-3's betas) with warmup + cosine, held-out loss and perplexity.
fit() does the rest (accumulation, precision, torchrun, resume, logging)."""
import contextlib
import math
import os
from dataclasses import dataclass

import torch

from .. import validate
from ..models.gpt import GPT, GPTConfig
from ..training.checkpoint import expect_fields
from ..training.distributed import DistInfo, sum_across
from ..training.engine import Objective, fit
from ..training.schedules import SCHEDULES, make_scheduler
from ..training.settings import RunSettings, optional
from .token_stream import TokenStream, eval_blocks, read_meta


@dataclass(kw_only=True)
class GPTSettings(RunSettings):
    data: str                 # folder with train.bin, val.bin, meta.json (lm.token_stream)
    model: GPTConfig
    batch_size: int = 16      # sequences per micro-batch, per process
    block_size: int = 256
    lr: float = 6e-4
    min_lr_ratio: float = 0.1
    warmup: int = 100
    schedule: str = "cosine"
    schedule_steps: int | None = None  # length of the decay; default max_steps
    weight_decay: float = 0.1
    eval_every: int = 200
    eval_tokens: int = 100_000

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "max_steps": v.positive_int, "lr": v.positive_float, "eval_every": v.positive_int,
                "block_size": v.positive_int, "min_lr_ratio": v.fraction, "eval_tokens": v.positive_int,
                "schedule_steps": optional(v.positive_int)}

    def __post_init__(self):
        super().__post_init__()
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {SCHEDULES}")
        if self.block_size > self.model.n_positions:
            raise ValueError(f"block_size {self.block_size}: more than the model's {self.model.n_positions} positions")


@torch.no_grad()
def evaluate(model, x, y, batch_size, autocast=None, info: DistInfo = DistInfo()) -> float:
    """Mean next-token loss over held-out blocks (each rank takes every world_size-th block; the
    ranks' sums and counts are added, so the mean is the one process's whatever the split)."""
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
    total, count = sum_across(torch.tensor([total, count], dtype=torch.float64), info).tolist()
    return total / max(count, 1)


class LanguageModeling(Objective):
    """Next-token prediction on random contiguous blocks of OUT's token stream."""
    name, unit = "gpt-train", "tokens"

    def __init__(self, s: GPTSettings, tokenizer=None):
        self.s, self.tokenizer = s, tokenizer

    def config(self):
        return self.s.model

    def setup(self, run):
        s, self.run = self.s, run
        # ids checked against the model's vocabulary once, here (lm.token_stream.load_tokens)
        self.stream = TokenStream(os.path.join(s.data, "train.bin"), s.block_size, s.seed, run.info.rank,
                                  run.info.world_size, vocab_size=s.model.vocab_size)
        self.val = eval_blocks(os.path.join(s.data, "val.bin"), s.block_size, s.eval_tokens, s.model.vocab_size)
        return GPT(s.model).to(run.device)

    def scheduler(self, optimizer, s, total_steps):
        return make_scheduler(optimizer, s.schedule, s.warmup, s.schedule_steps or total_steps, s.min_lr_ratio)

    def next_batch(self):
        x, y = self.stream.batch(self.s.batch_size)
        return x.to(self.run.device), y.to(self.run.device)

    def loss(self, model, batch):
        return model(*batch)[1]

    def step_stats(self):
        return {}, self.s.batch_size * self.s.block_size * self.s.grad_accum

    def context_length(self):
        return self.s.block_size

    def flops_per_unit(self, model):
        """The engine's estimate plus the output layer: tied to the token embeddings, so not among
        the non-embedding parameters, yet a (n_embd x vocab) product at every position, 6 x n_embd x
        vocab FLOPs a token (27% of GPT-2 124M's total at 1024 tokens)."""
        c = self.s.model
        return super().flops_per_unit(model) + 6 * c.n_embd * c.vocab_size

    def evaluate(self, model):
        loss = evaluate(model, *self.val, self.s.batch_size, None, self.run.info)
        return {"loss": loss, "perplexity": math.exp(loss)}

    def describe(self, metrics):
        return f"held-out loss {metrics['loss']:.4f}"

    def state_dict(self):
        return {"stream": self.stream.state_dict()}

    def load_state_dict(self, state):
        expect_fields(state, {"stream": dict}, "the language model's position")
        self.stream.load_state_dict(state["stream"])

    def summary(self, summary):
        """With the held-out perplexity, the unigram model's on the same tokens (meta.json): the
        baseline a model must beat to have learned anything beyond token frequencies."""
        tokens_per_step = self.s.batch_size * self.s.block_size * self.s.grad_accum * summary["world_size"]
        val = summary["held_out"]["loss"]
        unigram = read_meta(self.s.data)["unigram_val_perplexity"]
        return {**summary, "tokens_per_step": tokens_per_step, "train_tokens_seen": summary["steps"] * tokens_per_step,
                "last_train_loss": summary["last_train"].get("loss"), "val_loss": val, "val_perplexity": math.exp(val),
                "unigram_val_perplexity": unigram}

    def export(self, run, model, summary):
        """OUT/model in HF GPT-2 format with the tokenizer, and OUT/samples.txt (in the summary too)."""
        if self.tokenizer is not None:
            from ..interop.hf_gpt2 import save_pretrained
            save_pretrained(model, os.path.join(self.s.out, "model"), self.tokenizer)
            summary["samples"] = write_samples(model, self.tokenizer, os.path.join(self.s.out, "samples.txt"))

    def curves(self, records, out, title):
        super().curves(records, out, f"GPT {self.s.model.n_layer}L/{self.s.model.n_embd}")


def write_samples(model, tokenizer, path, prompts=("The ", "This program ", "You can ")) -> str:
    """A few sampled continuations (seeded, so a run's samples can be compared with another's), written to path."""
    from ..inference.generate import SamplingOptions, generate
    from ..io import atomic_write_text
    # the prompts that leave room for new tokens in the model's positions (a tiny block may not)
    prompts = [p for p in prompts if len(tokenizer.encode(p)) < model.config.n_positions]
    encoded = [tokenizer.encode(p) for p in prompts]
    room = model.config.n_positions - max((len(e) for e in encoded), default=0)
    options = SamplingOptions(max_new_tokens=min(80, room), do_sample=True, temperature=0.8, top_k=50)
    was_training = model.training
    outs = generate(model.eval(), encoded, options, generator=torch.Generator().manual_seed(0)) if prompts else []
    model.train(was_training)
    samples = "".join(f"--- prompt {p!r}\n{p}{tokenizer.decode(o)}\n" for p, o in zip(prompts, outs))
    atomic_write_text(path, samples)
    return samples


def report(summary: dict, out) -> str:
    """What a finished run says: its speed, held-out perplexity against the unigram baseline, where
    the model is, and its samples."""
    return (f"{summary['steps']} steps in {summary['seconds']:.0f} s ({summary['tokens_per_s']:,.0f} tokens/s); "
            f"held-out perplexity {summary['val_perplexity']:.2f} vs unigram {summary['unigram_val_perplexity']:.2f}\n"
            f"model: {os.path.join(out, 'model')}\n{summary.get('samples', '')}")


def train_gpt(s: GPTSettings, tokenizer=None) -> dict:
    """Train (or resume) to max_steps or max_minutes; returns a summary (also out/summary.json)
    with the model under "model". With the tokenizer, OUT/model is written (HF GPT-2 format) and
    OUT/samples.txt holds a few samples."""
    return fit(LanguageModeling(s, tokenizer), s)
