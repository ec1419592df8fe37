"""run_pretraining.py's objective on the engine: masked-LM + next-sentence training of
BertForPreTraining on shard folders, in the notes' two phases (most steps at 128 tokens, the last
fraction at 512), each with its own folder and batch size.

The objective owns BERT's choices: the phases and their data order (each rank reads its slice of
every global batch), dynamic masks, --init-from, AdamW or LAMB (weight decay 0.01 except LayerNorm
and biases, eps 1e-6), held-out evaluation, per-step MLM/NSP losses, the real (unpadded) tokens it
counts and the final model in HF format. fit() owns the loop: accumulation, clipping, the linear
warmup/decay schedule, precision, torchrun, budgets, exact resume, metrics and summary.
"""
import dataclasses
import os
import sys
from dataclasses import dataclass

import numpy as np

from .. import validate
from ..models import AlbertConfig, AlbertForPreTraining, BertConfig, BertForPreTraining, ModernBertConfig
from ..models.albert_config import ALBERT_PRESETS, albert_preset
from ..models.modernbert_config import MODERNBERT_PRESETS, modernbert_preset
from ..models.losses import pretraining_loss
from ..models.modernbert import ModernBertForPreTraining, set_global_rope_theta
from ..models.span_boundary import BertForSpanBoundaryPreTraining
from ..training.checkpoint import expect_fields
from ..training.data_order import DataOrder
from ..training.engine import Objective, fit
from ..training.lamb import Lamb
from ..training.optim import make_adamw, param_groups
from ..training.settings import RunSettings, optional
from .evaluation import evaluate, most_frequent_token_baseline, plot_pretraining_curves
from .shards import PretrainingData

# BERT-tiny and BERT-small of Turc et al. (2019), the sizes the issue benchmarks; BERT-base of the paper.
PRESETS = {"tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512),
           "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024),
           "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)}
OPTIMIZERS = ("adamw", "lamb")


def preset_config(name: str, vocab_size: int, vocab=None, **overrides) -> BertConfig | ModernBertConfig:
    """A BERT preset (PRESETS), an ALBERT one (models.albert_config.ALBERT_PRESETS: an AlbertConfig)
    or a ModernBERT one (models.modernbert_config.MODERNBERT_PRESETS: a ModernBertConfig, whose
    special token ids come from `vocab`, the data's tokenization.Vocab)."""
    if name in ALBERT_PRESETS:
        return albert_preset(name, vocab_size=vocab_size, **overrides)
    if name in MODERNBERT_PRESETS:
        if vocab is None or len(vocab) != vocab_size:
            raise ValueError(f"preset {name}: give the vocabulary of {vocab_size} tokens (its special token ids)")
        return dataclasses.replace(modernbert_preset(name, vocab), **overrides)
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {preset_names()}")
    return BertConfig(**{**PRESETS[name], "vocab_size": vocab_size, **overrides})


def preset_names() -> list[str]:
    return sorted(PRESETS) + sorted(ALBERT_PRESETS) + sorted(MODERNBERT_PRESETS)


def is_albert(config: BertConfig) -> bool:
    return isinstance(config, AlbertConfig)


def is_modernbert(config) -> bool:
    return isinstance(config, ModernBertConfig)


@dataclass(kw_only=True)
class PretrainSettings(RunSettings):
    """The shared run settings (batch_size: instances per micro-batch, per process) and pretraining's own."""
    data: str                          # phase-1 shard folder (create-pretraining-data, e.g. 128 tokens)
    model: BertConfig
    data_512: str | None = None        # phase-2 shard folder (512 tokens), read for the last steps
    phase2_fraction: float = 0.1
    phase2_batch_size: int | None = None
    eval_data: str | None = None       # shards built from held-out documents
    eval_instances: int | None = None  # held-out instances evaluated (default all)
    init_from: str | None = None       # HF-format BERT folder whose weights start the run
    optimizer: str = "adamw"
    span_boundary: bool = False        # SpanBERT's span-boundary objective (data made with --masking span)
    phase2_rope_theta: float | None = None  # ModernBERT: the global layers' rotary base from phase 2 on
    warmup: int = 100
    save_every: int = 500

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "max_steps": v.positive_int, "eval_every": v.positive_int,
                "save_every": v.positive_int, "phase2_fraction": v.fraction,
                "phase2_batch_size": optional(v.positive_int), "eval_instances": optional(v.positive_int),
                "phase2_rope_theta": optional(v.positive_float)}

    def __post_init__(self):
        super().__post_init__()
        if self.phase2_fraction == 1:  # phase 1 would get no steps: train on --data-512 alone instead
            raise ValueError("phase2_fraction 1.0: must be less than 1 (the share of steps read from data_512)")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {OPTIMIZERS}")
        if self.phase2_rope_theta is not None and not is_modernbert(self.model):
            raise ValueError("phase2_rope_theta is the rotary base of ModernBERT's long-context phase; "
                             f"this model is a {type(self.model).__name__} (choose a modernbert preset)")


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
    positions = getattr(config, "position_embedding_type", "rotary")
    if meta["max_seq_length"] > config.max_position_embeddings and positions != "nezha":
        raise ValueError(f"{what} {folder}: instances of {meta['max_seq_length']} tokens exceed the model's "
                         f"max_position_embeddings={config.max_position_embeddings} (position_embedding_type "
                         f"{positions}; nezha has no such limit)")
    if is_modernbert(config) and meta["nsp"]:
        raise ValueError(f"{what} {folder}: holds sentence pairs for a next-sentence (or sentence-order) task, "
                         "which ModernBERT does not train; make the data with `bertlab create-pretraining-data "
                         "--recipe modernbert` (or --mode full-sentences)")
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
                 run):
        self.number, self.data, self.first, self.last, self.device = number, data, first, last, run.device
        self.seed, self.rank, self.nsp = seed, run.info.rank, data.meta["nsp"]
        self.order = DataOrder(len(data), batch_size, seed + 1000 * number, run.info.rank, run.info.world_size)
        self.masks = DynamicMasks(data) if data.dynamic else None

    def next_batch(self) -> tuple[dict, int]:
        """(the next micro-batch on the device, its real tokens)."""
        indices = self.order.next_indices()
        mask_fn = self.masks(self.seed, self.number, self.order.epoch, self.order.index, self.rank) \
            if self.masks else None
        batch = self.data.batch(indices, mask_fn)
        tokens = int(batch["attention_mask"].sum())  # real tokens, counted before any device copy
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}, tokens


