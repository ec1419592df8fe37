"""UniLM fine-tuning for generation (Dong et al. 2019, section 2.3) as an objective on the one
training loop (engine.fit): each pair becomes ``[CLS] source [SEP] target [SEP]`` under the
sequence-to-sequence mask; a share of the target's tokens (its closing [SEP] included, so the model
learns where to stop) become [MASK] and are predicted, with pretraining's masked-LM loss at those
positions (models.losses). Decoding then predicts one [MASK] at a time, left to right
(models.unilm, inference.unilm).

The masked positions of a micro-batch are drawn from a generator seeded by its data position
(seed, epoch, index, rank), so a resumed run draws what the uninterrupted one drew.
"""
import os
from dataclasses import dataclass

import numpy as np
import torch

from .. import progress, validate
from ..core import seq2seq_mask
from ..data.parallel import read_parallel
from ..models import BertConfig, BertForPreTraining
from ..models.losses import pretraining_loss
from ..models.unilm import seq2seq_example
from ..training.checkpoint import expect_fields
from ..training.data_order import DataOrder
from ..training.engine import Objective, fit
from ..training.settings import RunSettings, optional


@dataclass(kw_only=True)
class UniLMSettings(RunSettings):
    model: BertConfig
    init_from: str | None = None   # a BERT folder (or "minilm") whose weights start the run; None: from scratch
    max_source_tokens: int = 128   # [CLS] source [SEP]; longer sources are cut
    max_target_tokens: int = 32    # target [SEP]; longer targets are cut
    target_mask_prob: float = 0.7  # the paper's share of target tokens masked for generation tasks
    rouge_sentences: int = 100     # validation pairs decoded (greedily) for ROUGE at each evaluation; 0: none
    lr: float = 5e-5
    warmup: int = 100

    def checks(self) -> dict:
        v = validate
        return {**super().checks(), "max_source_tokens": v.positive_int, "max_target_tokens": v.positive_int,
                "target_mask_prob": v.positive_fraction, "rouge_sentences": v.nonnegative_int,
                "max_steps": optional(v.positive_int)}

    def __post_init__(self):
        super().__post_init__()
        if self.max_source_tokens < 3 or self.max_target_tokens < 2:
            raise ValueError(f"max_source_tokens {self.max_source_tokens} / max_target_tokens "
                             f"{self.max_target_tokens}: need at least 3 ([CLS] a token [SEP]) and 2 (a token [SEP])")
        if self.max_source_tokens + self.max_target_tokens > self.model.max_position_embeddings:
            raise ValueError(f"max_source_tokens {self.max_source_tokens} + max_target_tokens "
                             f"{self.max_target_tokens} exceed the model's {self.model.max_position_embeddings} positions")


class PairIds:
    """Source/target pairs as WordPiece ids (no specials), cut to the budgets; `references` keeps
    each target's text for ROUGE."""

    def __init__(self, source_path, target_path, tokenizer, max_source_tokens: int, max_target_tokens: int):
        text = read_parallel(source_path, target_path, strict=True)  # a blank side: an error naming the line
        self.name, self.references = text.name, text.targets
        self.sources, self.targets, self.cut = [], [], 0
        for number, (s, t) in enumerate(zip(text.sources, text.targets), 1):
            s_ids, t_ids = tokenizer.tokenize_ids(s), tokenizer.tokenize_ids(t)
            if not s_ids or not t_ids:
                raise ValueError(f"{text.name}:{number}: the {'source' if not s_ids else 'target'} has no tokens "
                                 "for this vocabulary")
            self.cut += len(s_ids) > max_source_tokens - 2 or len(t_ids) > max_target_tokens - 1
            self.sources.append(s_ids[:max_source_tokens - 2])
            self.targets.append(t_ids[:max_target_tokens - 1])
        if not self.sources:
            raise ValueError(f"{text.name}: no pairs")

    def __len__(self):
        return len(self.sources)

    def summary(self) -> str:
        return f"{self.name}: {len(self):,} pairs ({self.cut:,} cut to the token budgets)"


def masked_target_batch(pairs, ids: dict, prob: float, rng: np.random.Generator) -> dict:
    """The tensors pretraining_loss reads, for (source ids, target ids) pairs: input_ids with a
    share `prob` of each target's positions (at least one) replaced by [MASK], token_type_ids,
    the seq2seq attention mask (batch, 1, len, len), and masked_lm_positions/ids/weights.
    ids: the special token ids {"cls", "sep", "pad", "mask"}."""
    examples = [seq2seq_example(s, t, ids["cls"], ids["sep"]) for s, t in pairs]
    length = max(len(x) for x, _ in examples)
    input_ids = np.full((len(pairs), length), ids["pad"], np.int64)
    types, attention = np.zeros_like(input_ids), np.zeros_like(input_ids)
    chosen = []
    for row, ((x, segments), (s, _)) in enumerate(zip(examples, pairs)):
        input_ids[row, :len(x)], types[row, :len(x)], attention[row, :len(x)] = x, segments, 1
        target = np.arange(len(s) + 2, len(x))
        pick = target[rng.random(len(target)) < prob]
        chosen.append(pick if len(pick) else rng.choice(target, 1))
    most = max(len(c) for c in chosen)
    positions, labels, weights = (np.zeros((len(pairs), most), dt) for dt in (np.int64, np.int64, np.float32))
    for row, pick in enumerate(chosen):
        positions[row, :len(pick)], labels[row, :len(pick)], weights[row, :len(pick)] = pick, input_ids[row, pick], 1
        input_ids[row, pick] = ids["mask"]
    types_t, attention_t = torch.from_numpy(types), torch.from_numpy(attention)
    return {"input_ids": torch.from_numpy(input_ids), "token_type_ids": types_t,
            "attention_mask": seq2seq_mask(types_t, attention_t), "masked_lm_positions": torch.from_numpy(positions),
            "masked_lm_ids": torch.from_numpy(labels), "masked_lm_weights": torch.from_numpy(weights)}


