"""Training the Transformer for translation as the paper did (section 5), as the `Translation`
objective of the one training loop (engine.fit): teacher forcing under the causal mask,
label-smoothed cross-entropy normalised by all the target tokens of an optimizer step, Adam (0.9,
0.98, 1e-9) with warmup then inverse square root decay, batches cut by a token budget, validation
loss and BLEU, and the average of the last checkpoints' weights as the final model. fit() does the
rest (accumulation, clipping, precision, torchrun, time budget, exact resume, metrics, summary).
"""
import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import progress, validate
from ..data.parallel import ParallelData, TranslationBatch, collate
from ..inference.translate import translate_ids
from ..interop.translation_folder import save_translation_model
from ..io import read_lines
from ..models.transformer import Seq2SeqTransformer, TransformerConfig
from ..tokenization.subword import SubwordTokenizer
from ..training.checkpoint import check_count, check_model_state, expect_fields
from ..training.distributed import DistInfo, gather_objects, sum_across
from ..training.engine import Objective, fit
from ..training.metrics import plot_curves, plot_learning_curve
from ..training.optim import make_adamw
from ..training.schedules import make_scheduler
from ..training.settings import RunSettings, optional


@dataclass(kw_only=True)
class TranslationSettings(RunSettings):
    """The shared run settings with the paper's defaults, and translation's own. Batches are cut by
    max_tokens, not counted in sentences: batch_size is unused."""
    model: TransformerConfig
    max_tokens: int = 4096    # padded source or target tokens per micro-batch, per process
    lr: float | None = None   # peak rate; None: the paper's d_model^-0.5 * warmup^-0.5
    warmup: int = 4000
    weight_decay: float = 0.0  # the paper's Adam decays nothing
    schedule: str = "inverse_sqrt"  # or "linear" (decay to min_lr_ratio at max_steps)
    min_lr_ratio: float = 0.0
    label_smoothing: float = 0.1
    grad_clip: float = 0.0    # the paper clips nothing; fairseq's --clip-norm 0 too
    max_steps: int = 100_000
    eval_every: int = 1000
    bleu_sentences: int = 500  # validation sentences decoded (greedily) for BLEU; 0: none
    bleu_tokenize: str = "13a"
    average_last: int = 0     # keep this many snapshots, one per save_every, and average them

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "max_tokens": v.positive_int, "lr": optional(v.positive_float),
                "min_lr_ratio": v.fraction, "label_smoothing": v.fraction, "max_steps": v.positive_int,
                "eval_every": v.positive_int, "bleu_sentences": v.nonnegative_int, "average_last": v.nonnegative_int}

    def __post_init__(self):
        super().__post_init__()
        if self.schedule not in ("inverse_sqrt", "linear"):
            raise ValueError(f"schedule {self.schedule!r}: choose inverse_sqrt or linear")

    @property
    def peak_lr(self) -> float:
        return self.lr if self.lr is not None else self.model.d_model ** -0.5 * max(self.warmup, 1) ** -0.5


def translation_vocabularies(out, train_src, train_tgt, vocab=None, joint_vocab=False, vocab_size=8000,
                             min_frequency=2, resume=False):
    """The run's (source, target) subword tokenizers: OUT/vocab for a resumed run, the folder
    ``vocab`` (a model folder's, OUT/vocab, or one joint vocabulary), or learned from the training
    files (one ``joint_vocab`` or one per side); saved to OUT/vocab by a new run. (Under torchrun the
    main process makes them; the others then read OUT/vocab as a resumed run does.)"""
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
    if not resume:
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
    """Training batches epoch after epoch as one sequence dealt out to the processes: process `rank`
    of `world_size` takes batches rank, rank + world_size, ..., so that together they read what one
    process would. (epoch, index of the next batch) is the resumable position, the same in every process."""

    def __init__(self, data: ParallelData, max_tokens: int, seed: int, rank: int = 0, world_size: int = 1):
        self.data, self.max_tokens, self.seed = data, max_tokens, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.index, self._batches = 0, 0, None

    def _take(self) -> list[int]:
        """The sequence's next batch (example indices)."""
        if self._batches is None:
            self._batches = self.data.batches(self.epoch, self.max_tokens, seed=self.seed)
        if self.index == len(self._batches):
            self.epoch, self.index = self.epoch + 1, 0
            self._batches = self.data.batches(self.epoch, self.max_tokens, seed=self.seed)
        self.index += 1
        return self._batches[self.index - 1]

    def next(self) -> TranslationBatch:
        """This process's next batch; the other processes take the world_size - 1 beside it."""
        turns = [self._take() for _ in range(self.world_size)]
        d = self.data
        return collate([d.pair(i) for i in turns[self.rank]], d.pad_id, d.bos_id, d.eos_id)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict):
        expect_fields(state, {"epoch": int, "index": int}, "the batch stream's position")
        epoch = check_count(state["epoch"], "the batch stream's epoch", whole=True)
        batches = self.data.batches(epoch, self.max_tokens, seed=self.seed)  # what _take would make
        # past the epoch's batches, _take would fail on its next turn; a negative index reads from the end
        self.index = check_count(state["index"], f"the batch stream's index in epoch {epoch}", whole=True,
                                 most=len(batches))
        self.epoch, self._batches = epoch, batches