class MaskedLMPretraining(Objective):
    """Masked LM (+ next sentence where the data has it) on the phases' shard folders; an
    AlbertConfig model trains ALBERT (AlbertForPreTraining: its pair head predicts sentence order,
    so give it data made with --mode sop)."""
    name, unit = "pretrain", "tokens"
    compile_whole_loss = True  # tests/test_pretraining_train.py: one graph, no break, no recompilation
    position_is_global = True  # one sequence of batches shared out: resumes with another process count

    def __init__(self, s: PretrainSettings):
        self.s = s

    def config(self):
        return self.s.model

    def setup(self, run):
        s, self.run = self.s, run
        self.phases = self._phases()
        self.eval_data, self.eval_masks, self.baseline = None, None, None
        if s.eval_data:
            self.eval_data = open_data(s.eval_data, s.model, "--eval-data")
            _check_same_vocab(self.phases[0].data, self.eval_data)
            self.eval_masks = DynamicMasks(self.eval_data) if self.eval_data.dynamic else None
            self.baseline = most_frequent_token_baseline(self.phases[0].data, self.eval_data, s.eval_instances)
        # MLM only: a BERT's NSP head gets no gradient (ModernBERT has none)
        self.find_unused_parameters = not is_modernbert(s.model) and not all(p.nsp for p in self.phases)
        self.current, self.parts, self.tokens = self.phases[0], [], 0
        return self.build_model().to(run.device)

    def build_model(self):
        """BertForPreTraining (ALBERT's, ModernBERT's masked LM, or BERT with SpanBERT's span-boundary
        head), from --init-from's weights where given (ELECTRA builds its pair instead)."""
        s = self.s
        if is_modernbert(s.model):
            if s.span_boundary:
                raise ValueError("--span-boundary adds SpanBERT's head to a BERT model; ModernBERT has none")
            model = ModernBertForPreTraining(s.model)
        elif s.span_boundary:
            if is_albert(s.model):
                raise ValueError("--span-boundary adds SpanBERT's head to a BERT model; ALBERT has none")
            for phase in self.phases:
                if not phase.data.span_boundaries:
                    raise ValueError(f"{phase.data.folder}: holds no span boundaries; the span-boundary objective "
                                     "needs data made by create-pretraining-data --masking span (or ernie)")
            model = BertForSpanBoundaryPreTraining(s.model)
        else:
            model = (AlbertForPreTraining if is_albert(s.model) else BertForPreTraining)(s.model)
        if s.init_from:
            self._init_from(model.pretraining if s.span_boundary else model, s.init_from)
        return model

    def _phases(self) -> list[Phase]:
        s, run = self.s, self.run
        first = open_data(s.data, s.model, "--data")
        if not s.data_512 or s.phase2_fraction == 0:
            return [Phase(1, first, 0, s.max_steps, s.batch_size, s.seed, run)]
        second = open_data(s.data_512, s.model, "--data-512")
        _check_same_vocab(first, second)
        switch = phase_switch(s.max_steps, s.phase2_fraction)
        return [Phase(1, first, 0, switch, s.batch_size, s.seed, run),
                Phase(2, second, switch, s.max_steps, s.phase2_batch_size or s.batch_size, s.seed, run)]

    def _init_from(self, model, folder):
        from ..interop.folder import read_state_dict
        from ..interop.hf_albert import load_albert_state
        from ..interop.hf_bert import init_from_state_dict
        from ..interop.hf_modernbert import load_state
        state = read_state_dict(folder)
        if is_modernbert(self.s.model):
            report = load_state(model, state, folder)
        elif is_albert(self.s.model):
            report = load_albert_state(model, state, folder, strict=False)
        else:
            report = init_from_state_dict(model, state)
        if report.mismatched:
            raise ValueError(f"--init-from {folder}: " + str(report))
        if self.run.is_main:
            print(f"--init-from {folder}: {report}", file=sys.stderr)

    def optimizer(self, model, s):
        return make_optimizer(model, s.optimizer, s.lr, s.weight_decay)

    def micro_batches(self, k):
        self.current = next(p for p in self.phases if p.first <= self.run.step < p.last)
        theta = self.s.phase2_rope_theta
        if theta and self.current.number == 2 and self.run.model.config.rope_theta(True) != theta:
            set_global_rope_theta(self.run.model, theta)  # the long-context phase (on resume, too)
        return super().micro_batches(k)

    def next_batch(self):
        batch, tokens = self.current.next_batch()
        self.tokens += tokens
        return batch

    def loss(self, model, batch):
        loss, parts = pretraining_loss(model, batch, self.current.nsp, span_boundary=self.s.span_boundary)
        self.parts.append(parts)
        return loss

    def step_stats(self):
        """The step's MLM (and NSP) loss, averaged over its micro-batches, and its real tokens."""
        k, parts = len(self.parts), self.parts
        values = {"mlm_loss": float(sum(p["mlm_loss"] for p in parts) / k)}
        if self.s.span_boundary:
            values["sbo_loss"] = float(sum(p["sbo_loss"] for p in parts) / k)
        if self.current.nsp:
            values["nsp_loss"] = float(sum(p["nsp_loss"] for p in parts) / k)
        tokens, self.parts, self.tokens = self.tokens, [], 0
        return values, tokens

    def log_fields(self):
        return {"phase": self.current.number}

    def context_length(self):
        return self.current.data.meta["max_seq_length"]  # an upper bound: packing skips the padding

    def flops_per_unit(self, model):
        """The engine's 6N estimate counts a shared layer once; ALBERT runs it
        num_hidden_layers / num_hidden_groups times, so the repeats are added."""
        from ..training.flops import transformer_flops_per_token
        c, flops = self.s.model, super().flops_per_unit(model)
        repeats = c.num_hidden_layers / (getattr(c, "num_hidden_groups", None) or c.num_hidden_layers) - 1
        if flops is None or not repeats:
            return flops
        return flops + repeats * transformer_flops_per_token(model.bert.layers, self.context_length())

    def evaluate(self, model):
        if self.eval_data is None:
            return None
        s, info, masks = self.s, self.run.info, self.eval_masks
        return evaluate(model, self.eval_data, s.batch_size, self.run.device, None, info,
                        s.eval_instances, masks and (lambda i: masks(s.seed, 0, i, info.rank)))

    def describe(self, metrics):
        text = f"held-out MLM loss {metrics['mlm_loss']:.3f}, accuracy {metrics['mlm_accuracy']:.3f}"
        if self.baseline:
            text += f" (always {self.baseline['token']!r}: {self.baseline['mlm_accuracy']:.3f})"
        if "nsp_loss" in metrics:
            task = "SOP" if self._pair_task() == "sop" else "NSP"
            text += f"; {task} loss {metrics['nsp_loss']:.3f}, accuracy {metrics['nsp_accuracy']:.3f}"
        return text

    def state_dict(self):
        return {"orders": [p.order.state_dict() for p in self.phases]}

    def load_state_dict(self, state):
        expect_fields(state, {"orders": list}, "the pretraining position")
        if len(state["orders"]) != len(self.phases):  # zip would leave a phase at its start
            raise ValueError(f"{len(state['orders'])} data orders, but this run has {len(self.phases)} phases")
        for number, (phase, order) in enumerate(zip(self.phases, state["orders"]), 1):
            try:
                phase.order.load_state_dict(order)
            except ValueError as e:
                raise ValueError(f"phase {number}: {e}") from None

    def identity(self):
        identity = {"optimizer": self.s.optimizer, "phases": len(self.phases)}
        if self.s.span_boundary:  # a run with another head cannot resume this one
            identity["span_boundary"] = True
        return identity

    def _pair_task(self) -> str:
        """"sop" for sentence-order data (create-pretraining-data --sop), else "nsp"; logs keep the
        nsp_* names for the sentence-pair head either way."""
        return self.phases[0].data.meta.get("settings", {}).get("mode", "nsp")

    def summary(self, summary):
        """The engine's token count named for what it counts: real (unpadded) tokens, every process's."""
        summary = dict(summary)
        summary["pair_task"] = self._pair_task()
        summary["real_tokens"] = int(summary.pop("tokens"))
        if self.baseline:  # the floor held_out's mlm_accuracy is read against
            summary["held_out_most_frequent_token"] = self.baseline
        return summary

    def export(self, run, model, summary):
        """OUT/model in HF format, with the tokenizer the data was made with."""
        save_model_folder(model.pretraining if self.s.span_boundary else model,  # the SBO head serves pretraining only
                          os.path.join(self.s.out, "model"), _tokenizer(self.phases[0].data))

    def curves(self, records, out, title):
        c = self.s.model
        family = "ALBERT" if is_albert(c) else "ModernBERT" if is_modernbert(c) else "BERT"
        plot_pretraining_curves(records, os.path.join(out, "curves.png"),
                                title=f"{family} L{c.num_hidden_layers}/H{c.hidden_size}, {self.s.optimizer}")


