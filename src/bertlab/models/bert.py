"""BERT (Devlin et al., 2018) assembled from the shared core: embeddings, a post-LN encoder stack,
the pooler, and the pretraining and fine-tuning heads."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..core import EncoderBlock, activation, make_relative_positions, padding_mask
from ..core import fast_paths
from ..core.fast_paths import NumpyDropout, Packing
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
        self.dropout = NumpyDropout(config.hidden_dropout_prob)

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

    def forward(self, input_ids, token_type_ids=None, packing: Packing | None = None):
        """(batch, len, hidden); with `packing`, the real tokens only, (tokens, hidden)."""
        x = self.sum_embeddings(input_ids, token_type_ids)
        if packing is not None:
            x = packing.pack(x)
        return self.dropout(self.norm(x))


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

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                output_hidden_states=False, output_attentions=False) -> BertOutput:
        """Every position's last-layer output. On a CPU the padding is packed away first
        (core.fast_paths.unpadding: the position-wise layers skip it), and the outputs are unpacked
        at the end with zeros at the padding; outputs at real positions are those of the padded
        computation."""
        mask, packing = self.padding(attention_mask, buckets=not output_attentions)
        x = self.embed(input_ids, token_type_ids, packing)
        unpack = packing.unpack if packing is not None else lambda t: t
        hidden_states, attentions = [unpack(x)] if output_hidden_states else None, [] if output_attentions else None
        for layer in self.layer_stack():
            x, weights = layer(x, mask, need_weights=output_attentions, packing=packing)
            if output_hidden_states:
                hidden_states.append(unpack(x))
            if output_attentions:
                attentions.append(weights)
        x = unpack(x)
        return BertOutput(x, self.pooler(x), hidden_states, attentions)

    def forward_at(self, positions, input_ids, token_type_ids=None, attention_mask=None) -> BertOutput:
        """The last layer's output at `positions` (batch, n) only, (batch, n, hidden), and the pooled
        [CLS]: what the pretraining and sentence heads read. As forward() with the padding packed
        away, and the last layer computes only the n positions and [CLS] (its keys and values still
        see every token): the same outputs for less work."""
        if self.config.position_embedding_type != "absolute":  # queries need positions 0..len-1: whole layer
            out = self.forward(input_ids, token_type_ids, attention_mask)
            index = positions[..., None].expand(-1, -1, out.sequence_output.size(-1))
            return BertOutput(out.sequence_output.gather(1, index), out.pooled_output)
        mask, packing = self.padding(attention_mask, buckets=True)
        x = self.below_last_layer(input_ids, token_type_ids, mask, packing)
        rows = torch.cat([positions.new_zeros(positions.size(0), 1), positions], 1)  # [CLS] first, for the pooler
        if packing is not None:
            queries = x.index_select(0, packing.rows(rows).reshape(-1)).view(*rows.shape, -1)
        else:
            queries = x.gather(1, rows[..., None].expand(-1, -1, x.size(-1)))
        if mask is not None and mask.size(-2) > 1:  # a full mask: the rows of the queries computed
            mask = mask[torch.arange(len(rows), device=rows.device)[:, None], 0, rows][:, None]
        x, _ = self.layer_stack()[-1](x, mask, queries=queries, packing=packing)
        return BertOutput(x[:, 1:], self.pooler(x))

    def forward_where(self, selected, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        """The last layer's output where `selected` (batch, len) is True, (n, hidden) in row-major
        order: forward().sequence_output[selected], with the padding packed away and the last layer's
        output projection and feed-forward network run for the selected positions alone (its
        attention still reads every token). Token classification's loss reads the labelled word
        pieces only (two thirds of man-page NER's tokens): the same vectors for less work."""
        mask, packing = self.padding(attention_mask, buckets=True)
        if packing is None:  # nothing to pack (no padding, a GPU, an export trace): the whole computation
            return self.forward(input_ids, token_type_ids, attention_mask).sequence_output[selected]
        x = self.below_last_layer(input_ids, token_type_ids, mask, packing)
        x, _ = self.layer_stack()[-1](x, mask, packing=packing, rows=packing.rows_where(selected))
        return x

    def below_last_layer(self, input_ids, token_type_ids, mask, packing):
        """The embeddings through every layer but the last: what forward_at and forward_where share
        before their last layer computes only some positions."""
        x = self.embed(input_ids, token_type_ids, packing)
        for layer in self.layer_stack()[:-1]:
            x, _ = layer(x, mask, packing=packing)
        return x

    def layer_stack(self) -> list:
        """The num_hidden_layers blocks the input runs through, in order. Without sharing, each
        layer's own; with cross-layer parameter sharing (ALBERT, sec. 3.1) layer i runs the block
        of group i * groups // layers, so one group means one set of weights run every time."""
        n, groups = self.config.num_hidden_layers, len(self.layers)
        return list(self.layers) if groups == n else [self.layers[i * groups // n] for i in range(n)]

    def embed(self, input_ids, token_type_ids=None, packing=None):
        """The embeddings, projected from E to H when the embedding is factorised."""
        x = self.embeddings(input_ids, token_type_ids, packing)
        projection = getattr(self, "embedding_projection", None)
        return x if projection is None else projection(x)

    def padding(self, attention_mask, buckets=False):
        """(boolean attention mask, Packing) of a batch; (None, None) when nothing is padding (the
        fused attention kernel then runs unmasked). Packing is for CPUs: on a GPU its index
        bookkeeping (a host sync, extra small kernels) cost more than the padding it skips (H100,
        bf16 BERT-base batch 64: 39.8 ms a step packed, 26.9 padded). With `buckets`, self-attention
        runs over rows of similar length together, each bucket padded to its own longest row
        (fast_paths.unpadding): a shuffled batch of man-page sentences then took 19% less CPU time a
        fine-tuning step (token classification, MiniLM, batch 32); attention pictures
        (output_attentions) keep the batch's one padded layout.

        A full mask, (batch, len, len) or (batch, 1, len, len) bool with True where query i may
        see key j (UniLM's left-to-right and sequence-to-sequence masks, core.masks), goes as it is
        to attention, on the plain padded path: packing assumes each row sees all its real keys."""
        if attention_mask is not None and attention_mask.dim() > 2:
            return _full_mask(attention_mask), None
        if attention_mask is None:
            return None, None
        # fast_paths.plain_path(): a graph for every batch (ONNX export); torch.compile: one graph,
        # no host sync; a GPU's training step: no host sync (the step launches ahead of the GPU)
        if fast_paths.in_plain_path() or torch.compiler.is_compiling() or \
                (attention_mask.device.type != "cpu" and torch.is_grad_enabled()):
            return padding_mask(attention_mask), None
        if bool(attention_mask.all()):
            return None, None
        packing = Packing(attention_mask, buckets) if attention_mask.device.type == "cpu" else None
        return padding_mask(attention_mask), packing

    def get_embedding_table(self):
        return self.embeddings.word_embeddings.weight


def _full_mask(mask):
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
        if masked_lm_positions is None:
            out = self.bert(input_ids, token_type_ids, attention_mask)
        else:  # without the padding, and the last layer at the masked positions only: exact, ~25% less work
            out = self.bert.forward_at(masked_lm_positions, input_ids, token_type_ids, attention_mask)
        return self.mlm(out.sequence_output), self.nsp(out.pooled_output)