def step_loss_of(pad_id, epsilon, step_tokens, micro_batches, device):
    """The loss of one micro-batch of an optimizer step that has `step_tokens` target tokens in
    `micro_batches` micro-batches (grad_accum times the processes). train_step divides each
    micro-batch's loss by grad_accum and DDP averages the processes' gradients, so this returns
    sum * micro_batches / step_tokens: the step's loss is then normalised by all its target tokens,
    as one big batch would be (not a mean of micro-batch means)."""
    def loss_of(model, batch):
        target = batch.tgt_out.to(device)
        real = target != pad_id  # logits at the real target positions only
        logits = model(batch.src.to(device), batch.tgt_in.to(device), real)
        return label_smoothed_loss(logits, target[real], pad_id, epsilon) * micro_batches / step_tokens
    return loss_of


@torch.no_grad()
def validation_loss(model, data: ParallelData, max_tokens: int, epsilon: float, info: DistInfo = DistInfo()) -> dict:
    """Label-smoothed loss and plain cross-entropy per target token over the whole set (each
    process scores every world_size-th batch)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    smoothed = nll = tokens = 0.0
    for indices in data.batches(0, max_tokens, shuffle=False)[info.rank::info.world_size]:
        batch = collate([data.pair(i) for i in indices], data.pad_id, data.bos_id, data.eos_id)
        logits = model(batch.src.to(device), batch.tgt_in.to(device))
        target = batch.tgt_out.to(device)
        smoothed += label_smoothed_loss(logits, target, data.pad_id, epsilon).item()
        nll += label_smoothed_loss(logits, target, data.pad_id, 0.0).item()
        tokens += batch.num_tokens
    model.train(was_training)
    smoothed, nll, tokens = sum_across(torch.tensor([smoothed, nll, tokens], dtype=torch.float64), info).tolist()
    return {"loss": smoothed / tokens, "nll": nll / tokens, "perplexity": math.exp(min(nll / tokens, 50))}


def validation_bleu(model, data: ParallelData, target_tokenizer, n: int, tokenize: str,
                    info: DistInfo = DistInfo()) -> float:
    """sacreBLEU of greedy translations of the first n validation pairs (detokenized text); each
    process translates every world_size-th of them."""
    import sacrebleu
    n = min(n, len(data))
    mine = range(info.rank, n, info.world_size)
    hyps = translate_ids(model, [data.pair(i)[0] for i in mine], batch_size=64)
    texts = dict(zip(mine, (target_tokenizer.decode(h[0].tokens) for h in hyps)))
    for shard in gather_objects(texts, info):
        texts.update(shard)
    return sacrebleu.corpus_bleu([texts[i] for i in range(n)], [data.targets[:n]], tokenize=tokenize).score


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


def weights_copy(model) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


class Translation(Objective):
    """Teacher forcing on parallel text: the decoder reads BOS + target under the causal mask and is
    scored on target + EOS."""
    name, unit = "translate-train", "target_tokens"
    position_is_global = True  # one sequence of batches shared out: resumes with another process count

    def __init__(self, s: TranslationSettings, train: ParallelData, valid: ParallelData, source_tokenizer,
                 target_tokenizer, model_settings: dict | None = None):
        self.s, self.train, self.valid = s, train, valid
        self.source_tokenizer, self.target_tokenizer, self.model_settings = source_tokenizer, target_tokenizer, \
            model_settings
        self.snapshots, self.averaged_steps = [], None  # (step, weights on the CPU) for average_last

    def config(self):
        return self.s.model

    def setup(self, run):
        self.run = run
        self.stream = BatchStream(self.train, self.s.max_tokens, self.s.seed, run.info.rank, run.info.world_size)
        return Seq2SeqTransformer(self.s.model).to(run.device)

    def optimizer(self, model, s):
        return make_adamw(model, s.peak_lr, s.weight_decay, betas=(0.9, 0.98), eps=1e-9)

    def scheduler(self, optimizer, s, total_steps):
        return make_scheduler(optimizer, s.schedule, s.warmup, total_steps, s.min_lr_ratio)

    def micro_batches(self, k):
        """The step's k batches, drawn before any loss: the loss divides by their target tokens
        summed over every process."""
        batches = [self.stream.next() for _ in range(k)]
        self.tokens = sum(b.num_tokens for b in batches)
        self.step_tokens = int(sum_across(torch.tensor([self.tokens], dtype=torch.float64), self.run.info).item())
        self.loss_of = step_loss_of(self.train.pad_id, self.s.label_smoothing, self.step_tokens,
                                    k * self.run.info.world_size, self.run.device)
        return batches

    def loss(self, model, batch):
        return self.loss_of(model, batch)

    def step_stats(self):
        # after every step: at each checkpoint step, the snapshot --average-last averages
        if self.s.average_last and self.run.step % self.run.save_every == 0:
            self.snapshots = self.kept(self.snapshots + [(self.run.step, weights_copy(self.run.whole_model()))])
        return {"target_tokens": self.step_tokens}, self.tokens

    def log_fields(self):
        return {"epoch": self.stream.epoch}

    def evaluate(self, model):
        values = validation_loss(model, self.valid, self.s.max_tokens, self.s.label_smoothing, self.run.info)
        if self.s.bleu_sentences:
            values["bleu"] = validation_bleu(model, self.valid, self.target_tokenizer, self.s.bleu_sentences,
                                             self.s.bleu_tokenize, self.run.info)
        return values

    def describe(self, metrics):
        return ", ".join(f"valid {k} {v:.3f}" for k, v in metrics.items())

    def state_dict(self):
        return {"stream": self.stream.state_dict()}

    def load_state_dict(self, state):
        self.stream.load_state_dict(expect_fields(state, {"stream": dict}, "the translation position")["stream"])

    def shared_state(self):
        return {"snapshots": self.snapshots}

    def load_shared_state(self, extra):
        """The snapshots --average-last averages: each (step, weights) at a step up to the run's,
        in order, its weights this model's (checkpoint.check_model_state)."""
        expect_fields(extra, {"snapshots": list}, "extra")
        snapshots, last = self.kept(extra["snapshots"]), 0
        model = self.run.skeleton if self.run.skeleton is not None else self.run.model
        for i, snapshot in enumerate(snapshots):
            where = f"extra: snapshot {i}"
            if not (isinstance(snapshot, (list, tuple)) and len(snapshot) == 2):
                raise ValueError(f"{where} is not a (step, weights) pair")
            step = check_count(snapshot[0], f"{where}'s step", whole=True, most=self.run.step)
            if step <= last:
                raise ValueError(f"{where}'s step {step} does not follow the snapshot before it (step {last})")
            last = step
            check_model_state(model, snapshot[1], f"{where}: model")
        self.snapshots = [tuple(snapshot) for snapshot in snapshots]

    def identity(self):
        """What the data position indexes: the batches of these pairs cut by this budget in this order."""
        return {"train_pairs": len(self.train), "max_tokens": self.s.max_tokens, "seed": self.s.seed}

    def kept(self, snapshots: list) -> list:
        return snapshots[-self.s.average_last:] if self.s.average_last else []

    def final_model(self, model):
        """With average_last: the mean of the last snapshots, the final weights among them."""
        if not self.s.average_last:
            return model
        snapshots = self.snapshots
        if not snapshots or snapshots[-1][0] != self.run.step:
            snapshots = self.kept(snapshots + [(self.run.step, weights_copy(model))])
        self.averaged_steps = [step for step, _ in snapshots]
        final = Seq2SeqTransformer(self.s.model).to(self.run.device)
        final.load_state_dict(average_state_dicts([weights for _, weights in snapshots]))
        return final

    def summary(self, summary):
        return {**summary, "epoch": self.stream.epoch, "last_train_loss": summary["last_train"].get("loss"),
                **{f"valid_{k}": v for k, v in summary["held_out"].items()}, "averaged_steps": self.averaged_steps}

    def export(self, run, model, summary):
        save_translation_model(os.path.join(self.s.out, "model"), model, self.source_tokenizer,
                               self.target_tokenizer, self.model_settings)

    def curves(self, records, out, title):
        c = self.s.model
        title = f"Transformer {c.encoder_layers}+{c.decoder_layers}L/{c.d_model}"
        plot_curves(records, os.path.join(out, "curves.png"), title=title)
        if any("bleu" in r for r in records):
            plot_learning_curve(records, os.path.join(out, "bleu.png"), "bleu", title=title)


def train_translation(s: TranslationSettings, train: ParallelData, valid: ParallelData, source_tokenizer,
                      target_tokenizer, model_settings: dict | None = None) -> dict:
    """Train (or resume) to max_steps or max_minutes; write OUT/model (the averaged weights with
    average_last) and OUT/summary.json; return the summary with the trained model under "model"."""
    return fit(Translation(s, train, valid, source_tokenizer, target_tokenizer, model_settings), s)


def report(summary: dict, out) -> str:
    """What a finished run says: its steps and speed, validation loss and BLEU, where the model is."""
    bleu = f", BLEU {summary['valid_bleu']:.2f}" if "valid_bleu" in summary else ""
    return (f"{summary['steps']} steps in {summary['seconds']:.0f} s ({summary['target_tokens_per_s']:,.0f} "
            f"target tokens/s); valid loss {summary['valid_loss']:.3f}{bleu}\nmodel: {os.path.join(out, 'model')}")
