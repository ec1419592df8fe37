"""UniLM pretraining (Dong et al. 2019, section 2.2): BERT's masked LM on the same shards and
masking as `bertlab pretrain`, each micro-batch under one of three self-attention masks, so one
set of weights learns to read both ways, left to right, and source-to-target:

    bidirectional      every token sees every token (core.masks.padding_mask: BERT)
    left-to-right      a token sees itself and the tokens before it (left_to_right_mask)
    seq2seq            segment A sees A; segment B sees A and B up to itself (seq2seq_mask)

The paper draws them in the shares 1/3, 1/6 (and 1/6 right-to-left), 1/3; here each of the
three gets a third. The mask of a micro-batch is drawn from its data position (the seed, phase,
epoch and index its instances were read at), so a resumed run draws the masks it would have drawn.
Next-sentence prediction is left out (a left-to-right [CLS] sees only itself); the held-out
evaluation scores the masked LM under the bidirectional mask, as `bertlab pretrain` does.
"""
import numpy as np

from ..core import left_to_right_mask, seq2seq_mask
from ..models.losses import pretraining_loss
from .objective import MaskedLMPretraining

MASKS = ("bidirectional", "left_to_right", "seq2seq")


def unilm_attention_mask(kind: str, token_type_ids, attention_mask):
    """The attention mask BertModel takes for `kind`: the padding mask itself for bidirectional
    (so the packed fast path still applies), a full (batch, 1, len, len) mask otherwise."""
    if kind == "bidirectional":
        return attention_mask
    if kind == "left_to_right":
        return left_to_right_mask(attention_mask)
    if kind == "seq2seq":
        return seq2seq_mask(token_type_ids, attention_mask)
    raise ValueError(f"unknown UniLM mask {kind!r}; choose one of {MASKS}")


class UniLMPretraining(MaskedLMPretraining):
    name = "unilm-pretrain"
    find_unused_parameters = True  # the next-sentence head gets no gradient
    compile_whole_loss = False  # not checked to trace as one graph: --compile compiles the model

    def setup(self, run):
        model = super().setup(run)
        self.find_unused_parameters = True
        self.counts = dict.fromkeys(MASKS, 0)
        return model

    def next_batch(self):
        p = self.current
        position = [self.s.seed, p.number, p.order.epoch, p.order.index, p.rank]
        batch = super().next_batch()
        kind = MASKS[int(np.random.default_rng(position).integers(len(MASKS)))]
        self.counts[kind] += 1
        return {**batch, "attention_mask": unilm_attention_mask(kind, batch["token_type_ids"],
                                                                batch["attention_mask"])}

    def loss(self, model, batch):
        loss, parts = pretraining_loss(model, batch, nsp=False)
        self.parts.append(parts)
        return loss

    def step_stats(self):
        k, parts = len(self.parts), self.parts
        values = {"mlm_loss": float(sum(p["mlm_loss"] for p in parts) / k)}
        tokens, self.parts, self.tokens = self.tokens, [], 0
        return values, tokens

    def state_dict(self):
        return {**super().state_dict(), "masks": dict(self.counts)}

    def load_state_dict(self, state):
        from ..training.checkpoint import check_count, expect_fields
        super().load_state_dict(state)
        counts = expect_fields(state, {"masks": dict}, "the UniLM position")["masks"]
        if set(counts) != set(MASKS):
            raise ValueError(f"the UniLM mask counts are of {sorted(map(str, counts))}, not {list(MASKS)}")
        self.counts = {kind: check_count(counts[kind], f"the UniLM {kind} mask count", whole=True) for kind in MASKS}

    def identity(self):
        return {**super().identity(), "objective": "unilm"}

    def summary(self, summary):
        return {**super().summary(summary), "micro_batches_per_mask": dict(self.counts)}
