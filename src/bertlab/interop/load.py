"""One entry point for every model folder, as HF's from_pretrained: load_model reads the folder's
files and config, picks the loader of its kind and returns one LoadedModel.

    kind          the folder holds                              loaded by
    "finetuned"   task.json (what `bertlab finetune` writes)    finetuned.load_finetuned
    "translation" translation.json, source_tokenizer/           translation_folder.load_translation_model
    "unilm"       unilm.json beside an HF BERT folder           unilm_folder.load_unilm_model
    "gpt"         config.json with model_type "gpt2"            hf_gpt2.load_gpt2
    "modernbert"  config.json with model_type "modernbert"      hf_modernbert.load_modernbert (the class
                  (and tokenizer.json)                          named by architectures)
    "albert"      config.json with model_type "albert"          hf_albert.load_albert (AlbertModel or
                                                                AlbertForPreTraining, by architectures)
    "electra"     config.json with model_type "electra"         hf_electra.load_electra: the
                  (ElectraForPreTraining or ElectraForMaskedLM) discriminator or the generator
    "bert"        config.json (model_type "bert") or            pretrained.load_pretrained, the class
                  bert_config.json                              named by config.json's architectures
                  (google-research/bert: and a TF checkpoint,   or, in a google folder, by the heads
                  bert_model.ckpt.index)                        its checkpoint holds
"""
import dataclasses
import os

from ..io import read_json
from .finetuned import load_finetuned, readable_folder
from .folder import LoadedModel
from .google_bert import google_architecture, is_google_folder
from .pretrained import load_pretrained, resolve
from ..models.accelerate import accelerate

# The BERT classes a config's `architectures` can name; HF's BertForMaskedLM loads as
# BertForPreTraining (its masked-LM head is ours; the NSP head it lacks is left freshly initialised),
# any other as the bare encoder, its heads listed as unused in the report.
BERT_ARCHITECTURES = ("BertModel", "BertForPreTraining", "BertForSequenceClassification")


def load_model(folder, device="cpu", plain: bool = False) -> LoadedModel:
    """The model saved in `folder` (any folder bertlab writes, an HF BERT or GPT-2 folder, a
    google-research/bert folder or a packaged name such as "minilm"), dispatched on what the folder
    holds (module docstring), on `device`, with the CPU speed paths swapped in
    (models.accelerate) unless `plain`. A LoadedModel given for `folder` is returned as it is,
    moved to `device`: every entry point takes either."""
    if isinstance(folder, LoadedModel):
        folder.model.to(device)
        return folder
    # a fine-tuned model may be read while a save replaces it: readable_folder picks the whole one
    path = resolve(readable_folder(folder))
    loaded = _load(path, device)
    if not plain:
        accelerate(loaded.model)
    return dataclasses.replace(loaded, folder=path)


def load_model_of(source, kinds: tuple, purpose: str, device="cpu") -> LoadedModel:
    """load_model(source, device) where its kind is one of `kinds` (what `purpose`, e.g. "generate",
    needs); a folder of another kind is refused before anything is loaded, naming the file that
    says what it is."""
    if isinstance(source, LoadedModel):
        kind, where = source.kind, source.folder or "the model given"
    else:
        path = resolve(readable_folder(source))
        kind, file = folder_kind(path)
        where = os.path.join(path, file)
    if kind not in kinds:
        wanted = " or ".join(KIND_NAMES[k] for k in kinds)
        raise ValueError(f"{where}: describes a {kind!r} model, not a {wanted} ({purpose} needs one)")
    return load_model(source, device)


# What each kind is called in messages
KIND_NAMES = {"finetuned": "fine-tuned model (no task.json here; `bertlab finetune` writes one in OUT/model)", "unilm": "UniLM model",
              "translation": "translation model", "gpt": "GPT", "albert": "ALBERT", "electra": "ELECTRA",
              "bert": "BERT", "modernbert": "ModernBERT"}


def folder_kind(path) -> tuple[str, str]:
    """(kind, the file that says so) of a model folder, from its files alone (module docstring)."""
    if os.path.exists(os.path.join(path, "task.json")):
        return "finetuned", "task.json"
    if os.path.exists(os.path.join(path, "unilm.json")):
        return "unilm", "unilm.json"
    if os.path.exists(os.path.join(path, "translation.json")) or os.path.isdir(os.path.join(path, "source_tokenizer")):
        return "translation", "translation.json"
    config, file = _read_any_config(path)
    kind = config.get("model_type", "gpt2" if "n_embd" in config else "bert")
    if kind not in ("gpt2", "albert", "electra", "bert", "modernbert"):
        raise ValueError(f"{os.path.join(path, file)}: model_type {kind!r} is not a model bertlab reads "
                         "(bert, albert, electra, gpt2, modernbert, or a translation or fine-tuned folder bertlab wrote)")
    return ("gpt" if kind == "gpt2" else kind), file


def _load(path, device) -> LoadedModel:
    kind, _ = folder_kind(path)
    if kind == "finetuned":
        return load_finetuned(path, device)
    if kind == "unilm":
        from .unilm_folder import load_unilm_model
        return load_unilm_model(path, device)
    if kind == "translation":
        from .translation_folder import load_translation_model
        return load_translation_model(path, device)
    if kind == "gpt":
        from .hf_gpt2 import load_gpt2
        loaded = load_gpt2(path, map_location=device)
        if loaded.tokenizer is None:
            raise FileNotFoundError(f"{path}: no tokenizer (vocab.json + merges.txt, or chars.json)")
        return loaded
    if kind == "modernbert":
        from .hf_modernbert import load_modernbert
        loaded = load_modernbert(path)
        if loaded.tokenizer is None:
            raise FileNotFoundError(f"{path}: no tokenizer.json (a ModernBERT folder holds its tokenizer there)")
    elif kind == "albert":
        from .hf_albert import load_albert
        loaded = load_albert(path)
    elif kind == "electra":
        from .hf_electra import load_electra
        loaded = load_electra(path)
    else:
        config, _ = _read_any_config(path)
        default = google_architecture(path) if is_google_folder(path) else "BertModel"
        architecture = (config.get("architectures") or [default])[0]
        if architecture == "BertForMaskedLM":
            from .masked_lm import load_masked_lm
            loaded = load_masked_lm(path)
        else:
            from .. import models
            loaded = load_pretrained(path, getattr(models, architecture if architecture in BERT_ARCHITECTURES
                                                    else "BertModel"))
    loaded.model.to(device)
    return loaded


def _read_any_config(folder) -> tuple[dict, str]:
    for name in ("config.json", "bert_config.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            config = read_json(path)
            if not isinstance(config, dict):
                raise ValueError(f"{path}: holds a {type(config).__name__}, not a JSON object of settings")
            return config, name
    raise ValueError(f"{folder}: not a model folder: no config.json or bert_config.json, no task.json and no "
                     "translation.json (a folder bertlab or HF transformers saved has one of them)")
