"""Training the Transformer for translation as the paper did (section 5): teacher forcing under the
causal mask, label-smoothed cross-entropy, Adam (0.9, 0.98, 1e-9) with warmup then inverse square
root decay, batches cut by a token budget. Around it: gradient accumulation and clipping, mixed
precision, validation loss and BLEU, a time budget, exact resume, and checkpoint averaging.
"""
import contextlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from .. import progress, validate
from ..data.parallel import ParallelData
from ..device import autocast_dtype, pick_device
from ..inference.translate import translate_ids
from ..interop.translation_folder import save_translation_model
from ..io import atomic_write_text, read_lines
from ..models.transformer import Seq2SeqTransformer, TransformerConfig
from ..tokenization.subword import SubwordTokenizer
from .checkpoint import restore_run, save_checkpoint
from .engine import autocast_context, train_step
from .metrics import MetricsLog, plot_curves, plot_learning_curve
from .optim import make_adamw
from .schedules import make_scheduler


@dataclass
class TranslationSettings:
    out: str                  # checkpoint.pt, metrics.jsonl, curves.png, bleu.png, summary.json, model/
    model: TransformerConfig
    max_tokens: int = 4096    # padded source or target tokens per micro-batch
    grad_accum: int = 1
    lr: float | None = None   # peak rate; None: the paper's d_model^-0.5 * warmup^-0.5
    warmup: int = 4000
    schedule: str = "inverse_sqrt"  # or "linear" (decay to min_lr_ratio at max_steps)
    min_lr_ratio: float = 0.0
    label_smoothing: float = 0.1
    grad_clip: float = 0.0    # the paper clips nothing; fairseq's --clip-norm 0 too
    max_steps: int = 100_000
    max_minutes: float | None = None
    eval_interval: int = 1000
    save_interval: int = 1000
    bleu_sentences: int = 500  # validation sentences decoded (greedily) for BLEU; 0: none
    bleu_tokenize: str = "13a"
    average_last: int = 0     # keep this many snapshots, one per save_interval, and average them
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    resume: bool = False
    progress: bool = True

    def __post_init__(self):
        validate.check_fields(self, {
            "max_tokens": validate.positive_int, "grad_accum": validate.positive_int,
            "warmup": validate.nonnegative_int, "min_lr_ratio": validate.fraction,
            "label_smoothing": validate.fraction, "grad_clip": validate.nonnegative_float,
            "max_steps": validate.positive_int, "eval_interval": validate.positive_int,
            "save_interval": validate.positive_int, "bleu_sentences": validate.nonnegative_int,
            "average_last": validate.nonnegative_int, "seed": validate.nonnegative_int})
        validate.positive_float("lr", self.lr, optional=True)
        validate.nonnegative_float("max_minutes", self.max_minutes, optional=True)  # 0: stop after one step
        if self.schedule not in ("inverse_sqrt", "linear"):
            raise ValueError(f"schedule {self.schedule!r}: choose inverse_sqrt or linear")

    @property
    def peak_lr(self) -> float:
        return self.lr if self.lr is not None else self.model.d_model ** -0.5 * max(self.warmup, 1) ** -0.5


def translation_vocabularies(out, train_src, train_tgt, vocab=None, joint_vocab=False, vocab_size=8000,
                             min_frequency=2, resume=False):
    """The run's (source, target) subword tokenizers: OUT/vocab for a resumed run, the folder
    ``vocab`` (a model folder's, OUT/vocab, or one joint vocabulary), or learned from the training
    files (one ``joint_vocab`` or one per side); saved to OUT/vocab."""
    saved = os.path.join(out, "vocab")
    folder = saved if resume else vocab
    if folder:
        sides = [os.path.join(folder, f"{side}_tokenizer") for side in ("source", "target")]
        if not all(os.path.isdir(s) for s in sides):
            sides = [folder, folder]  # a single vocabulary folder: joint
        source, target = (SubwordTokenizer.load(s) for s in sides)
    elif joint_vocab:
        progress.write(f"learning a joint {vocab_size}-token subword vocabulary")
        source = target = SubwordTokenizer.train(read_lines(train_src) + read_lines(train_tgt), vocab_size,
                                                 min_frequency)
    else:
        progress.write(f"learning {vocab_size}-token subword vocabularies per side")
        source = SubwordTokenizer.train(read_lines(train_src), vocab_size, min_frequency)
        target = SubwordTokenizer.train(read_lines(train_tgt), vocab_size, min_frequency)
    source.save(os.path.join(saved, "source_tokenizer"))
    target.save(os.path.join(saved, "target_tokenizer"))
    return source, target


