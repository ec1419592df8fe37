"""TransformerConfig: the translation Transformer's hyper-parameters as a frozen dataclass, and the
preset sizes. Free of torch, so the command line can list the presets without importing it."""
from dataclasses import dataclass

from .. import validate
from .config import JsonConfig


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
    init_std: float = 0.02            # N(0, init_std) weights and tables (Marian's, BERT's, GPT's)
    max_position_embeddings: int = 1024
    pad_token_id: int = 0
    bos_token_id: int = 2
    eos_token_id: int = 3
    share_embeddings: bool = False    # one table for source, target and output (a joint vocabulary)
    tie_word_embeddings: bool = True  # target embedding = output projection (the paper, section 3.4)

    def __post_init__(self):
        # A config.json with a zero, negative or fractional size would otherwise fail deep inside
        # torch (or divide by zero) instead of naming the field.
        validate.check_fields(self, {
            "source_vocab_size": validate.positive_int, "target_vocab_size": validate.positive_int,
            "d_model": validate.positive_int, "encoder_layers": validate.positive_int,
            "decoder_layers": validate.positive_int, "attention_heads": validate.positive_int,
            "ffn_dim": validate.positive_int, "dropout": validate.fraction, "attention_dropout": validate.fraction,
            "layer_norm_eps": validate.positive_float, "max_position_embeddings": validate.positive_int,
            "init_std": validate.nonnegative_float})
        smallest = min(self.source_vocab_size, self.target_vocab_size)
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):  # ids both sides use
            validate.check_number(name, getattr(self, name), integer=True, minimum=0, maximum=smallest - 1)
        if self.d_model % self.attention_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of attention_heads {self.attention_heads}")
        if self.share_embeddings and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(f"share_embeddings needs one joint vocabulary, but the source has "
                             f"{self.source_vocab_size} tokens and the target {self.target_vocab_size}")
        if self.pad_token_id == self.bos_token_id:
            raise ValueError("pad_token_id and bos_token_id must differ: target padding is masked by id")
        self.check_size()

    def parameter_count(self) -> int:
        """Seq2SeqTransformer's weights and its sinusoid table, counted from the config."""
        D, F = self.d_model, self.ffn_dim
        attention, ffn = 4 * (D * D + D), (D * F + F) + (F * D + D)
        tables = self.source_vocab_size * D
        if not self.share_embeddings:
            tables += self.target_vocab_size * D * (1 if self.tie_word_embeddings else 2)
        layers = self.encoder_layers * (attention + ffn + 4 * D) + self.decoder_layers * (2 * attention + ffn + 6 * D)
        return tables + self.max_position_embeddings * D + layers

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
    # on the project's 2-core CPU (an early measurement; docs/results/translation.md has today's
    # side-by-side figures), so a useful run takes tens of minutes, not days.
    "small": dict(encoder_layers=3, decoder_layers=3, d_model=256, attention_heads=4, ffn_dim=1024, dropout=0.1),
    # Tests: trains a copy task in seconds.
    "test": dict(encoder_layers=2, decoder_layers=2, d_model=32, attention_heads=2, ffn_dim=64, dropout=0.0,
                 max_position_embeddings=64, source_vocab_size=20, target_vocab_size=20),
}