def special_ids(tokenizer) -> dict:
    return {"cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id, "pad": tokenizer.pad_token_id,
            "mask": tokenizer.mask_token_id}


class UniLMFineTuning(Objective):
    """Masked target tokens under the seq2seq mask; validation ROUGE of greedy decoding."""
    name, unit = "unilm-train", "masked_tokens"
    find_unused_parameters = True  # the next-sentence head rides along unused

    def __init__(self, s: UniLMSettings, train: PairIds, valid: PairIds | None, tokenizer):
        self.s, self.train, self.valid, self.tokenizer = s, train, valid, tokenizer
        self.ids = special_ids(tokenizer)

    def config(self):
        return self.s.model

    def setup(self, run):
        self.run, self.tokens = run, 0
        self.order = DataOrder(len(self.train), self.s.batch_size, self.s.seed, run.info.rank, run.info.world_size)
        model = BertForPreTraining(self.s.model)
        if self.s.init_from:
            from ..interop.folder import read_state_dict
            from ..interop.hf_bert import init_from_state_dict
            report = init_from_state_dict(model, read_state_dict(self.s.init_from))
            if report.mismatched:
                raise ValueError(f"--init-from {self.s.init_from}: {report}")
            if run.is_main:
                progress.write(f"--init-from {self.s.init_from}: {report}")
        return model.to(run.device)

    def next_batch(self):
        position = [self.s.seed, self.order.epoch, self.order.index, self.run.info.rank]
        indices = self.order.next_indices()
        rng = np.random.default_rng(position)
        batch = masked_target_batch([(self.train.sources[i], self.train.targets[i]) for i in indices], self.ids,
                                    self.s.target_mask_prob, rng)
        self.tokens += int(batch["masked_lm_weights"].sum())
        return {k: v.to(self.run.device) for k, v in batch.items()}

    def loss(self, model, batch):
        return pretraining_loss(model, batch, nsp=False)[0]

    def step_stats(self):
        """The engine logs the loss; the unit counted is the predicted (masked) target tokens."""
        tokens, self.tokens = self.tokens, 0
        return {}, tokens

    def decoder(self, model):
        from ..models.unilm import UniLMSeq2Seq
        return UniLMSeq2Seq(model, self.ids["cls"], self.ids["sep"], self.ids["mask"], self.s.max_source_tokens)

    def evaluate(self, model):
        """ROUGE of greedy decoding on the first rouge_sentences validation pairs (main process)."""
        if self.valid is None or not self.s.rouge_sentences:
            return None
        from ..inference.unilm import detokenize, generate_ids, rouge
        n = min(self.s.rouge_sentences, len(self.valid))
        hyps = generate_ids(self.decoder(model), self.valid.sources[:n], max_len=self.s.max_target_tokens - 1)
        return rouge([detokenize(self.tokenizer, h[0].tokens) for h in hyps], self.valid.references[:n])

    def describe(self, metrics):
        return ", ".join(f"valid {k} {v:.2f}" for k, v in metrics.items())

    def state_dict(self):
        return {"order": self.order.state_dict()}

    def load_state_dict(self, state):
        self.order.load_state_dict(expect_fields(state, {"order": dict}, "the UniLM position")["order"])

    def identity(self):
        return {"train_pairs": len(self.train), "max_source_tokens": self.s.max_source_tokens,
                "max_target_tokens": self.s.max_target_tokens, "init_from": self.s.init_from}

    def curves(self, records, out, title):
        from ..training.metrics import plot_learning_curve
        c = self.s.model
        plot_learning_curve(records, os.path.join(out, "curves.png"), "rougeL",
                            title=f"UniLM L{c.num_hidden_layers}/H{c.hidden_size}, masked target tokens")

    def export(self, run, model, summary):
        from ..interop.unilm_folder import save_unilm_model
        save_unilm_model(os.path.join(self.s.out, "model"), model, self.tokenizer,
                         {"max_source_tokens": self.s.max_source_tokens, "max_target_tokens": self.s.max_target_tokens})


def train_unilm(s: UniLMSettings, train: PairIds, valid: PairIds | None, tokenizer) -> dict:
    """Fine-tune (or resume) to max_steps or max_minutes; write OUT/model (unilm_folder) and
    OUT/summary.json; return the summary with the trained model under "model"."""
    return fit(UniLMFineTuning(s, train, valid, tokenizer), s)
