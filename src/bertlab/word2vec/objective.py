"""word2vec on the one engine: skip-gram or CBOW with negative sampling, an objective of fit().

A step reads the next `batch_size` words of the corpus (in-vocabulary words, in order, epoch after
epoch) and trains on them with word2vec.c's and gensim's algorithm: subsampling, a reduced window
per word, k noise words per example and one SGD update per example, made in place by the compiled
loop of kernels.py (the update is autograd's SGD step on models/word2vec.py's loss, one example at a
time). The rate decays linearly from `lr` to `min_alpha` over the steps of all epochs, step by step
as gensim decays it job by job (its jobs hold 10,000 words, our default step). fit() supplies the
rest: the progress bar in words/s, the step and time budget, the exact resume, metrics.jsonl,
curves.png and summary.json.

The step is not loss() + backward + an optimizer (Objective.updates_itself): summed over a batch,
the gradients of a frequent word's many examples are all computed from the same stale vector, which
cost 4-5 points of WordSim-353 and analogy accuracy against gensim at 2,000 words a step, and small
batches through autograd ran at a quarter of gensim's speed (docs/models/word2vec.md). Where the
engine's defaults do not suit word2vec, the objective says so: no gradient clipping, no weight
decay, fp32, one process, the CPU (`workers` threads share the tables without locks, as gensim's do).
"""
import hashlib
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from .. import validate
from ..inference.word_vectors import save_word2vec
from ..models.word2vec import Word2Vec
from ..training.checkpoint import check_count, expect_fields, set_bit_generator_state
from ..training.engine import Objective
from ..training.schedules import make_scheduler
from ..training.settings import RunSettings
from . import kernels
from .data import Vocabulary, keep_probability, noise_distribution

ARCHITECTURES = ("skipgram", "cbow")


@dataclass(kw_only=True)
class Word2VecSettings(RunSettings):
    """gensim's defaults (which are word2vec.c's but for CBOW's rate); batch_size counts corpus words."""
    architecture: str = "skipgram"
    dim: int = 100
    window: int = 5
    min_count: int = 5
    sample: float = 1e-3       # subsampling threshold t; 0: none
    negative: int = 5          # noise words per example
    epochs: int = 5
    lr: float = 0.025          # word2vec's alpha at the start
    min_alpha: float = 0.0001  # ... and at the end
    lowercase: bool = False
    batch_size: int = 10_000   # corpus words per step (before subsampling): gensim's batch_words
    workers: int = 1           # threads; above 1 they share the tables without locks (gensim's workers),
                               # faster but no longer repeatable bit for bit
    max_steps: int | None = None  # None: every word of every epoch
    grad_clip: float = 0.0
    weight_decay: float = 0.0
    eval_every: int | None = None
    precision: str = "fp32"
    device: str = "cpu"        # the compiled loop runs on the CPU

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "dim": v.positive_int, "window": v.positive_int, "min_count": v.positive_int,
                "sample": v.nonnegative_float, "negative": v.positive_int, "epochs": v.positive_int,
                "lr": v.positive_float, "min_alpha": v.nonnegative_float, "workers": v.positive_int}

    def __post_init__(self):
        super().__post_init__()
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r}: choose one of {ARCHITECTURES}")
        if self.min_alpha > self.lr:
            raise ValueError(f"min_alpha {self.min_alpha} is above the starting rate lr {self.lr}")
        if self.grad_clip or self.weight_decay:
            raise ValueError("word2vec takes plain SGD steps: grad_clip and weight_decay must be 0")
        if self.workers > kernels.most_workers():
            raise ValueError(f"workers {self.workers}: this machine runs at most {kernels.most_workers()} at once "
                             "(its CPU cores; NUMBA_NUM_THREADS sets another limit)")


