"""BertConfig: the hyper-parameters of bert_config.json / HF config.json, as a frozen dataclass."""
import dataclasses
from dataclasses import dataclass

from .. import validate
from .config import JsonConfig


@dataclass(frozen=True)
class BertConfig(JsonConfig):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12  # google-research/bert hard-codes 1e-12; HF stores it
    pad_token_id: int = 0
    # The factorised embedding (ALBERT, ELECTRA): tables E wide, projected to H; None means E = H.
    embedding_size: int | None = None
    # Cross-layer parameter sharing (ALBERT): the layers fall into this many groups, each group one
    # set of weights run by all its layers (1: one layer's weights run num_hidden_layers times);
    # None means no sharing, every layer its own weights (BERT).
    num_hidden_groups: int | None = None
    # HF's name: "absolute" (BERT), "relative_key" / "relative_key_query" (Shaw-style learned
    # distances), "nezha" (NEZHA's fixed sinusoids of distances clipped at max_relative_position)
    position_embedding_type: str = "absolute"
    max_relative_position: int = 64  # NEZHA's config name; "nezha" only

    def __post_init__(self):
        # a config.json with a zero, negative or fractional size would otherwise fail deep inside torch
        validate.check_fields(self, {
            "vocab_size": validate.positive_int, "hidden_size": validate.positive_int,
            "num_hidden_layers": validate.positive_int, "num_attention_heads": validate.positive_int,
            "intermediate_size": validate.positive_int, "max_position_embeddings": validate.positive_int,
            "type_vocab_size": validate.positive_int, "hidden_dropout_prob": validate.fraction,
            "attention_probs_dropout_prob": validate.fraction, "initializer_range": validate.nonnegative_float,
            "layer_norm_eps": validate.positive_float})
        validate.nonnegative_int("pad_token_id", self.pad_token_id, optional=True)
        validate.positive_int("embedding_size", self.embedding_size, optional=True)
        validate.check_number("num_hidden_groups", self.num_hidden_groups, integer=True, minimum=1,
                              maximum=self.num_hidden_layers, optional=True)
        validate.positive_int("max_relative_position", self.max_relative_position)
        kinds = ("absolute", "relative_key", "relative_key_query", "nezha")
        if self.position_embedding_type not in kinds:
            raise ValueError(f"position_embedding_type {self.position_embedding_type!r}: choose one of {kinds}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")
        self.check_size()

    def parameter_count(self) -> int:
        """BertForPreTraining's weights and buffers (the largest head: the masked LM's), counted."""
        H, E, I = self.hidden_size, self.embedding_size or self.hidden_size, self.intermediate_size
        d_head = H // self.num_attention_heads
        positions = 0 if self.position_embedding_type == "nezha" else self.max_position_embeddings  # NEZHA: none
        embeddings = (self.vocab_size + positions + self.type_vocab_size + 2) * E
        embeddings += (E * H + H) if E != H else 0
        layer = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 4 * H
        if self.position_embedding_type in ("relative_key", "relative_key_query"):
            layer += (2 * self.max_position_embeddings - 1) * d_head
        elif self.position_embedding_type == "nezha":
            layer += (2 * self.max_relative_position + 1) * d_head
        distinct_layers = self.num_hidden_groups or self.num_hidden_layers
        heads = (H * H + H) + (H * E + 3 * E + self.vocab_size) + (2 * H + 2)  # pooler, masked LM, next sentence
        return embeddings + distinct_layers * layer + heads

    # BERT-large of the paper (intermediate size 4H); BERT-base is the default.
    @classmethod
    def large(cls, **overrides):
        return cls(**{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                      "intermediate_size": 4096, **overrides})

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        for name in ("embedding_size", "num_hidden_groups"):  # BERT's config.json stays BERT's
            if d[name] is None:
                d.pop(name)
        if self.position_embedding_type != "nezha":
            d.pop("max_relative_position")
        if hf:
            d.update(model_type="bert", architectures=["BertModel"])
        else:  # google-research/bert's bert_config.json has no eps or pad id
            d.pop("layer_norm_eps"), d.pop("pad_token_id")
            if self.position_embedding_type == "absolute":
                d.pop("position_embedding_type")
        return d
