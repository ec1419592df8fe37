"""ALBERT (Lan et al. 2019) as the shared BERT with ALBERT's config: a factorised embedding, one set
of layer weights shared by every layer, and the sentence-order prediction (SOP) head.

Nothing of the encoder is copied: BertModel builds the E-wide embeddings, the E -> H projection
and the shared layers from an AlbertConfig (models/bert.py), and MaskedLMHead ends E wide, tied to
the E-wide word embeddings (dense H -> E, activation, LayerNorm(E), decoder), which is ALBERT's.
"""
from torch import nn

from .albert_config import AlbertConfig
from .bert import BertForPreTraining, BertModel


def _check(config):
    if not isinstance(config, AlbertConfig):
        raise TypeError(f"ALBERT needs an AlbertConfig, not a {type(config).__name__}")


class AlbertModel(BertModel):
    """The ALBERT encoder: BertModel on an AlbertConfig (HF's AlbertModel)."""

    def __init__(self, config: AlbertConfig, init_weights: bool = True):
        _check(config)
        super().__init__(config, init_weights)


class SentenceOrderHead(nn.Module):
    """Are segments A and B in their order in the document (0) or swapped (1)? Dropout, then two
    logits from the pooled [CLS] output (ALBERT sec. 4.6: SOP instead of NSP)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.linear = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled_output):
        return self.linear(self.dropout(pooled_output))


class AlbertForPreTraining(BertForPreTraining):
    """ALBERT with its masked-LM and sentence-order heads (HF's AlbertForPreTraining); called as
    BertForPreTraining (MLM logits, SOP logits), so pretraining's loss and loop serve both."""
    sentence_head = SentenceOrderHead

    def __init__(self, config: AlbertConfig, init_weights: bool = True):
        _check(config)
        super().__init__(config, init_weights)
