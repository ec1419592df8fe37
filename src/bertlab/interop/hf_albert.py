"""ALBERT checkpoints in HF's layout (config.json with model_type "albert" + model.safetensors).

Our ALBERT is the shared BERT (models/albert.py), so its names are BERT's; one table maps them to
HF's AlbertModel / AlbertForPreTraining names, both ways. Our `layers.{g}` is the g-th group of
shared layers, HF's `encoder.albert_layer_groups.{g}.albert_layers.0` (one layer per group).
"""
import os

from ..io import read_json
from ..models import AlbertConfig, AlbertForPreTraining, AlbertModel
from .folder import LoadedModel, LoadReport, copy_matching, read_state_dict, write_hf_folder
from .hf_bert import _rename

_GROUP = "encoder.albert_layer_groups.{i}.albert_layers.0."
# (ours, HF) for the encoder; a heads model keeps it under `bert.` (ours) / `albert.` (HF).
NAME_TABLE = [
    ("embeddings.norm.", "embeddings.LayerNorm."),
    ("embedding_projection.", "encoder.embedding_hidden_mapping_in."),
    ("layers.{i}.attention.query.", _GROUP + "attention.query."),
    ("layers.{i}.attention.key.", _GROUP + "attention.key."),
    ("layers.{i}.attention.value.", _GROUP + "attention.value."),
    ("layers.{i}.attention.output.", _GROUP + "attention.dense."),
    ("layers.{i}.attention_sublayer.norm.", _GROUP + "attention.LayerNorm."),
    ("layers.{i}.feed_forward.intermediate.", _GROUP + "ffn."),
    ("layers.{i}.feed_forward.output.", _GROUP + "ffn_output."),
    ("layers.{i}.feed_forward_sublayer.norm.", _GROUP + "full_layer_layer_norm."),
    ("pooler.dense.", "pooler."),
]
HEAD_TABLE = [
    ("mlm.dense.", "predictions.dense."),
    ("mlm.norm.", "predictions.LayerNorm."),
    ("mlm.bias", "predictions.bias"),
    ("nsp.linear.", "sop_classifier.classifier."),
]
# The decoder is the word embedding table (and its bias predictions.bias): HF re-ties both on load.
TIED = {"mlm.embedding_table"}
IGNORED = ("predictions.decoder.weight", "predictions.decoder.bias", "embeddings.position_ids")
ARCHITECTURES = {"AlbertModel": AlbertModel, "AlbertForPreTraining": AlbertForPreTraining}


def to_hf_name(key: str) -> str:
    if key.startswith("bert."):
        return "albert." + _rename(key[len("bert."):], NAME_TABLE)
    return _rename(key, HEAD_TABLE + NAME_TABLE)


def hf_state_dict(model) -> dict:
    """Our ALBERT's tensors under HF's names, tied duplicates left out, contiguous for safetensors."""
    return {to_hf_name(k): t.detach().contiguous().cpu() for k, t in model.state_dict().items() if k not in TIED}


def save_albert(model, folder, tokenizer=None):
    """config.json (model_type "albert", HF's field names) + model.safetensors, which HF's
    AlbertModel / AlbertForPreTraining load with no missing or unexpected keys; with a tokenizer,
    its vocab.txt and tokenizer_config.json too (WordPiece: HF's AlbertTokenizer, SentencePiece,
    does not read them, but every bertlab command does)."""
    config = model.config.to_dict(hf=True)
    config["architectures"] = [type(model).__name__ if type(model).__name__ in ARCHITECTURES else "AlbertModel"]
    write_hf_folder(folder, config, hf_state_dict(model))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)


def load_albert_state(model, hf_state: dict, source="checkpoint", strict=True) -> LoadReport:
    """Copy an HF ALBERT state dict into our model. A bare encoder takes the encoder out of a
    heads checkpoint (the heads reported unused); a heads model needs the heads (strict: a missing
    or mis-shaped tensor is an error naming it)."""
    heads = not isinstance(model, AlbertModel)
    ours_to_hf = {k: to_hf_name(k) for k in model.state_dict() if k not in TIED}
    prefixed = any(k.startswith("albert.") for k in hf_state)
    if heads and not prefixed:  # a bare AlbertModel checkpoint under a heads model
        hf_state = {("albert." + k if not k.startswith(("predictions.", "sop_classifier.")) else k): v
                    for k, v in hf_state.items()}
    elif not heads and prefixed:  # the encoder of a heads checkpoint
        hf_state = {(k[len("albert."):] if k.startswith("albert.") else k): v for k, v in hf_state.items()}
    hf_state = {k: v for k, v in hf_state.items() if not k.endswith(IGNORED)}
    report = copy_matching(model, {name: hf_state[hf] for name, hf in ours_to_hf.items() if hf in hf_state},
                           skip=TIED, source=source, file_names=ours_to_hf)
    report.unused = sorted(set(hf_state) - set(ours_to_hf.values()))
    if strict and (report.misfits() or (heads and report.unused)):
        problems = report.misfits() + [f"unexpected tensor {n}" for n in report.unused if heads]
        raise ValueError(f"{source}: does not fit the ALBERT model:\n  " + "\n  ".join(problems))
    if strict and any(".albert_layer_groups." in n for n in report.unused):
        raise ValueError(f"{source}: holds more layer groups than the config's num_hidden_groups="
                         f"{model.config.num_hidden_groups}; config and weights do not fit")
    return report


def read_albert_config(folder) -> AlbertConfig:
    return AlbertConfig.from_json_file(os.path.join(folder, "config.json"))


def load_albert(folder, model_class=None) -> LoadedModel:
    """The LoadedModel (kind "albert": model in eval mode, tokenizer or None, extra "report") of an
    HF-format ALBERT folder (ours or HF's). The class: `model_class`, else config.json's architectures (AlbertForPreTraining, or
    the encoder for any other). The tokenizer is read from vocab.txt (bertlab's folders); HF's
    ALBERT folders hold a SentencePiece model bertlab does not read, so theirs is None."""
    from .pretrained import load_tokenizer
    config = read_albert_config(folder)
    if model_class is None:
        architecture = (read_json(os.path.join(folder, "config.json")).get("architectures") or ["AlbertModel"])[0]
        model_class = ARCHITECTURES.get(architecture, AlbertModel)
    model = model_class(config, init_weights=False)
    report = load_albert_state(model, read_state_dict(folder), folder)
    tokenizer = load_tokenizer(folder, config=config) if os.path.exists(os.path.join(folder, "vocab.txt")) else None
    return LoadedModel("albert", model.eval(), tokenizer, {"report": report})
