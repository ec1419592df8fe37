"""SpanBERT's span-boundary objective (Joshi et al., 2020, section 3.2): predict each piece of a
masked span from the encoder outputs of the two pieces just outside the span and the piece's
position inside it, through a 2-layer feed-forward network with GeLU and LayerNorm:

    h0 = [x_(s-1); x_(e+1); p_(i-s+1)]
    h1 = LayerNorm(GeLU(W1 h0))
    y_i = LayerNorm(GeLU(W2 h1))           then the masked-LM decoder: y_i E^T + b

The output embeddings are the word embeddings, tied as in the masked-LM head.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..core import activation
from .bert import BertForPreTraining
from .bert_config import BertConfig

MAX_SPAN_PIECES = 64  # relative positions inside a span: 10 words rarely reach it; longer ones share the last


class SpanBoundaryHead(nn.Module):
    def __init__(self, config: BertConfig, embedding_table: nn.Parameter, max_span_pieces: int = MAX_SPAN_PIECES):
        super().__init__()
        H = config.hidden_size
        self.position_embeddings = nn.Embedding(max_span_pieces, H)  # p_1, p_2, ... inside a span
        self.dense1, self.norm1 = nn.Linear(3 * H, H), nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.dense2, self.norm2 = nn.Linear(H, H), nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.act = activation(config.hidden_act)
        self.embedding_table = embedding_table  # shared with the word embeddings, not a copy
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, left, right, offsets):
        """left, right: (batch, n, hidden) outputs at the boundaries; offsets: (batch, n) i - s,
        0 for a span's first piece. Returns (batch, n, vocab) logits."""
        p = self.position_embeddings(offsets.clamp(0, self.position_embeddings.num_embeddings - 1))
        h = self.norm1(self.act(self.dense1(torch.cat([left, right, p], -1))))
        h = self.norm2(self.act(self.dense2(h)))
        return F.linear(h, self.embedding_table, self.bias)


class BertForSpanBoundaryPreTraining(nn.Module):
    """BertForPreTraining (`pretraining`, what is saved and fine-tuned) plus the span-boundary head,
    which only pretraining uses. Without boundaries forward() is BertForPreTraining's."""

    def __init__(self, config: BertConfig, init_weights: bool = True):
        super().__init__()
        self.config = config
        self.pretraining = BertForPreTraining(config, init_weights)
        self.sbo = SpanBoundaryHead(config, self.pretraining.bert.get_embedding_table())
        if init_weights:
            self.sbo.apply(self.pretraining.bert._init_weights)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, masked_lm_positions=None,
                masked_lm_boundaries=None):
        """(MLM logits, NSP logits), and with masked_lm_boundaries (batch, n, 2) the span-boundary
        logits at masked_lm_positions (batch, n) as a third."""
        if masked_lm_boundaries is None:
            return self.pretraining(input_ids, token_type_ids, attention_mask, masked_lm_positions)
        n = masked_lm_positions.size(1)
        # one pass of the encoder reads the masked pieces and both boundaries
        rows = torch.cat([masked_lm_positions, masked_lm_boundaries[..., 0], masked_lm_boundaries[..., 1]], 1)
        out = self.pretraining.bert(input_ids, token_type_ids, attention_mask, positions=rows)
        x = out.sequence_output
        mlm = self.pretraining.mlm(x[:, :n])
        nsp = self.pretraining.nsp(out.pooled_output)
        offsets = masked_lm_positions - masked_lm_boundaries[..., 0] - 1
        return mlm, nsp, self.sbo(x[:, n:2 * n], x[:, 2 * n:], offsets)
