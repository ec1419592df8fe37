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
    # ALBERT / ELECTRA factorised embedding: tables of width E, projected up to H (None: E = H)
    embedding_size: int | None = None

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
        if self.embedding_size is not None and self.embedding_size > self.hidden_size:
            raise ValueError(f"embedding_size {self.embedding_size} is larger than hidden_size {self.hidden_size}: "
                             "a factorised embedding projects a smaller E up to H")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")

    # BERT-large of the paper (intermediate size 4H); BERT-base is the default.
    @classmethod
    def large(cls, **overrides):
        return cls(**{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                      "intermediate_size": 4096, **overrides})

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        if d["embedding_size"] is None:  # plain BERT: E = H, and the file stays bert_config.json's
            d.pop("embedding_size")
        if hf:
            d.update(model_type="bert", architectures=["BertModel"], position_embedding_type="absolute")
        else:  # google-research/bert's bert_config.json has no eps or pad id
            d.pop("layer_norm_eps"), d.pop("pad_token_id")
        return d
