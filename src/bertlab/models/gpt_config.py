"""GPTConfig: GPT-2's hyper-parameters as a frozen dataclass, and the preset sizes. Free of torch,
so the command line can list the presets without importing it."""
import dataclasses
from dataclasses import dataclass

from .. import validate
from .config import JsonConfig


@dataclass(frozen=True)
class GPTConfig(JsonConfig):
    """GPT-2's hyper-parameters under the field names of HF's GPT-2 config.json."""
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None  # feed-forward width; None means 4 * n_embd
    activation_function: str = "gelu_new"
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    bos_token_id: int = 50256
    eos_token_id: int = 50256

    def __post_init__(self):
        # A config.json with a zero, negative or fractional size would otherwise fail deep inside
        # torch (or divide by zero) instead of naming the field.
        validate.check_fields(self, {
            "vocab_size": validate.positive_int, "n_positions": validate.positive_int,
            "n_embd": validate.positive_int, "n_layer": validate.positive_int, "n_head": validate.positive_int,
            "resid_pdrop": validate.fraction, "embd_pdrop": validate.fraction, "attn_pdrop": validate.fraction,
            "layer_norm_epsilon": validate.positive_float, "initializer_range": validate.nonnegative_float})
        validate.positive_int("n_inner", self.n_inner, optional=True)
        for name in ("bos_token_id", "eos_token_id"):  # may lie outside a small vocabulary: never sampled then
            validate.nonnegative_int(name, getattr(self, name), optional=True)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        self.check_size()

    def parameter_count(self) -> int:
        """GPT's weights (the output layer is tied to wte), counted from the config."""
        D, F = self.n_embd, self.d_ff
        layer = 4 * D + (3 * D * D + 3 * D) + (D * D + D) + (D * F + F) + (F * D + D)
        return (self.vocab_size + self.n_positions) * D + self.n_layer * layer + 2 * D

    @property
    def d_ff(self) -> int:
        return self.n_inner or 4 * self.n_embd

    @classmethod
    def preset(cls, name: str, **overrides) -> "GPTConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown GPT preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        if hf:
            d.update(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_ctx=self.n_positions,
                     tie_word_embeddings=True, scale_attn_weights=True)
        return d


# The four sizes of the GPT-2 paper (parameter counts with the tied 50257-token output layer),
# and tiny ones that train in seconds on a CPU for tests and demos.
PRESETS = {
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),            # 124M
    "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),    # 355M
    "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),     # 774M
    "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),        # 1.5B
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, n_positions=256),
    "test": dict(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=97),
}
PRESETS["124M"], PRESETS["355M"], PRESETS["774M"], PRESETS["1.5B"] = (
    PRESETS["gpt2"], PRESETS["gpt2-medium"], PRESETS["gpt2-large"], PRESETS["gpt2-xl"])
