"""A translation model folder: everything `bertlab translate` needs, and nothing else.

    config.json          TransformerConfig
    model.safetensors    the weights, each tied tensor stored once (under its first name)
    source_tokenizer/    SubwordTokenizer of the source side (vocab.json, merges.txt)
    target_tokenizer/    ... of the target side (the same files again with a joint vocabulary)
    translation.json     languages, the BLEU tokenizer for the target, decoding defaults
"""
import json
import os

from ..io import atomic_write_text, read_json
from ..models.transformer import Seq2SeqTransformer, TransformerConfig
from .folder import LoadedModel, check_float_weight, read_state_dict, write_hf_folder


def bleu_tokenize(target_lang: str | None) -> str:
    """sacreBLEU's tokenizer for the target language: "zh" segments Chinese characters (13a would
    count a whole unspaced sentence as one word), "13a" (its default) otherwise."""
    return "zh" if (target_lang or "").lower().split("_")[0].split("-")[0] == "zh" else "13a"


def save_translation_model(folder, model: Seq2SeqTransformer, source_tokenizer, target_tokenizer,
                           settings: dict | None = None):
    state, seen = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:  # safetensors refuses shared storage; tying is restored from config
            continue
        seen.add(id(tensor))
        state[name] = tensor.detach().cpu().contiguous()
    write_hf_folder(folder, model.config.to_dict(), state)
    source_tokenizer.save(os.path.join(folder, "source_tokenizer"))
    target_tokenizer.save(os.path.join(folder, "target_tokenizer"))
    atomic_write_text(os.path.join(folder, "translation.json"), json.dumps(settings or {}, indent=2) + "\n")


def load_translation_model(folder, device="cpu") -> LoadedModel:
    """The LoadedModel of a translation folder: the model in eval mode, its source tokenizer as
    `tokenizer`, extra "target_tokenizer" and "settings" (translation.json), each checked to fit."""
    from ..tokenization.subword import SubwordTokenizer
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such model folder")
    for name in ("config.json", "model.safetensors", "source_tokenizer", "target_tokenizer"):
        if not os.path.exists(os.path.join(folder, name)):
            raise FileNotFoundError(f"{folder}: no {name} (a translation model folder is what "
                                    "`bertlab translate-train` writes to OUT/model)")
    config_path = os.path.join(folder, "config.json")
    try:
        config = TransformerConfig.from_dict(read_json(config_path))
        model = Seq2SeqTransformer(config)
    except (TypeError, ValueError) as e:  # a value of the wrong kind or out of range
        raise ValueError(f"{config_path}: {e}") from None
    state = read_state_dict(folder)
    problems = _misfits(model, state)
    if problems:
        more = f"; ... and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise ValueError(f"{folder}/model.safetensors does not fit config.json: " + "; ".join(problems[:5]) + more)
    expected = model.state_dict()
    for name, tensor in state.items():  # load_state_dict would cast an int64 tensor without a word
        check_float_weight(name, tensor, expected[name], f"{folder}/model.safetensors")
    model.load_state_dict(state, strict=False)
    source, target = (SubwordTokenizer.load(os.path.join(folder, side)) for side in ("source_tokenizer",
                                                                                      "target_tokenizer"))
    for side, tokenizer, size in (("source", source, config.source_vocab_size),
                                  ("target", target, config.target_vocab_size)):
        if len(tokenizer) != size:
            raise ValueError(f"{folder}: the {side} vocabulary has {len(tokenizer)} tokens, the model {size}")
    path = os.path.join(folder, "translation.json")
    settings = read_settings(path) if os.path.exists(path) else {}
    return LoadedModel("translation", model.to(device).eval(), source, {"target_tokenizer": target, "settings": settings})


# translation.json, as translate-train writes it: the languages (a name such as "de" or "zh_CN", or
# null when unknown) and sacreBLEU's tokenizer for scoring the target side. Other fields are kept.
SETTINGS_FIELDS = {"source_lang": (str, type(None)), "target_lang": (str, type(None)), "bleu_tokenize": str}


def read_settings(path) -> dict:
    """translation.json, typed; a bleu_tokenize that sacreBLEU does not have is refused now, naming
    the file, rather than when `translate --ref` scores the translations."""
    settings = read_json(path, fields=SETTINGS_FIELDS)
    name = settings.get("bleu_tokenize")
    if name is not None:
        known = _bleu_tokenizers()
        if known and name not in known:
            raise ValueError(f"{path}: bleu_tokenize {name!r} is not one of sacreBLEU's tokenizers "
                             f"({', '.join(sorted(known))})")
    return settings


def _bleu_tokenizers() -> set:
    """The names sacreBLEU's BLEU accepts for tokenize=, or an empty set when it is not installed."""
    try:
        from sacrebleu.metrics.bleu import _TOKENIZERS
    except ImportError:
        return set()
    return set(_TOKENIZERS)


def _misfits(model, state: dict) -> list[str]:
    """What keeps `state` from loading into `model`: tensors of the wrong shape, missing ones (a tied
    tensor is stored once, under its first name) and unexpected ones."""
    expected = model.state_dict()
    problems = [f"{n} has shape {tuple(t.shape)}, config.json needs {tuple(expected[n].shape)}"
                for n, t in state.items() if n in expected and t.shape != expected[n].shape]
    missing = [n for n in expected if n not in state]
    problems += [f"missing {n}" for n in missing if not _tied_to_a_loaded(model, n, missing)]
    return problems + [f"unexpected {n}" for n in state if n not in expected]


def _tied_to_a_loaded(model, name, missing) -> bool:
    params = dict(model.named_parameters(remove_duplicate=False))
    tensor = params.get(name)
    return tensor is not None and any(p is tensor and other not in missing for other, p in params.items())