class Word2VecObjective(Objective):
    name, unit = "word2vec", "words"
    keep_checkpoint = False
    updates_itself = True

    def __init__(self, s: Word2VecSettings, vocab: Vocabulary, ids: np.ndarray, sentence: np.ndarray):
        self.s, self.vocab, self.ids, self.sentence = s, vocab, ids, sentence
        self.keep = keep_probability(vocab.counts, s.sample)
        self.noise = kernels.alias_table(noise_distribution(vocab.counts))
        self.steps_per_epoch = math.ceil(len(ids) / s.batch_size)
        self.rng = np.random.default_rng(s.seed)
        self.position, self.words, self.examples = 0, 0, 0

    def setup(self, run):
        if run.info.world_size > 1:
            raise ValueError("word2vec trains in one process (its updates are sparse and its steps small); "
                             "run it without torchrun")
        if run.device.type != "cpu":
            raise ValueError(f"word2vec trains on the CPU (one update per example, compiled, as word2vec.c and "
                             f"gensim make them); --device {run.device.type} is not supported: use --device cpu "
                             "and --workers for more cores")
        self.run = run
        return Word2Vec(len(self.vocab.words), self.s.dim)

    def plan(self, s):
        total = s.max_steps or s.epochs * self.steps_per_epoch
        return total, s.eval_every or total

    def optimizer(self, model, s):
        # holds the rate the schedule decays; update() applies it (its step() is never called)
        return torch.optim.SGD(model.parameters(), lr=s.lr)

    def scheduler(self, optimizer, s, total_steps):
        return make_scheduler(optimizer, "linear", 0, total_steps, min_ratio=s.min_alpha / s.lr)

    def next_batch(self):
        """The next `batch_size` corpus words (ids, sentence numbers) and the step's seeds: one for
        the subsampling and windows, one per worker for its noise words."""
        start = (self.position % self.steps_per_epoch) * self.s.batch_size
        self.position += 1
        ids, sentence = self.ids[start:start + self.s.batch_size], self.sentence[start:start + self.s.batch_size]
        self.words += len(ids)
        seeds = self.rng.integers(0, 2**48, size=1 + self.s.workers, dtype=np.uint64)
        return ids, sentence, seeds

    def update(self, model, batch, lr):
        ids, sentence, seeds = batch
        with torch.no_grad():
            loss, examples = kernels.train_chunk(
                model.input_vectors.weight.detach().numpy(), model.output_vectors.weight.detach().numpy(), ids, sentence,
                self.keep, self.noise, self.s.architecture, self.s.window, self.s.negative, lr, seeds)
        self.examples += examples
        return loss

    def step_stats(self):
        examples, words = self.examples, self.words
        self.examples = self.words = 0
        # the logged loss is the batch's sum; per example it reads across batches of any size
        return {"examples": float(examples)}, float(words)

    def log_fields(self):
        return {"epoch": self.position / self.steps_per_epoch}

    def describe(self, metrics):
        return ""

    def state_dict(self):
        return {"position": self.position, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        expect_fields(state, {"position": int, "rng": dict}, "the word2vec position")
        # every micro-batch reads the next batch of words: a position is the micro-batches so far
        self.position = check_count(state["position"], "the word2vec position", whole=True,
                                    most=self.run.step * self.s.grad_accum)
        set_bit_generator_state(self.rng, state["rng"], "the word2vec generator")

    def identity(self):
        settings = {k: v for k, v in self.s.to_dict().items()
                    if k not in ("out", "max_minutes", "save_every", "device", "progress", "resume")}
        data = hashlib.sha256(self.vocab.fingerprint().encode() + self.ids.tobytes()).hexdigest()
        return {**settings, "data": data}

    def export(self, run, model, summary):
        save_word2vec(os.path.join(self.s.out, "vectors.txt"), self.vocab.words,
                      model.input_vectors.weight.detach().float().cpu().numpy())

    def summary(self, summary):
        return {**summary, "vocabulary": len(self.vocab.words), "corpus_words": int(len(self.ids)),
                "vectors": os.path.join(self.s.out, "vectors.txt"), "settings": self.s.to_dict()}
