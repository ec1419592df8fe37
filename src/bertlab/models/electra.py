"""ELECTRA (Clark et al., 2020), the notes' answer to "masked LM learns from only 15% of the
positions" (notes 001, BERT 的不足): a small masked-LM *generator* fills the masked positions with
plausible tokens, and the *discriminator* -- the encoder that is kept -- learns at every position
whether its token is the original or a replacement (replaced-token detection).

Both are the BERT encoder of models/bert.py (with the factorised embedding, config.embedding_size);
the encoder sits under `electra.` as in HF's Electra* classes, so their checkpoints map by the
name table of interop/hf_electra.py. ELECTRA has no pooler: its sentence vector is the [CLS] output.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..core import activation
from .bert import BertModel, MaskedLMHead
from .bert_config import BertConfig


class FirstToken(nn.Module):
    """ELECTRA's "pooled output": the [CLS] vector as it is (HF's summary_type "first"), no weights."""

    def forward(self, sequence_output):
        return sequence_output[:, 0]


def electra_encoder(config: BertConfig, init_weights: bool) -> BertModel:
    encoder = BertModel(config, init_weights)
    encoder.pooler = FirstToken()
    return encoder


class ReplacedTokenDetectionHead(nn.Module):
    """dense H -> H, activation, dense H -> 1: one logit per position, "this token was replaced"."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, sequence_output):
        return self.dense_prediction(self.act(self.dense(sequence_output))).squeeze(-1)


class ElectraForPreTraining(nn.Module):
    """The discriminator: the encoder plus the replaced-token-detection head at every position."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.electra = electra_encoder(config, init_weights)
        self.discriminator = ReplacedTokenDetectionHead(config)
        if init_weights:
            self.discriminator.apply(self.electra._init_weights)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        """(batch, len) logits: > 0 says "replaced"."""
        return self.discriminator(self.electra(input_ids, token_type_ids, attention_mask).sequence_output)


class ElectraForMaskedLM(nn.Module):
    """The generator: a narrower encoder plus the masked-LM head, decoder tied to its word embeddings."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.electra = electra_encoder(config, init_weights)
        # HF's ElectraGeneratorPredictions: BERT's masked-LM head, GELU whatever hidden_act says
        self.generator = MaskedLMHead(config, self.electra.get_embedding_table(), act="gelu")
        if init_weights:
            self.generator.apply(self.electra._init_weights)

    def share_embeddings(self, embeddings: nn.Module):
        """Use `embeddings` (the discriminator's token, position and segment tables and their
        LayerNorm) as this generator's own: the paper's tied embeddings."""
        self.electra.embeddings = embeddings
        self.generator.embedding_table = embeddings.word_embeddings.weight

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, positions=None):
        """Vocabulary logits at `positions` (batch, n), or at every position when None. With
        positions, the accelerated encoder's last layer runs at those positions only: exact, less work."""
        if positions is None:
            return self.generator(self.electra(input_ids, token_type_ids, attention_mask).sequence_output)
        out = self.electra(input_ids, token_type_ids, attention_mask, positions=positions)
        return self.generator(out.sequence_output)


class Electra(nn.Module):
    """Generator and discriminator trained together, sharing the embeddings; what pretraining
    builds (pretraining/electra.py) and exports as two HF folders."""

    def __init__(self, discriminator: BertConfig, generator: BertConfig, init_weights: bool = True):
        super().__init__()
        check_pair(discriminator, generator)
        self.config = discriminator
        self.discriminator = ElectraForPreTraining(discriminator, init_weights)
        self.generator = ElectraForMaskedLM(generator, init_weights)
        self.generator.share_embeddings(self.discriminator.electra.embeddings)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_positions, masked_lm_ids,
                masked_lm_weights, sampling_generator: torch.Generator | None = None):
        """One joint step on a masked batch: (generator logits at the masked positions (batch, n,
        vocab); discriminator logits at the real positions, flattened (tokens,); their labels, 1 =
        replaced). The replacements are sampled from the generator's softmax without gradient."""
        logits = self.generator(input_ids, token_type_ids, attention_mask, masked_lm_positions)
        with torch.no_grad():
            sampled = sample(logits, sampling_generator)
            original, corrupted = replace_tokens(input_ids, masked_lm_positions, masked_lm_ids,
                                                 masked_lm_weights, sampled)
        real = attention_mask.bool()
        hidden = self.discriminator.electra(corrupted, token_type_ids, attention_mask).sequence_output[real]
        # the head at the real positions only: no work on the padding
        return logits, self.discriminator.discriminator(hidden), replaced_labels(original, corrupted)[real]


def replace_tokens(input_ids, positions, original_ids, weights, sampled):
    """(original, corrupted) input ids: the masked positions (those with weight 1) restored to the
    original tokens, and filled with the generator's samples. The unused prediction slots (weight 0,
    position 0) write back what is there already, so [CLS] is never touched."""
    real = weights > 0
    original = input_ids.scatter(1, positions, torch.where(real, original_ids, input_ids.gather(1, positions)))
    corrupted = original.scatter(1, positions, torch.where(real, sampled, original.gather(1, positions)))
    return original, corrupted


def replaced_labels(original, corrupted):
    """1 where the discriminator's input differs from the original, else 0: a sampled token equal to
    the original is labelled original, as in the paper."""
    return (corrupted != original).long()


def sample(logits, generator: torch.Generator | None = None):
    """One token per position from softmax(logits) (batch, n, vocab) -> (batch, n); no gradient.

    By the inverse of the cumulative distribution: the first token whose cumulative probability
    exceeds a uniform draw. torch.multinomial draws an exponential for every vocabulary entry
    instead, and on a CPU that took 28% of an ELECTRA step (vocabulary 8,000, 640 positions)."""
    cdf = F.softmax(logits.detach().float(), dim=-1).flatten(0, 1).cumsum(-1)
    draw = torch.rand(cdf.size(0), 1, generator=generator, device=cdf.device) * cdf[:, -1:]
    # right=True: a draw of exactly 0 still lands on a token with probability > 0
    tokens = torch.searchsorted(cdf, draw, right=True).clamp_(max=cdf.size(1) - 1)
    return tokens.view(logits.shape[:-1])


SHARED_FIELDS = ("vocab_size", "max_position_embeddings", "type_vocab_size", "pad_token_id")


def check_pair(discriminator: BertConfig, generator: BertConfig):
    """Shared embeddings need the same tables: vocabulary, positions, segments and width E."""
    for name in SHARED_FIELDS:
        if getattr(discriminator, name) != getattr(generator, name):
            raise ValueError(f"generator and discriminator must share the embeddings, but {name} is "
                             f"{getattr(generator, name)} in the generator and {getattr(discriminator, name)} "
                             "in the discriminator")
    e_d = discriminator.embedding_size or discriminator.hidden_size
    e_g = generator.embedding_size or generator.hidden_size
    if e_d != e_g:
        raise ValueError(f"generator and discriminator must share the embeddings, but their widths differ: "
                         f"embedding_size {e_g} in the generator, {e_d} in the discriminator")