def translation_data_settings(vocab=None, joint_vocab=False, vocab_size=8000, min_frequency=2,
                              max_sentence_tokens=256) -> dict:
    """The settings that shape the vocabulary and the data, as inputs.json records them (by flag)."""
    settings = {"--vocab": os.path.abspath(vocab) if vocab else None}
    if not vocab:  # the vocabulary is learned from the training files with these
        settings.update({"--joint-vocab": joint_vocab, "--vocab-size": vocab_size, "--min-frequency": min_frequency})
    settings["--max-sentence-tokens"] = max_sentence_tokens
    return settings


def translation_config(source, target, preset="small", layers=None, d_model=None, heads=None, ffn_dim=None,
                       dropout=None, max_positions=512) -> TransformerConfig:
    """The preset's Transformer with the sizes given (None: the preset's) for these tokenizers;
    one vocabulary on both sides shares its embeddings."""
    joint = source.vocab == target.vocab and source.merges == target.merges
    sizes = {k: v for k, v in (("encoder_layers", layers), ("decoder_layers", layers), ("d_model", d_model),
                               ("attention_heads", heads), ("ffn_dim", ffn_dim), ("dropout", dropout)) if v is not None}
    return TransformerConfig.preset(
        preset, **{**sizes, "source_vocab_size": len(source), "target_vocab_size": len(target),
                   "pad_token_id": target.pad_id, "bos_token_id": target.bos_id, "eos_token_id": target.eos_id,
                   "share_embeddings": joint, "max_position_embeddings": max_positions})


def label_smoothed_loss(logits, target, pad_id: int, epsilon: float = 0.1):
    """Sum over the non-pad target positions of the cross-entropy against (1 - eps) * one-hot +
    eps / V (Szegedy et al.'s uniform smoothing, as the paper's eps_ls; torch's label_smoothing).
    Callers divide by the number of target tokens."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=pad_id,
                           label_smoothing=epsilon, reduction="sum")


class BatchStream:
    """Training batches epoch after epoch; (epoch, next batch index) is the resumable position."""

    def __init__(self, data: ParallelData, max_tokens: int, seed: int, epoch: int = 0, index: int = 0):
        self.data, self.max_tokens, self.seed = data, max_tokens, seed
        self.epoch, self.index = epoch, index
        self._batches = None

    def next(self):
        while True:
            if self._batches is None:
                self._batches = self.data.iterate(self.epoch, self.max_tokens, self.index, seed=self.seed)
            for index, batch in self._batches:
                self.index = index + 1
                return batch
            self.epoch, self.index, self._batches = self.epoch + 1, 0, None

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}


def step_loss_of(pad_id, epsilon, step_tokens, grad_accum, device):
    """train_step's loss_of for one optimizer step: train_step divides each micro-batch's loss by
    grad_accum, so this returns sum * grad_accum / step_tokens. The step's loss is then normalised
    by all its target tokens, as one big batch would be (not a mean of micro-batch means)."""
    def loss_of(model, batch):
        target = batch.tgt_out.to(device)
        real = target != pad_id  # logits at the real target positions only
        logits = model(batch.src.to(device), batch.tgt_in.to(device), real)
        return label_smoothed_loss(logits, target[real], pad_id, epsilon) * grad_accum / step_tokens
    return loss_of


@torch.no_grad()
def validation_loss(model, data: ParallelData, max_tokens: int, epsilon: float, autocast=None) -> dict:
    """Label-smoothed loss and plain cross-entropy per target token over the whole set."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    smoothed = nll = tokens = 0.0
    for _, batch in data.iterate(0, max_tokens, shuffle=False):
        with autocast or contextlib.nullcontext():
            logits = model(batch.src.to(device), batch.tgt_in.to(device))
        target = batch.tgt_out.to(device)
        smoothed += label_smoothed_loss(logits, target, data.pad_id, epsilon).item()
        nll += label_smoothed_loss(logits, target, data.pad_id, 0.0).item()
        tokens += batch.num_tokens
    model.train(was_training)
    return {"loss": smoothed / tokens, "nll": nll / tokens, "perplexity": math.exp(min(nll / tokens, 50))}


