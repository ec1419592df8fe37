"""ModernBertConfig: the hyper-parameters of HF's ModernBERT config.json, as a frozen dataclass.

Both ways config.json has said which layers are global and what their rotary bases are are read:
transformers 5 writes `layer_types` and `rope_parameters`, older folders (answerdotai's own)
`global_attn_every_n_layers`, `global_rope_theta` and `local_rope_theta`; we write both."""
import dataclasses
from dataclasses import dataclass

from .config import JsonConfig

POOLINGS = ("cls", "mean")
# Sizes to pretrain (`bertlab pretrain --preset`), ModernBERT's shape at small scale: deeper and
# narrower than BERT of the same parameter count, GeGLU 1.5x wide, a global layer every third.
# modernbert-small (6 layers of 256, GeGLU 384) has BERT-small's parameter count (4 layers of 256,
# feed-forward 1024, positions, pooler and next-sentence head): 3.41M against 3.42M besides the
# vocabulary, which both hold once (tied to the masked-LM decoder), plus its output bias.
MODERNBERT_PRESETS = {
    "modernbert-tiny": dict(num_hidden_layers=3, hidden_size=128, num_attention_heads=2, intermediate_size=192),
    "modernbert-small": dict(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, intermediate_size=384),
}
LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class ModernBertConfig(JsonConfig):
    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int = 50283
    eos_token_id: int = 50282
    bos_token_id: int = 50281
    cls_token_id: int = 50281
    sep_token_id: int = 50282
    attention_bias: bool = False
    attention_dropout: float = 0.0
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    layer_types: list | None = None
    rope_parameters: dict | None = None
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    tie_word_embeddings: bool = True

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads or (self.hidden_size // self.num_attention_heads) % 2:
            raise ValueError(f"hidden_size {self.hidden_size} must split into {self.num_attention_heads} heads of an "
                             "even width (rotary embeddings turn pairs of features)")
        if self.classifier_pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling {self.classifier_pooling!r}: choose one of {POOLINGS}")
        if self.global_attn_every_n_layers < 1 or self.local_attention < 2:
            raise ValueError("global_attn_every_n_layers must be at least 1 and local_attention at least 2")
        if self.layer_types is not None and (len(self.layer_types) != self.num_hidden_layers
                                             or any(t not in LAYER_TYPES for t in self.layer_types)):
            raise ValueError(f"layer_types must name {self.num_hidden_layers} layers, each one of {LAYER_TYPES}")

    def is_global(self, layer: int) -> bool:
        """Layer `layer` attends to the whole sequence (else to its local window)."""
        if self.layer_types is not None:
            return self.layer_types[layer] == "full_attention"
        return layer % self.global_attn_every_n_layers == 0

    def rope_theta(self, is_global: bool) -> float:
        """The rotary base of a global or a local layer."""
        kind = "full_attention" if is_global else "sliding_attention"
        given = (self.rope_parameters or {}).get(kind) or {}
        if given.get("rope_type", "default") != "default":
            raise ValueError(f"rope_type {given['rope_type']!r} for {kind}: only the default rotary embedding is read")
        return float(given.get("rope_theta", self.global_rope_theta if is_global else self.local_rope_theta))

    def parameter_count(self) -> int:
        h, i, n = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        layer = 4 * h * h + 3 * h * i + 2 * h
        return self.vocab_size * h + n * layer + h * h + 3 * h + self.vocab_size

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        types = [LAYER_TYPES[0] if self.is_global(i) else LAYER_TYPES[1] for i in range(self.num_hidden_layers)]
        d["layer_types"] = types
        d["global_rope_theta"], d["local_rope_theta"] = self.rope_theta(True), self.rope_theta(False)
        d["rope_parameters"] = {kind: {"rope_type": "default", "rope_theta": self.rope_theta(kind == LAYER_TYPES[0])}
                                for kind in LAYER_TYPES}
        if hf:
            d["model_type"] = "modernbert"
        return d


def modernbert_preset(name: str, vocab) -> ModernBertConfig:
    """A MODERNBERT_PRESETS size for a WordPiece vocabulary (a tokenization.Vocab): its size, and its
    [PAD], [CLS] and [SEP] as the padding, start and end tokens. The first phase's rotary base is
    10,000 in every layer (ModernBERT's; set_global_rope_theta raises the global layers' for the
    long-context phase)."""
    if name not in MODERNBERT_PRESETS:
        raise ValueError(f"unknown ModernBERT preset {name!r}; choose one of {sorted(MODERNBERT_PRESETS)}")
    pad, cls, sep = (vocab.special_id(token, f"preset {name}") for token in ("[PAD]", "[CLS]", "[SEP]"))
    return ModernBertConfig(**MODERNBERT_PRESETS[name], vocab_size=len(vocab), pad_token_id=pad,
                            cls_token_id=cls, bos_token_id=cls, sep_token_id=sep, eos_token_id=sep,
                            global_rope_theta=10000.0, local_rope_theta=10000.0)
