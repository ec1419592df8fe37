"""ModernBERT checkpoints in HF's layout: config.json (model_type "modernbert"), model.safetensors
and tokenizer.json, for ModernBertModel, ModernBertForMaskedLM, ModernBertForSequenceClassification,
ModernBertForTokenClassification and ModernBertForQuestionAnswering.

Our names follow the notes (`attention.qkv`, `feed_forward.intermediate`), HF's answerdotai's
(`attn.Wqkv`, `mlp.Wi`); one table maps between them, both ways. HF keeps the encoder of a head
model under `model.`, ours under `modernbert.`; a bare ModernBertModel has no prefix on either side.
"""
import json
import os

from ..io import atomic_write_text
from ..models.modernbert import (ModernBertForMaskedLM, ModernBertForQuestionAnswering,
                                 ModernBertForSequenceClassification, ModernBertForTokenClassification,
                                 ModernBertModel)
from ..models.accelerate import plain_class
from ..models.modernbert_config import ModernBertConfig
from .folder import LoadedModel, LoadReport, copy_matching, read_state_dict, write_hf_folder
from .hf_bert import _rename

# (ours, HF) — `{i}` is a layer index. Everything not listed keeps its name.
NAME_TABLE = [
    ("modernbert.", "model."),
    ("embeddings.word_embeddings.", "embeddings.tok_embeddings."),
    ("layers.{i}.attention_sublayer.norm.", "layers.{i}.attn_norm."),
    ("layers.{i}.attention.qkv.", "layers.{i}.attn.Wqkv."),
    ("layers.{i}.attention.output.", "layers.{i}.attn.Wo."),
    ("layers.{i}.feed_forward_sublayer.norm.", "layers.{i}.mlp_norm."),
    ("layers.{i}.feed_forward.intermediate.", "layers.{i}.mlp.Wi."),
    ("layers.{i}.feed_forward.output.", "layers.{i}.mlp.Wo."),
    ("embedding_table", "decoder.weight"),
    ("decoder_bias", "decoder.bias"),
]
# The decoder is the word embedding table: HF re-ties it on load, safetensors stores it once.
TIED = {"embedding_table": "modernbert.embeddings.word_embeddings.weight"}
ARCHITECTURES = {cls.__name__: cls for cls in (ModernBertModel, ModernBertForMaskedLM,
                                               ModernBertForSequenceClassification, ModernBertForTokenClassification,
                                               ModernBertForQuestionAnswering)}
WITH_LABELS = (ModernBertForSequenceClassification, ModernBertForTokenClassification)


def to_hf_name(key: str) -> str:
    """Each table row renames one part of the name: the prefix first, then the layer's part."""
    for ours, hf in NAME_TABLE:
        key = _rename(key, [(ours, hf)])
    return key


def from_hf_name(key: str) -> str:
    for ours, hf in NAME_TABLE:
        key = _rename(key, [(hf, ours)])
    return key


def tied(model) -> set:
    """Our names of the tensors HF does not store (the decoder tied to the word embeddings)."""
    return set(TIED) if isinstance(model, ModernBertForMaskedLM) and model.config.tie_word_embeddings else set()


def hf_state_dict(model) -> dict:
    """Our state dict under HF's names, the tied copy removed, tensors contiguous for safetensors."""
    skip = tied(model)
    return {to_hf_name(k): t.detach().contiguous().cpu() for k, t in model.state_dict().items() if k not in skip}


def hf_config(model) -> dict:
    config = model.config.to_dict(hf=True)
    config["architectures"] = [plain_class(type(model)).__name__]
    if isinstance(model, WITH_LABELS):
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(model.num_labels)}
        config["label2id"] = {v: int(k) for k, v in config["id2label"].items()}
    return config