def validation_bleu(model, data: ParallelData, target_tokenizer, n: int, tokenize: str) -> float:
    """sacreBLEU of greedy translations of the first n validation pairs (detokenized text)."""
    import sacrebleu
    n = min(n, len(data))
    hyps = translate_ids(model, [data.pair(i)[0] for i in range(n)], batch_size=64)
    texts = [target_tokenizer.decode(h[0].tokens) for h in hyps]
    return sacrebleu.corpus_bleu(texts, [data.targets[:n]], tokenize=tokenize).score


def average_state_dicts(states: list[dict]) -> dict:
    """The element-wise mean of model state dicts (the paper's final models average the last 5
    or 20 checkpoints). Integer buffers are taken from the last."""
    if not states:
        raise ValueError("no checkpoints to average")
    out = {}
    for name, last in states[-1].items():
        if last.is_floating_point():
            out[name] = sum(s[name].double() for s in states).div(len(states)).to(last.dtype)
        else:
            out[name] = last.clone()
    return out


class _Run:
    """The state of one training run, so that `train_translation` reads as the algorithm."""

    def __init__(self, s: TranslationSettings, train: ParallelData, valid: ParallelData):
        self.s, self.valid = s, valid
        self.device = pick_device(s.device)
        self.dtype = autocast_dtype(s.precision, self.device)
        torch.manual_seed(s.seed)
        self.model = Seq2SeqTransformer(s.model).to(self.device)
        self.optimizer = make_adamw(self.model, s.peak_lr, weight_decay=0.0, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = make_scheduler(self.optimizer, s.schedule, s.warmup, s.max_steps, s.min_lr_ratio)
        self.stream = BatchStream(train, s.max_tokens, s.seed)
        self.log = MetricsLog(os.path.join(s.out, "metrics.jsonl"))
        self.ckpt = os.path.join(s.out, "checkpoint.pt")
        self.snapshots = []  # (step, weights on the CPU) for --average-last
        self.step, self.last_eval = 0, None
        torch.manual_seed(s.seed + 1)  # dropout's stream, restored exactly on resume
        if s.resume:
            self._restore()
        else:
            self.log.truncate_after(-1)
        self.scaler = torch.amp.GradScaler() if self.dtype is torch.float16 else None
        self.autocast = autocast_context(self.device, self.dtype)

    def _restore(self):
        state = restore_run(self.ckpt, self.s.model, model=self.model, optimizer=self.optimizer,
                            scheduler=self.scheduler)
        self.stream = BatchStream(self.stream.data, self.s.max_tokens, self.s.seed, **state["data"])
        self.snapshots = state["extra"].get("snapshots", [])
        self.step = state["step"]
        self.log.truncate_after(self.step)

    def save(self):
        if self.s.average_last:
            self.snapshots = [x for x in self.snapshots if x[0] != self.step]
            self.snapshots.append((self.step, {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}))
            self.snapshots = self.snapshots[-self.s.average_last:]
        save_checkpoint(self.ckpt, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
                        step=self.step, data_state=self.stream.state_dict(),
                        extra={"model": self.s.model.to_dict(), "settings": _settings_dict(self.s),
                               "snapshots": self.snapshots})

    def train_step(self) -> tuple[float, int]:
        batches = [self.stream.next() for _ in range(self.s.grad_accum)]
        tokens = sum(b.num_tokens for b in batches)
        loss_of = step_loss_of(self.valid.pad_id, self.s.label_smoothing, tokens, self.s.grad_accum, self.device)
        loss = train_step(self.model, self.optimizer, self.scheduler, iter(batches).__next__, self.s.grad_accum,
                          self.s.grad_clip, self.autocast, self.scaler, loss_of=loss_of)
        return loss, tokens

    def evaluate(self, target_tokenizer):
        values = validation_loss(self.model, self.valid, self.s.max_tokens, self.s.label_smoothing, self.autocast)
        if self.s.bleu_sentences:
            values["bleu"] = validation_bleu(self.model, self.valid, target_tokenizer, self.s.bleu_sentences,
                                             self.s.bleu_tokenize)
        self.log.write(self.step, "eval", **values)
        self.last_eval = (self.step, values)
        return values


def _settings_dict(s: TranslationSettings) -> dict:
    d = asdict(s)
    d["model"] = s.model.to_dict()
    return d


def train_translation(s: TranslationSettings, train: ParallelData, valid: ParallelData, source_tokenizer,
                      target_tokenizer, model_settings: dict | None = None) -> dict:
    """Train (or resume) to max_steps or max_minutes; write OUT/model (the averaged weights with
    average_last) and OUT/summary.json; return the summary with the trained model under "model"."""
    run = _Run(s, train, valid)
    start, seen_tokens = time.time(), 0
    bar = progress.progress_bar(total=s.max_steps, initial=run.step, unit="step", desc="translate-train",
                                enabled=s.progress)
    loss, stopped_by_time = float("nan"), False
    run.model.train()
    while run.step < s.max_steps:
        lr = run.optimizer.param_groups[0]["lr"]
        loss, tokens = run.train_step()
        run.step, seen_tokens = run.step + 1, seen_tokens + tokens
        speed = seen_tokens / (time.time() - start)
        run.log.write(run.step, "train", loss=loss, lr=lr, target_tokens=tokens, tokens_per_s=speed,
                      epoch=run.stream.epoch)
        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tgt_tok_s=f"{speed:,.0f}", refresh=False)
        bar.update(1)
        if run.step % s.eval_interval == 0:
            values = run.evaluate(target_tokenizer)
            progress.write(f"step {run.step}: " + ", ".join(f"valid {k} {v:.3f}" for k, v in values.items()))
        if run.step % s.save_interval == 0:
            run.save()
        if s.max_minutes is not None and time.time() - start > s.max_minutes * 60:
            stopped_by_time = run.step < s.max_steps
            break
    bar.close()
    if run.step % s.save_interval or not os.path.exists(run.ckpt):
        run.save()
    final = run.model
    if s.average_last:
        final = Seq2SeqTransformer(s.model).to(run.device)
        final.load_state_dict(average_state_dicts([w for _, w in run.snapshots]))
        run.model, averaged = final, [step for step, _ in run.snapshots]
    values = run.last_eval[1] if run.last_eval and run.last_eval[0] == run.step and not s.average_last \
        else run.evaluate(target_tokenizer)
    save_translation_model(os.path.join(s.out, "model"), final, source_tokenizer, target_tokenizer,
                           model_settings)
    elapsed = time.time() - start
    summary = {"steps": run.step, "stopped_by_time": stopped_by_time, "seconds": round(elapsed, 1),
               "epoch": run.stream.epoch, "target_tokens_per_s": round(seen_tokens / max(elapsed, 1e-9), 1),
               "last_train_loss": None if math.isnan(loss) else loss, **{f"valid_{k}": v for k, v in values.items()},
               "parameters": final.num_parameters(),
               "averaged_steps": averaged if s.average_last else None}
    atomic_write_text(os.path.join(s.out, "summary.json"), json.dumps(summary, indent=2) + "\n")
    records = run.log.read()
    title = f"Transformer {s.model.encoder_layers}+{s.model.decoder_layers}L/{s.model.d_model}"
    plot_curves(records, os.path.join(s.out, "curves.png"), title=title)
    if any("bleu" in r for r in records):
        plot_learning_curve(records, os.path.join(s.out, "bleu.png"), "bleu", title=title)
    return {**summary, "model": final}
