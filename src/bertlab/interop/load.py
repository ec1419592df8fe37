"""One entry point for every model folder, as HF's from_pretrained: load_model reads the folder's
files and config, picks the loader of its kind and returns one LoadedModel.

    kind          the folder holds                              loaded by
    "finetuned"   task.json (what `bertlab finetune` writes)    finetuned.load_finetuned
    "translation" translation.json, source_tokenizer/           translation_folder.load_translation_model
    "unilm"       unilm.json beside an HF BERT folder           unilm_folder.load_unilm_model
    "gpt"         config.json with model_type "gpt2"            hf_gpt2.load_gpt2
    "albert"      config.json with model_type "albert"          hf_albert.load_albert (AlbertModel or
                                                                AlbertForPreTraining, by architectures)
    "electra"     config.json with model_type "electra"         hf_electra.load_electra: the
                  (ElectraForPreTraining or ElectraForMaskedLM) discriminator or the generator
    "bert"        config.json (model_type "bert") or            pretrained.load_pretrained, the class
                  bert_config.json                              named by config.json's architectures
                  (google-research/bert: and a TF checkpoint,   or, in a google folder, by the heads
                  bert_model.ckpt.index)                        its checkpoint holds
"""
import os

from ..io import read_json
from .finetuned import load_finetuned, readable_folder
from .folder import LoadedModel
from .google_bert import google_architecture, is_google_folder
from .pretrained import load_pretrained, resolve

# The BERT classes a config's `architectures` can name; HF's BertForMaskedLM loads as
# BertForPreTraining (its masked-LM head is ours; the NSP head it lacks is left freshly initialised),
# any other as the bare encoder, its heads listed as unused in the report.
BERT_ARCHITECTURES = ("BertModel", "BertForPreTraining", "BertForSequenceClassification")


def load_model(folder, device="cpu") -> LoadedModel:
    """The model saved in `folder` (any folder bertlab writes, an HF BERT or GPT-2 folder, a
    google-research/bert folder or a packaged name such as "minilm"), dispatched on what the folder
    holds (module docstring)."""
    # a fine-tuned model may be read while a save replaces it: readable_folder picks the whole one
    path = resolve(readable_folder(folder))
    if os.path.exists(os.path.join(path, "task.json")):
        return load_finetuned(path, device)
    if os.path.exists(os.path.join(path, "unilm.json")):
        from .unilm_folder import load_unilm_model
        model, tokenizer, settings = load_unilm_model(path, device)
        return LoadedModel("unilm", model, tokenizer, {"settings": settings})
    if os.path.exists(os.path.join(path, "translation.json")) or os.path.isdir(os.path.join(path, "source_tokenizer")):
        return _load_translation(path, device)
    config = _read_any_config(path)
    kind = config.get("model_type", "gpt2" if "n_embd" in config else "bert")
    if kind == "gpt2":
        return load_gpt(path, device)
    if kind == "albert":
        from .hf_albert import load_albert
        model, tokenizer, report = load_albert(path)
        return LoadedModel("albert", model.to(device), tokenizer, {"report": report})
    if kind == "electra":
        from .hf_electra import load_electra
        model, tokenizer, report = load_electra(path)
        return LoadedModel("electra", model.to(device), tokenizer, {"report": report})
    if kind != "bert":
        raise ValueError(f"{path}: config model_type {kind!r} is not a model bertlab reads "
                         "(bert, albert, electra, gpt2, or a translation or fine-tuned folder bertlab wrote)")
    default = google_architecture(path) if is_google_folder(path) else "BertModel"
    architecture = (config.get("architectures") or [default])[0]
    if architecture == "BertForMaskedLM":
        from .masked_lm import load_masked_lm
        model, tokenizer = load_masked_lm(path)
        return LoadedModel("bert", model.to(device), tokenizer)
    model_class = architecture if architecture in BERT_ARCHITECTURES else "BertModel"
    from .. import models
    model, tokenizer, report = load_pretrained(path, getattr(models, model_class))
    return LoadedModel("bert", model.to(device), tokenizer, {"report": report})


def _read_any_config(folder) -> dict:
    for name in ("config.json", "bert_config.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            config = read_json(path)
            if not isinstance(config, dict):
                raise ValueError(f"{path}: holds a {type(config).__name__}, not a JSON object of settings")
            return config
    raise ValueError(f"{folder}: not a model folder: no config.json or bert_config.json, no task.json and no "
                     "translation.json (a folder bertlab or HF transformers saved has one of them)")


def load_gpt(folder, device="cpu") -> LoadedModel:
    """A GPT folder (HF GPT-2 layout) and its tokenizer, checked to be one model's files."""
    from ..tokenization.char_level import load_gpt_tokenizer
    from .hf_gpt2 import load_gpt2
    model, report = load_gpt2(folder, map_location=device)
    tokenizer = load_gpt_tokenizer(folder)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens, the model "
                         f"{model.config.vocab_size}; they are not one model's files")
    return LoadedModel("gpt", model, tokenizer, {"report": report})


def _load_translation(folder, device) -> LoadedModel:
    from .translation_folder import load_translation_model
    model, source, target, settings = load_translation_model(folder, device)
    return LoadedModel("translation", model, source, {"target_tokenizer": target, "settings": settings})
