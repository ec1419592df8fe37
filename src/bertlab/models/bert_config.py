"""BertConfig: the hyper-parameters of bert_config.json / HF config.json, as a frozen dataclass."""
import dataclasses
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class BertConfig:
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

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")

    # Presets of the BERT paper: intermediate size is 4H.
    @classmethod
    def base(cls, **overrides):
        return cls(**{"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                      "intermediate_size": 3072, **overrides})

    @classmethod
    def large(cls, **overrides):
        return cls(**{"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                      "intermediate_size": 4096, **overrides})

    @classmethod
    def from_dict(cls, d: dict) -> "BertConfig":
        """Accepts bert_config.json and HF config.json alike; keys neither of them needs are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        if hf:
            d.update(model_type="bert", architectures=["BertModel"], position_embedding_type="absolute")
        else:  # google-research/bert's bert_config.json has no eps or pad id
            d.pop("layer_norm_eps"), d.pop("pad_token_id")
        return d

    @classmethod
    def from_json_file(cls, path) -> "BertConfig":
        try:
            with open(path, encoding="utf-8") as f:
                return cls.from_dict(json.load(f))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None

    def to_json_file(self, path, hf: bool = True, **extra):
        from ..io import atomic_write_text
        atomic_write_text(path, json.dumps({**self.to_dict(hf), **extra}, indent=2, sort_keys=True) + "\n")
