"""word2vec on the one engine: skip-gram or CBOW with negative sampling, an objective of fit().

A step reads the next `batch_size` words of the corpus (in-vocabulary words, in order, epoch after
epoch), subsamples them, draws each word's window and its noise words, and sums the loss over the
examples that gives (models/word2vec.py). The optimizer is plain SGD on the rows a batch touched
(SparseSGD below) and the schedule decays the rate linearly from `lr` to `min_alpha` over the
words of all epochs, as word2vec.c and gensim do. fit() supplies the rest: the progress bar in
words/s, the step and time budget, the exact resume, metrics.jsonl, curves.png and summary.json.

Where the engine's defaults do not suit word2vec, the objective says so: no gradient clipping (the
update of one example is bounded by its sigmoid), no weight decay, fp32, one process.

One difference from word2vec.c and gensim stays: they update the vectors after every example (many
threads at once without locks, "Hogwild"), where a step here sums the gradients of a batch's
examples before one update, so a frequent word gets many updates computed from the same stale
vectors. At 2,000 corpus words a step that cost 4-5 points of WordSim-353 and analogy accuracy
against gensim; at 250 (the default) the scores are gensim's within a point (docs/models/word2vec.md).
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
from .data import Vocabulary, cbow_contexts, keep_probability, noise_distribution, skipgram_pairs

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
    batch_size: int = 250      # corpus words per step (before subsampling); 2000 cost 4-5 points (docs)
    max_steps: int | None = None  # None: every word of every epoch
    grad_clip: float = 0.0
    weight_decay: float = 0.0
    eval_every: int | None = None
    precision: str = "fp32"

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "dim": v.positive_int, "window": v.positive_int, "min_count": v.positive_int,
                "sample": v.nonnegative_float, "negative": v.positive_int, "epochs": v.positive_int,
                "lr": v.positive_float, "min_alpha": v.nonnegative_float}

    def __post_init__(self):
        super().__post_init__()
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r}: choose one of {ARCHITECTURES}")
        if self.min_alpha > self.lr:
            raise ValueError(f"min_alpha {self.min_alpha} is above the starting rate lr {self.lr}")
        if self.grad_clip or self.weight_decay:
            raise ValueError("word2vec takes plain SGD steps: grad_clip and weight_decay must be 0")


class SparseSGD(torch.optim.Optimizer):
    """w -= lr * g on the rows a sparse gradient names (repeated rows add up). torch's SGD adds a
    sparse gradient into the table through a general sparse-dense add that took half of a step's
    time here; index_add_ is the same sum."""

    def __init__(self, params, lr: float):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if g.is_sparse:
                    p.index_add_(0, g._indices()[0], g._values(), alpha=-group["lr"])
                else:
                    p.add_(g, alpha=-group["lr"])


class Word2VecObjective(Objective):
    name, unit = "word2vec", "words"
    keep_checkpoint = False

    def __init__(self, s: Word2VecSettings, vocab: Vocabulary, ids: np.ndarray, sentence: np.ndarray):
        self.s, self.vocab, self.ids, self.sentence = s, vocab, ids, sentence
        self.keep = keep_probability(vocab.counts, s.sample)
        self.noise_cdf = np.cumsum(noise_distribution(vocab.counts))
        self.steps_per_epoch = math.ceil(len(ids) / s.batch_size)
        self.rng = np.random.default_rng(s.seed)
        self.position, self.words, self.examples = 0, 0, 0

    def setup(self, run):
        if run.info.world_size > 1:
            raise ValueError("word2vec trains in one process (its updates are sparse and its steps small); "
                             "run it without torchrun")
        self.device, self.run = run.device, run
        return Word2Vec(len(self.vocab.words), self.s.dim).to(run.device)

    def plan(self, s):
        total = s.max_steps or s.epochs * self.steps_per_epoch
        return total, s.eval_every or total

    def optimizer(self, model, s):
        return SparseSGD(model.parameters(), s.lr)

    def scheduler(self, optimizer, s, total_steps):
        return make_scheduler(optimizer, "linear", 0, total_steps, min_ratio=s.min_alpha / s.lr)

    def next_batch(self):
        start = (self.position % self.steps_per_epoch) * self.s.batch_size
        self.position += 1
        ids, sentence = self.ids[start:start + self.s.batch_size], self.sentence[start:start + self.s.batch_size]
        self.words += len(ids)
        kept = self.rng.random(len(ids)) < self.keep[ids]
        ids, sentence = ids[kept], sentence[kept]
        if self.s.architecture == "skipgram":
            inputs, targets = skipgram_pairs(ids, sentence, self.s.window, self.rng)
        else:
            inputs, targets = cbow_contexts(ids, sentence, self.s.window, self.rng)
        noise = np.searchsorted(self.noise_cdf, self.rng.random((len(targets), self.s.negative)) * self.noise_cdf[-1])
        self.examples += len(targets)
        return [torch.from_numpy(a).to(self.device) for a in (inputs, targets, noise)]

    def loss(self, model, batch):
        return model(*batch)

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
