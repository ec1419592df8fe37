"""BERT checkpoints in the HF layout (config.json + model.safetensors | pytorch_model.bin + vocab.txt).

Our parameter names follow the notes (`attention_sublayer.norm`, `feed_forward.intermediate`);
HF's follow google-research/bert's TF scopes. One table maps between them, both ways.
"""
import re

from ..models import BertModel
from ..models.accelerate import plain_class
from .folder import LoadReport, copy_matching, write_hf_folder

# (ours, HF) — `{i}` is a layer index. Everything not listed keeps its name.
# Prefixes: heads-models (ours and HF's) keep the encoder under `bert.`; a bare BertModel has none.
NAME_TABLE = [
    ("embeddings.norm.", "embeddings.LayerNorm."),
    ("layers.{i}.attention.query.", "encoder.layer.{i}.attention.self.query."),
    ("layers.{i}.attention.key.", "encoder.layer.{i}.attention.self.key."),
    ("layers.{i}.attention.value.", "encoder.layer.{i}.attention.self.value."),
    ("layers.{i}.attention.output.", "encoder.layer.{i}.attention.output.dense."),
    ("layers.{i}.attention_sublayer.norm.", "encoder.layer.{i}.attention.output.LayerNorm."),
    ("layers.{i}.feed_forward.intermediate.", "encoder.layer.{i}.intermediate.dense."),
    ("layers.{i}.feed_forward.output.", "encoder.layer.{i}.output.dense."),
    ("layers.{i}.feed_forward_sublayer.norm.", "encoder.layer.{i}.output.LayerNorm."),
    ("mlm.dense.", "cls.predictions.transform.dense."),
    ("mlm.norm.", "cls.predictions.transform.LayerNorm."),
    ("mlm.bias", "cls.predictions.bias"),
    ("mlm.embedding_table", "cls.predictions.decoder.weight"),
    ("nsp.linear.", "cls.seq_relationship."),
    # relative positions (HF's relative_key / relative_key_query): last, as HF's prefix is shorter
    ("layers.{i}.attention.relative_positions.", "encoder.layer.{i}.attention.self."),
]
# Tensors tied to another one: HF re-ties them on load, safetensors refuses to store them twice.
TIED = {"mlm.embedding_table": "bert.embeddings.word_embeddings.weight"}
# Buffers some checkpoints carry that hold no learned state.
IGNORED = re.compile(r"(^|\.)embeddings\.position_ids$|cls\.predictions\.decoder\.bias$")


def _rename(key: str, pairs) -> str:
    for src, dst in pairs:
        pattern = "^(.*?)" + re.escape(src).replace(r"\{i\}", r"(\d+)")
        m = re.match(pattern, key)
        if m:
            out = dst.replace("{i}", m.group(2)) if "{i}" in dst else dst
            return m.group(1) + out + key[m.end():]
    return key


def to_hf_name(key: str) -> str:
    return _rename(key, NAME_TABLE)


def from_hf_name(key: str) -> str:
    key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", key)  # checkpoints converted from TF 1.x
    key = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key)
    return _rename(key, [(hf, ours) for ours, hf in NAME_TABLE])


def _to_our_names(model, hf_state: dict) -> dict:
    """{our name: (checkpoint name, tensor)}, adding or dropping the `bert.` prefix as the model needs.
    Heads that a bare BertModel has no place for keep their checkpoint name."""
    has_prefix = any(k.startswith("bert.") for k in hf_state)
    wants_prefix = not isinstance(model, BertModel)
    ours = {}
    for original, tensor in hf_state.items():
        if IGNORED.search(original):
            continue
        key = original
        if wants_prefix and not has_prefix and not key.startswith(("cls.", "classifier.")):
            key = "bert." + key  # a bare BertModel checkpoint loaded under a model with heads
        elif not wants_prefix and has_prefix:
            if not key.startswith("bert."):
                ours[original] = (original, tensor)
                continue
            key = key[len("bert."):]
        ours[_rename_prefixed(key, from_hf_name)] = (original, tensor)
    return ours


def _rename_prefixed(key, fn):
    return "bert." + fn(key[5:]) if key.startswith("bert.") else fn(key)


def init_from_state_dict(model, hf_state: dict, source=None) -> LoadReport:
    """Copy every checkpoint tensor whose name and shape match a model parameter; report the rest
    (model names for initialised and new tensors, checkpoint names for unused ones). An ELECTRA
    checkpoint gives its discriminator's (or generator's) encoder, as fine-tuning wants it."""
    if is_electra_state(hf_state):
        hf_state = as_bert_state(hf_state)
    ours = _to_our_names(model, hf_state)
    report = copy_matching(model, {name: tensor for name, (_, tensor) in ours.items()}, skip=TIED, source=source,
                           file_names={name: original for name, (original, _) in ours.items()})
    own = model.state_dict()
    report.unused = sorted(original for name, (original, _) in ours.items() if name not in own and name not in TIED)
    return report


def load_state_dict_strict(model, hf_state: dict, source="checkpoint") -> LoadReport:
    """Like init_from_state_dict, but a missing or mis-shaped tensor is an error that names it."""
    report = init_from_state_dict(model, hf_state, source)
    problems = report.misfits()
    if problems:
        raise ValueError(f"{source}: does not fit the model:\n  " + "\n  ".join(problems))
    return report


def hf_state_dict(model) -> dict:
    """Our state dict under HF names, tied duplicates removed, tensors contiguous for safetensors."""
    out = {}
    for key, tensor in model.state_dict().items():
        if key in TIED:
            continue
        out[_rename_prefixed(key, to_hf_name)] = tensor.detach().contiguous().cpu()
    return out


# Our model classes carry HF's class names, so the architecture is the class name.
HF_ARCHITECTURES = ("BertModel", "BertForPreTraining", "BertForSequenceClassification", "BertForTokenClassification",
                    "BertForQuestionAnswering", "BertForMultipleChoice")


def save_pretrained(model, folder, tokenizer=None, extra_config: dict | None = None):
    """Write config.json, model.safetensors and (with a tokenizer) vocab.txt + tokenizer_config.json,
    each atomically, in the layout HF transformers loads with no missing or unexpected keys."""
    config = model.config.to_dict(hf=True)
    name = plain_class(type(model)).__name__
    config["architectures"] = [name if name in HF_ARCHITECTURES else "BertModel"]
    if getattr(model, "num_labels", None):
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(model.num_labels)}
        config["label2id"] = {v: int(k) for k, v in config["id2label"].items()}
    config.update(extra_config or {})
    write_hf_folder(folder, config, hf_state_dict(model))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)


# An ELECTRA checkpoint read as BERT (fine-tuning its discriminator): its encoder under BERT's names.
ELECTRA_HEAD = re.compile(r"^(discriminator_predictions|generator_predictions|generator_lm_head)\.")


def as_bert_state(hf_state: dict) -> dict:
    """An ELECTRA checkpoint's encoder under HF BERT's names (`bert.`, heads dropped), so a BERT task
    model (fine-tuning) reads the discriminator as its encoder: the same layers, plus the projection.
    The ELECTRA heads keep their names, so a load report lists them as unused."""
    out = {}
    for key, tensor in hf_state.items():
        if ELECTRA_HEAD.match(key):  # kept under its own name: the report lists it as unused
            out[key] = tensor
            continue
        key = key[len("electra."):] if key.startswith("electra.") else key
        out["bert." + key.replace("embeddings_project.", "embedding_projection.")] = tensor
    return out


def is_electra_state(hf_state: dict) -> bool:
    return any(k.startswith("electra.") or k.startswith("discriminator_predictions.") for k in hf_state)