def save_modernbert(model, folder, tokenizer=None, extra_config: dict | None = None):
    """config.json, model.safetensors (and with a tokenizer, tokenizer.json; for the WordPiece
    tokenizer of a model bertlab pretrained, vocab.txt and tokenizer_config.json beside it, which
    bertlab reads): a folder HF's class of the same name, and AutoTokenizer, load with no missing
    or unexpected keys."""
    from ..tokenization import BertTokenizer
    if plain_class(type(model)) not in ARCHITECTURES.values():
        raise TypeError(f"save_modernbert: expects one of {sorted(ARCHITECTURES)}, not {type(model).__name__}")
    write_hf_folder(folder, {**hf_config(model), **(extra_config or {})}, hf_state_dict(model))
    if isinstance(tokenizer, BertTokenizer):
        settings = {"tokenizer_class": "BertTokenizer", "unk_token": "[UNK]", "pad_token": "[PAD]",
                    "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}  # save_pretrained keeps them
        atomic_write_text(os.path.join(folder, "tokenizer_config.json"), json.dumps(settings) + "\n")
        tokenizer.save_pretrained(folder)
        atomic_write_text(os.path.join(folder, "tokenizer.json"), json.dumps(tokenizer.tokenizer_json()) + "\n")
    elif tokenizer is not None:
        tokenizer.save(folder)


def load_state(model, hf_state: dict, source) -> LoadReport:
    """Copy an HF ModernBERT state dict into `model` strictly: a missing, mis-shaped or unused tensor
    is an error naming it. A bare ModernBertModel checkpoint loads under a head model (its head
    then missing) and a head model's encoder under a bare ModernBertModel (its head unused) only as
    the caller allows: here every tensor must fit."""
    bare_file = not any(k.startswith("model.") for k in hf_state)
    bare_model = isinstance(model, ModernBertModel)
    ours = {}
    for key, tensor in hf_state.items():
        name = key
        if bare_model and not bare_file:
            if not key.startswith("model."):
                ours[key] = (key, tensor)  # a head: no place for it, reported unused
                continue
            name = key[len("model."):]
        elif not bare_model and bare_file:
            name = "model." + key
        ours[from_hf_name(name)] = (key, tensor)
    skip = tied(model)
    report = copy_matching(model, {name: tensor for name, (_, tensor) in ours.items()}, skip=skip, source=source,
                           file_names={name: key for name, (key, _) in ours.items()})
    own = model.state_dict()
    report.unused = sorted(key for name, (key, _) in ours.items() if name not in own and name not in TIED)
    return report


def modernbert_architecture(folder, config: dict) -> type:
    architecture = (config.get("architectures") or ["ModernBertModel"])[0]
    if architecture not in ARCHITECTURES:
        raise ValueError(f"{os.path.join(folder, 'config.json')}: architectures {architecture!r}: bertlab reads "
                         f"the ModernBERT classes {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[architecture]


def load_modernbert(folder, model_class: type | None = None, strict: bool = True) -> LoadedModel:
    """The LoadedModel (kind "modernbert", extra "report") of a ModernBERT folder, as the class its
    config.json names (or `model_class`); with `strict`, a tensor the model lacks or leaves unused
    is an error naming it. The tokenizer is tokenizer.json's (None when the folder has none)."""
    config, raw = read_modernbert_config(folder)
    model_class = model_class or modernbert_architecture(folder, raw)
    if model_class in WITH_LABELS:
        model = model_class(config, num_labels=len(raw.get("id2label") or {0: 0, 1: 1}), init_weights=False)
    else:
        model = model_class(config, init_weights=False)
    report = load_state(model, read_state_dict(folder), folder)
    problems = report.misfits() + [f"unexpected tensor {key}" for key in report.unused]
    if strict and problems:
        raise ValueError(f"{folder}: does not fit {model_class.__name__}:\n  " + "\n  ".join(problems))
    return LoadedModel("modernbert", model.eval(), load_modernbert_tokenizer(folder, config), {"report": report})


def read_modernbert_config(folder) -> tuple[ModernBertConfig, dict]:
    """(the config, config.json as read) of a ModernBERT folder, checked."""
    from ..io import read_json
    raw = read_json(os.path.join(folder, "config.json"))
    config = ModernBertConfig.from_dict(raw)
    config.check_size()
    return config, raw


def reads_wordpiece(folder) -> bool:
    """True where a ModernBERT folder reads text with a WordPiece vocab.txt (one bertlab pretrained:
    its tokenizer.json only repeats the vocabulary for transformers), which load_modernbert_tokenizer
    then reads; False where its tokenizer is tokenizer.json's byte-level BPE (answerdotai's)."""
    return os.path.isfile(os.path.join(folder, "vocab.txt"))


def load_modernbert_tokenizer(folder, config: ModernBertConfig):
    """tokenizer.json read by our own byte-level BPE, its vocabulary checked against the config;
    where the folder holds a WordPiece vocab.txt (a ModernBERT bertlab pretrained, whose
    tokenizer.json only repeats it for transformers), that; None where it has neither."""
    path = os.path.join(folder, "tokenizer.json")
    if reads_wordpiece(folder):
        from .pretrained import load_tokenizer
        return load_tokenizer(folder, config=config)
    if not os.path.exists(path):
        return None
    from ..tokenization.tokenizer_json import TokenizerJson
    tokenizer = TokenizerJson.from_file(path)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{path}: holds {tokenizer.vocab_size} tokens, but config.json's vocab_size is "
                         f"{config.vocab_size}; they must be one vocabulary")
    return tokenizer
