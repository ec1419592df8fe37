"""The shared Transformer core: BERT, the seq2seq Transformer and GPT are assembled from these."""
from .attention import MultiHeadAttention, attention, scaled_dot_product_attention
from .blocks import DecoderBlock, EncoderBlock, SublayerConnection
from .embeddings import PositionalEncoding, sinusoidal_positions
from .feed_forward import PositionwiseFeedForward, activation
from .kv_cache import KVCache
from .masks import causal_mask, left_to_right_mask, padding_mask, seq2seq_mask
from .relative_positions import RELATIVE_TYPES, make_relative_positions

__all__ = [
    "KVCache", "MultiHeadAttention", "attention", "scaled_dot_product_attention", "DecoderBlock", "EncoderBlock",
    "SublayerConnection", "PositionalEncoding", "sinusoidal_positions", "PositionwiseFeedForward",
    "activation", "causal_mask", "left_to_right_mask", "padding_mask", "seq2seq_mask", "RELATIVE_TYPES",
    "make_relative_positions",
]
