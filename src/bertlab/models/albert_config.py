"""AlbertConfig: BERT's hyper-parameters plus ALBERT's (Lan et al. 2019), with the field names and
defaults of HF's ALBERT config.json (model_type "albert").

ALBERT is BERT with two parameter reductions, both options of the shared model (models/bert.py):
a factorised embedding (`embedding_size` E < hidden_size H: V x E tables and an E x H projection
instead of V x H) and cross-layer parameter sharing (`num_hidden_groups` = 1: one layer's weights
run num_hidden_layers times); and sentence-order prediction in place of next-sentence prediction.
"""
import dataclasses
from dataclasses import dataclass

from .. import validate
from .bert_config import BertConfig


@dataclass(frozen=True)
class AlbertConfig(BertConfig):
    vocab_size: int = 30000
    embedding_size: int | None = 128
    hidden_act: str = "gelu_new"  # the tanh approximation of GELU, as ALBERT was trained
    hidden_dropout_prob: float = 0.0  # ALBERT v2 trains without dropout (the paper's sec. 4.9)
    attention_probs_dropout_prob: float = 0.0
    num_hidden_groups: int | None = 1
    inner_group_num: int = 1  # layers inside a group; the paper (and every released ALBERT) uses 1
    classifier_dropout_prob: float = 0.1  # before the sentence-order head
    bos_token_id: int = 2
    eos_token_id: int = 3

    def __post_init__(self):
        super().__post_init__()
        validate.fraction("classifier_dropout_prob", self.classifier_dropout_prob)
        if self.embedding_size is not None and self.embedding_size > self.hidden_size:
            raise ValueError(f"embedding_size {self.embedding_size} is larger than hidden_size {self.hidden_size}: "
                             "ALBERT's factorised embedding projects a smaller E up to H")
        if self.embedding_size is None or self.embedding_size == self.hidden_size:
            raise ValueError(f"embedding_size {self.embedding_size} with hidden_size {self.hidden_size}: bertlab's "
                             "ALBERT needs a factorised embedding, embedding_size smaller than hidden_size")
        if self.num_hidden_groups is None:
            raise ValueError("num_hidden_groups None: an ALBERT config needs it (1 = every layer shares one set of "
                             "weights)")
        if self.inner_group_num != 1:
            raise ValueError(f"inner_group_num {self.inner_group_num}: bertlab's ALBERT supports 1 (one layer per "
                             "group, as the paper and the released checkpoints)")

    def to_dict(self, hf: bool = True) -> dict:
        d = dataclasses.asdict(self)
        if hf:
            d.update(model_type="albert", architectures=["AlbertModel"], position_embedding_type="absolute")
        return d


# The paper's Table 1 (E = 128, vocabulary 30000, intermediate 4H, heads H/64): parameters 12M / 18M / 60M / 235M.
ALBERT_PRESETS = {
    "albert-base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "albert-large": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16, intermediate_size=4096),
    "albert-xlarge": dict(num_hidden_layers=24, hidden_size=2048, num_attention_heads=16, intermediate_size=8192),
    "albert-xxlarge": dict(num_hidden_layers=12, hidden_size=4096, num_attention_heads=64, intermediate_size=16384),
}


def albert_preset(name: str, **overrides) -> AlbertConfig:
    """The preset `name` (ALBERT_PRESETS), with `overrides` (e.g. the data's vocab_size)."""
    if name not in ALBERT_PRESETS:
        raise ValueError(f"unknown ALBERT preset {name!r}; choose one of {sorted(ALBERT_PRESETS)}")
    return AlbertConfig(**{**ALBERT_PRESETS[name], **overrides})
