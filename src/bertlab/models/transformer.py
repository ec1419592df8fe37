"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for translation.

An encoder stack and a decoder stack of the shared core's post-LN blocks (the paper's
LayerNorm(x + Sublayer(x))), token embeddings multiplied by sqrt(d_model) plus the fixed
sinusoidal positions, dropout on that sum, and an output projection to the target vocabulary.
Post-LN ends every block with a LayerNorm, so neither stack has a final one (pre-LN stacks, as in
the annotated transformer and fairseq's --normalize-before, need it; the paper's does not).
"""
import math

from torch import nn

from .transformer_config import PRESETS, TransformerConfig  # noqa: F401 (imported from here too)
from ..core import DecoderBlock, EncoderBlock, KVCache, PositionalEncoding, causal_mask, padding_mask


class Seq2SeqTransformer(nn.Module):
    """`forward(src, tgt_in) -> logits` for teacher forcing; `encode` once and `decode` step by step
    (with `new_cache`) for translation. Token id tensors are (batch, len), padded with pad_token_id."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.source_embedding = nn.Embedding(c.source_vocab_size, c.d_model, padding_idx=c.pad_token_id)
        self.target_embedding = (self.source_embedding if c.share_embeddings else
                                 nn.Embedding(c.target_vocab_size, c.d_model, padding_idx=c.pad_token_id))
        self.positions = PositionalEncoding(c.d_model, c.max_position_embeddings)
        self.dropout = nn.Dropout(c.dropout)
        block = dict(dropout=c.dropout, attention_dropout=c.attention_dropout, act=c.activation_function,
                     norm_first=False, eps=c.layer_norm_eps)
        self.encoder = nn.ModuleList(EncoderBlock(c.d_model, c.attention_heads, c.ffn_dim, **block)
                                     for _ in range(c.encoder_layers))
        self.decoder = nn.ModuleList(DecoderBlock(c.d_model, c.attention_heads, c.ffn_dim, **block)
                                     for _ in range(c.decoder_layers))
        self.output = nn.Linear(c.d_model, c.target_vocab_size, bias=False)
        self._init_weights()
        if c.tie_word_embeddings or c.share_embeddings:
            self.output.weight = self.target_embedding.weight

    def _init_weights(self):
        # N(0, init_std) for every matrix and table, zero biases and padding row: Marian's, BERT's
        # and GPT's rule (init_std 0.02). fairseq's Xavier-uniform matrices (std 0.0625 at d_model
        # 256) with N(0, d_model^-0.5) tables start 2-3x larger; Adam moves every weight by about
        # the same step whatever its size, so the larger start learns slower at a given rate: after
        # 300 steps of the small preset on real de->en catalogs, valid NLL 5.07 with it, 4.48 with
        # this (docs/results/translation-parity.md).
        std = self.config.init_std
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=std)
                nn.init.zeros_(module.weight[module.padding_idx])

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def embed(self, embedding: nn.Embedding, ids, start: int = 0):
        """Section 3.4: embeddings times sqrt(d_model), plus positions, then dropout."""
        return self.dropout(self.positions(embedding(ids) * math.sqrt(self.config.d_model), start))

    def encode(self, src):
        """(memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)): padded source tokens
        are hidden from encoder self-attention and from the decoder's encoder-decoder attention."""
        src_mask = padding_mask(src != self.config.pad_token_id)
        x = self.embed(self.source_embedding, src)
        for block in self.encoder:
            x, _ = block(x, mask=src_mask)
        return x, src_mask

    def new_cache(self, max_len: int | None = None) -> KVCache:
        """A key/value cache for every decoder block, preallocated for `max_len` target positions
        (max_position_embeddings); encoder-decoder keys/values are projected once, at the first step."""
        return KVCache(len(self.decoder), max_len or self.config.max_position_embeddings)

    def decode(self, tgt, memory, src_mask, cache=None, last_only=False, keep=None):
        """Logits (batch, len, target_vocab) for target tokens `tgt`. With a cache, `tgt` holds only
        the positions after the cached ones; their keys/values are appended. `last_only` projects
        the last position only (what a decoding step needs); `keep` (bool, like `tgt`) projects only
        the positions where it is True, giving (kept, target_vocab)."""
        start = cache.length() if cache is not None else 0
        x = self.embed(self.target_embedding, tgt, start)
        self_mask = self._self_mask(tgt, start)
        for i, block in enumerate(self.decoder):
            x, _ = block(x, memory, self_mask=self_mask, memory_mask=src_mask, cache=cache, layer=i)
        if last_only:
            x = x[:, -1:]
        elif keep is not None:
            x = x[keep]
        return self.output(x)

    def _self_mask(self, tgt, start):
        length = tgt.size(1)
        if start:  # decoding: cached positions are all real tokens; one new query sees them all
            return None if length == 1 else causal_mask(length, start + length, tgt.device)
        # Position t sees positions <= t that are not padding. Position 0 (BOS) is never padding,
        # so no query is left without a key.
        return causal_mask(length, device=tgt.device) & padding_mask(tgt != self.config.pad_token_id)

    def forward(self, src, tgt_in, keep=None):
        """Teacher forcing: logits (batch, tgt_len, target_vocab) predicting tgt_out from tgt_in.
        Training passes `keep` = the real (non-pad) target positions: the output projection and the
        softmax, a third of a small model's work, then skip the padding; logits (kept, vocab)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask, keep=keep)
