"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for translation.

An encoder stack and a decoder stack of the shared core's post-LN blocks (the paper's
LayerNorm(x + Sublayer(x))), token embeddings multiplied by sqrt(d_model) plus the fixed
sinusoidal positions, dropout on that sum, and an output projection to the target vocabulary.
Post-LN ends every block with a LayerNorm, so neither stack has a final one (pre-LN stacks, as in
the annotated transformer and fairseq's --normalize-before, need it; the paper's does not).
"""
import math
from dataclasses import dataclass

from torch import nn

from .config import JsonConfig
from ..core import (DecoderBlock, EncoderBlock, KVCache, PositionalEncoding, PreallocatedKVCache, causal_mask,
                    padding_mask)
from ..core.dropout import Dropout
from ..core.linear import Linear


@dataclass(frozen=True)
class TransformerConfig(JsonConfig):
    """Hyper-parameters under the names of HF's Marian config.json where one exists."""
    source_vocab_size: int = 8000
    target_vocab_size: int = 8000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    attention_heads: int = 8
    ffn_dim: int = 2048
    dropout: float = 0.1              # P_drop: sublayer outputs and the embedding sums
    attention_dropout: float = 0.0    # the paper drops sublayer outputs only, not attention weights
    activation_function: str = "relu"
    layer_norm_eps: float = 1e-5      # torch's and fairseq's default; the paper gives none
    max_position_embeddings: int = 1024
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    share_embeddings: bool = False    # one table for source, target and output (a joint vocabulary)
    tie_word_embeddings: bool = True  # target embedding = output projection (the paper, section 3.4)

    def __post_init__(self):
        if self.d_model % self.attention_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of attention_heads {self.attention_heads}")
        if self.share_embeddings and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(f"share_embeddings needs one joint vocabulary, but the source has "
                             f"{self.source_vocab_size} tokens and the target {self.target_vocab_size}")
        if self.pad_token_id == self.bos_token_id:
            raise ValueError("pad_token_id and bos_token_id must differ: target padding is masked by id")

    @classmethod
    def preset(cls, name: str, **overrides) -> "TransformerConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown Transformer preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


PRESETS = {
    # The paper's base model (Table 3): N=6, d_model 512, d_ff 2048, h 8, P_drop 0.1. With a shared
    # 37k-token vocabulary it has 63.1M parameters here (counted); Table 3 says 65M.
    "base": dict(encoder_layers=6, decoder_layers=6, d_model=512, attention_heads=8, ffn_dim=2048, dropout=0.1),
    # A CPU size: half of base's width and depth (7.6M parameters with an 8k shared vocabulary;
    # about 8x fewer layer FLOPs per token than base). HF Marian of this shape trains ~4k tokens/s
    # on the project's 2-core CPU (REFERENCES.md), so a useful run takes tens of minutes, not days.
    "small": dict(encoder_layers=3, decoder_layers=3, d_model=256, attention_heads=4, ffn_dim=1024, dropout=0.1),
    # Tests: trains a copy task in seconds.
    "test": dict(encoder_layers=2, decoder_layers=2, d_model=32, attention_heads=2, ffn_dim=64, dropout=0.0,
                 max_position_embeddings=64, source_vocab_size=20, target_vocab_size=20),
}


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
        self.dropout = Dropout(c.dropout)
        block = dict(dropout=c.dropout, attention_dropout=c.attention_dropout, act=c.activation_function,
                     norm_first=False, eps=c.layer_norm_eps)
        self.encoder = nn.ModuleList(EncoderBlock(c.d_model, c.attention_heads, c.ffn_dim, **block)
                                     for _ in range(c.encoder_layers))
        self.decoder = nn.ModuleList(DecoderBlock(c.d_model, c.attention_heads, c.ffn_dim, **block)
                                     for _ in range(c.decoder_layers))
        self.output = Linear(c.d_model, c.target_vocab_size, bias=False)
        self._init_weights()
        if c.tie_word_embeddings or c.share_embeddings:
            self.output.weight = self.target_embedding.weight

    def _init_weights(self):
        # fairseq's transformer: Xavier-uniform matrices (the annotated transformer's choice too),
        # zero biases, and embeddings N(0, d_model^-0.5), so that after the sqrt(d_model) scaling
        # tokens enter with unit variance, like the sinusoids they are added to.
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=self.config.d_model ** -0.5)
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

    def new_cache(self, max_len: int) -> list:
        """One cache per decoder block: self-attention keys/values written in place for up to
        `max_len` target positions, and encoder-decoder keys/values projected once (static)."""
        return [{"self": PreallocatedKVCache(max_len), "cross": KVCache(static=True)} for _ in self.decoder]

    def decode(self, tgt, memory, src_mask, cache=None, last_only=False, keep=None):
        """Logits (batch, len, target_vocab) for target tokens `tgt`. With a cache, `tgt` holds only
        the positions after the cached ones; their keys/values are appended. `last_only` projects
        the last position only (what a decoding step needs); `keep` (bool, like `tgt`) projects only
        the positions where it is True, giving (kept, target_vocab)."""
        start = len(cache[0]["self"]) if cache else 0
        x = self.embed(self.target_embedding, tgt, start)
        self_mask = self._self_mask(tgt, start)
        for i, block in enumerate(self.decoder):
            x, _ = block(x, memory, self_mask=self_mask, memory_mask=src_mask, cache=cache[i] if cache else None)
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