def save_model_folder(model, folder, tokenizer):
    """The HF-format folder of a pretrained model: BERT's and ALBERT's with vocab.txt, ModernBERT's
    as ModernBertForMaskedLM (its config says the rotary bases the weights were last trained with)."""
    from ..interop.hf_albert import save_albert
    from ..interop.hf_bert import save_pretrained
    from ..interop.hf_modernbert import save_modernbert
    if isinstance(model, ModernBertForPreTraining):
        return save_modernbert(model.as_masked_lm(), folder, tokenizer)
    return (save_albert if is_albert(model.config) else save_pretrained)(model, folder, tokenizer)


def phase_switch(max_steps: int, phase2_fraction: float) -> int:
    """The first step of the second phase (--data-512): the last `phase2_fraction` of the steps, one at least."""
    return max_steps - max(1, round(max_steps * phase2_fraction))


def _check_same_vocab(a: PretrainingData, b: PretrainingData):
    if a.vocab.id_to_token != b.vocab.id_to_token:
        raise ValueError(f"{a.folder} and {b.folder} were made with different vocabularies (vocab.txt differs)")


def train_pretraining(s: PretrainSettings) -> dict:
    """Train (or resume) to max_steps or max_minutes, then write OUT/model (HF format) and
    OUT/summary.json; returns the summary with the model under "model"."""
    return fit(MaskedLMPretraining(s), s)


def report(summary: dict, out) -> str:
    """What a finished run says: its steps and speed, the held-out masked-LM (and next-sentence)
    scores, and where the model is."""
    held = summary["held_out"]
    line = f"{summary['steps']} steps in {summary['seconds']:.0f} s ({summary['tokens_per_s']:,.0f} real tokens/s)"
    if summary["stopped_by_time"]:
        line += " (stopped by --max-minutes; --resume continues)"
    if held:
        line += f"\nheld-out masked LM: loss {held['mlm_loss']:.3f}, accuracy {held['mlm_accuracy']:.3f}"
        floor = summary.get("held_out_most_frequent_token")
        if floor:
            line += f" (always predicting {floor['token']!r}, the most frequent masked token: {floor['mlm_accuracy']:.3f})"
        if "nsp_accuracy" in held:
            task = "sentence order" if summary.get("pair_task") == "sop" else "next sentence"
            line += f"; {task}: loss {held['nsp_loss']:.3f}, accuracy {held['nsp_accuracy']:.3f}"
    return f"{line}\nmodel: {os.path.join(out, 'model')}"


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

