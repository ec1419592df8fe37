"""BERT (Devlin et al., 2018) assembled from the shared core: embeddings, a post-LN encoder stack,
the pooler, and the pretraining and fine-tuning heads."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..core import EncoderBlock, activation, make_relative_positions, padding_mask
from .bert_config import BertConfig


class BertEmbeddings(nn.Module):
    """token + learned position + segment embeddings, summed, then LayerNorm and dropout; E wide
    (config.embedding_size, the factorised embedding of ALBERT and ELECTRA: BertModel projects E to
    hidden_size) or else H wide.

    With relative positions (config.position_embedding_type) attention carries the positions and
    no absolute position is added; relative_key(_query) keep the unused table as HF does (its
    checkpoints hold it), NEZHA has none, so its sequences may be of any length."""

    def __init__(self, config: BertConfig):
        super().__init__()
        width = config.embedding_size or config.hidden_size
        self.absolute = config.position_embedding_type == "absolute"
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        if config.position_embedding_type != "nezha":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, width)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width)
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def sum_embeddings(self, input_ids, token_type_ids=None):
        """E_token + E_position + E_segment: the same as one-hot [token | position | segment] times
        the three tables stacked into one matrix."""
        length = input_ids.size(1)
        x = self.word_embeddings(input_ids)
        if self.absolute:
            if length > self.position_embeddings.num_embeddings:
                raise ValueError(f"sequence of {length} tokens exceeds max_position_embeddings "
                                 f"{self.position_embeddings.num_embeddings} (absolute positions know no more; "
                                 "a model with position_embedding_type nezha runs on any length)")
            x = x + self.position_embeddings.weight[:length]
        if token_type_ids is None:
            return x + self.token_type_embeddings.weight[0]
        return x + self.token_type_embeddings(token_type_ids)

    def forward(self, input_ids, token_type_ids=None):
        """(batch, len, hidden)."""
        return self.dropout(self.norm(self.sum_embeddings(input_ids, token_type_ids)))


class Pooler(nn.Module):
    """The [CLS] vector through dense + tanh: the sentence representation NSP was trained on."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, sequence_output):
        return torch.tanh(self.dense(sequence_output[:, 0]))


@dataclass
class BertOutput:
    sequence_output: torch.Tensor  # (batch, len, hidden): the last layer
    pooled_output: torch.Tensor  # (batch, hidden)
    hidden_states: list | None = None  # embeddings output, then every layer's output
    attentions: list | None = None  # every layer's (batch, heads, len, len) attention weights


