"""Encoder and decoder blocks: attention and feed-forward sublayers, each wrapped in residual + LayerNorm."""
from torch import nn

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward


class SublayerConnection(nn.Module):
    """x + Dropout(Sublayer(x)) with LayerNorm after the sum (post-LN: the paper, BERT) or before
    the sublayer (pre-LN: GPT-2, which trains deep stacks more stably)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def before(self, x):
        return self.norm(x) if self.norm_first else x

    def after(self, x, sublayer_out):
        y = x + self.dropout(sublayer_out)
        return y if self.norm_first else self.norm(y)


class EncoderBlock(nn.Module):
    """Self-attention over the whole sequence, then the position-wise feed-forward network."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, attention_dropout=None, act="gelu",
                 norm_first=False, eps=1e-12, relative_positions=None):
        """relative_positions: the self-attention's (core.relative_positions), if any."""
        super().__init__()
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.attention = MultiHeadAttention(d_model, num_heads, attention_dropout,
                                            relative_positions=relative_positions)
        self.attention_sublayer = SublayerConnection(d_model, dropout, norm_first, eps)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, act)
        self.feed_forward_sublayer = SublayerConnection(d_model, dropout, norm_first, eps)

    def forward(self, x, mask=None, need_weights=False):
        """(x through self-attention and the feed-forward network, attention probabilities or None)."""
        a, weights = self.attention(self.attention_sublayer.before(x), mask=mask, need_weights=need_weights)
        x = self.attention_sublayer.after(x, a)
        x = self.feed_forward_sublayer.after(x, self.feed_forward(self.feed_forward_sublayer.before(x)))
        return x, weights


class DecoderBlock(nn.Module):
    """Masked self-attention over the target so far, encoder-decoder attention over the source
    (left out for decoder-only models such as GPT), then the feed-forward network.

    With a cache (core.kv_cache.KVCache), each call may pass only the newest positions: their keys
    and values are appended, so a decoding step costs one position instead of the whole prefix.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, attention_dropout=None, act="relu",
                 norm_first=False, eps=1e-5, cross_attention=True):
        super().__init__()
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.self_attention = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.self_attention_sublayer = SublayerConnection(d_model, dropout, norm_first, eps)
        if cross_attention:
            self.cross_attention = MultiHeadAttention(d_model, num_heads, attention_dropout)
            self.cross_attention_sublayer = SublayerConnection(d_model, dropout, norm_first, eps)
        else:
            self.cross_attention = None
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, act)
        self.feed_forward_sublayer = SublayerConnection(d_model, dropout, norm_first, eps)

    def forward(self, x, memory=None, self_mask=None, memory_mask=None, cache=None, need_weights=False, layer=0):
        """layer: which of the cache's layers this block is."""
        sub = self.self_attention_sublayer
        a, self_weights = self.self_attention(sub.before(x), mask=self_mask, cache=cache, need_weights=need_weights,
                                              layer=layer)
        x = sub.after(x, a)
        cross_weights = None
        if self.cross_attention is not None:
            sub = self.cross_attention_sublayer
            a, cross_weights = self.cross_attention(sub.before(x), memory, mask=memory_mask,
                                                    cache=cache, need_weights=need_weights, layer=layer)
            x = sub.after(x, a)
        x = self.feed_forward_sublayer.after(x, self.feed_forward(self.feed_forward_sublayer.before(x)))
        return x, (self_weights, cross_weights)