class BertModel(nn.Module):
    """init_weights=False skips random initialisation, for a model whose every tensor is about to be
    loaded from a checkpoint (google's truncated normal costs seconds on a CPU)."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        if (config.embedding_size or config.hidden_size) != config.hidden_size:
            # factorised embedding: V x E tables + an E x H projection instead of V x H (ALBERT, sec. 3.1;
            # ELECTRA's small generators project a larger E down to their H)
            self.embedding_projection = nn.Linear(config.embedding_size, config.hidden_size)
        # one block per group of shared layers (config.num_hidden_groups), else one per layer
        d_head = config.hidden_size // config.num_attention_heads
        self.layers = nn.ModuleList(
            EncoderBlock(config.hidden_size, config.num_attention_heads, config.intermediate_size,
                         dropout=config.hidden_dropout_prob, attention_dropout=config.attention_probs_dropout_prob,
                         act=config.hidden_act, norm_first=False, eps=config.layer_norm_eps,
                         relative_positions=make_relative_positions(
                             config.position_embedding_type, d_head, config.max_position_embeddings,
                             config.max_relative_position))
            for _ in range(config.num_hidden_groups or config.num_hidden_layers))
        self.pooler = Pooler(config)
        if init_weights:
            self.apply(self._init_weights)

    def _init_weights(self, module):
        # google-research/bert: truncated normal(0.02) weights, zero biases, LayerNorm (1, 0).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, std=self.config.initializer_range,
                                  a=-2 * self.config.initializer_range, b=2 * self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False,
                output_attentions=False, positions=None, selected=None) -> BertOutput:
        """The last layer's output at every position, and the pooled [CLS].

        attention_mask: (batch, len), 1 for real tokens and 0 for padding, or a full mask (batch,
        len, len) or (batch, 1, len, len), True where query i may see key j (UniLM's, core.masks).
        What the heads read may be asked for, in place of every position (sequence_output then holds
        those alone): positions (batch, n), the positions a pretraining or relation head reads, gives
        (batch, n, hidden); selected (batch, len) bool, the tokens token classification scores, gives
        (n, hidden) in row-major order and no pooled output. The accelerated model (models.accelerate)
        then computes the last layer there alone; here it is the whole computation, then a gather."""
        mask = self.padding(attention_mask)
        x = self.embed(input_ids, token_type_ids)
        hidden_states, attentions = [x] if output_hidden_states else None, [] if output_attentions else None
        for layer in self.layer_stack():
            x, weights = layer(x, mask, need_weights=output_attentions)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(weights)
        pooled = self.pooler(x)
        if positions is not None:
            x = x.gather(1, positions[..., None].expand(-1, -1, x.size(-1)))
        elif selected is not None:
            x, pooled = x[selected], None  # token classification reads no [CLS]
        return BertOutput(x, pooled, hidden_states, attentions)

    def layer_stack(self) -> list:
        """The num_hidden_layers blocks the input runs through, in order. Without sharing, each
        layer's own; with cross-layer parameter sharing (ALBERT, sec. 3.1) layer i runs the block
        of group i * groups // layers, so one group means one set of weights run every time."""
        n, groups = self.config.num_hidden_layers, len(self.layers)
        return list(self.layers) if groups == n else [self.layers[i * groups // n] for i in range(n)]

    def embed(self, input_ids, token_type_ids=None):
        """The embeddings, projected from E to H when the embedding is factorised."""
        x = self.embeddings(input_ids, token_type_ids)
        projection = getattr(self, "embedding_projection", None)
        return x if projection is None else projection(x)

    @staticmethod
    def padding(attention_mask):
        """The boolean mask attention takes: (batch, 1, 1, len) from a padding mask, (batch, 1, len,
        len) from a full one; None when there is no mask."""
        if attention_mask is None:
            return None
        if attention_mask.dim() > 2:
            return full_mask(attention_mask)
        return padding_mask(attention_mask)

    def get_embedding_table(self):
        return self.embeddings.word_embeddings.weight


def full_mask(mask):
    """A (batch, len, len) or (batch, 1, len, len) mask as the bool (batch, 1, len, len) attention takes."""
    if mask.dim() == 3:
        mask = mask[:, None]
    if mask.dim() != 4 or mask.size(1) != 1 or mask.size(-1) != mask.size(-2):
        raise ValueError(f"a full attention mask is (batch, len, len) or (batch, 1, len, len), got {tuple(mask.shape)}")
    return mask.bool()


class MaskedLMHead(nn.Module):
    """dense + GELU + LayerNorm, then the decoder tied to the word embeddings plus an output bias.

    Computed only at the positions asked for (google-research/bert gathers the masked positions),
    so pretraining never pays for a vocabulary-size softmax at every position.
    """

    def __init__(self, config: BertConfig, embedding_table: nn.Parameter, act: str | None = None):
        super().__init__()
        # H -> E when the embedding is factorised (ALBERT, ELECTRA's generator): the decoder is the
        # E-wide word embedding table. `act` replaces hidden_act (ELECTRA's generator: GELU always)
        width = config.embedding_size or config.hidden_size
        self.dense = nn.Linear(config.hidden_size, width)
        self.act = activation(act or config.hidden_act)
        self.norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.embedding_table = embedding_table  # shared Parameter, not a copy
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, sequence_output, positions=None):
        """positions: (batch, n) indices into the sequence, or None for every position."""
        if positions is not None:
            index = positions[..., None].expand(-1, -1, sequence_output.size(-1))
            sequence_output = sequence_output.gather(1, index)
        h = self.norm(self.act(self.dense(sequence_output)))
        return F.linear(h, self.embedding_table, self.bias)


class NextSentenceHead(nn.Module):
    """Is B the sentence that follows A? Two logits (0 = IsNext, 1 = NotNext) from the pooled output."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.linear = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled_output):
        return self.linear(pooled_output)


class BertForPreTraining(nn.Module):
    """BERT with the masked-LM and next-sentence heads of run_pretraining.py. `nsp` is the
    sentence-pair head, of class `sentence_head` (ALBERT's subclass predicts sentence order)."""
    sentence_head = NextSentenceHead

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, init_weights)
        self.mlm = MaskedLMHead(config, self.bert.get_embedding_table())
        self.nsp = self.sentence_head(config)
        if init_weights:
            self.mlm.apply(self.bert._init_weights)
            self.nsp.apply(self.bert._init_weights)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, masked_lm_positions=None):
        """(MLM logits at masked_lm_positions, or at every position when None; NSP logits)."""
        out = self.bert(input_ids, token_type_ids, attention_mask, positions=masked_lm_positions)
        return self.mlm(out.sequence_output), self.nsp(out.pooled_output)
