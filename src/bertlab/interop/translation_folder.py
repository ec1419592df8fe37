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
from .hf_bert import read_state_dict, write_hf_folder


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


def load_translation_model(folder, device="cpu"):
    """(model in eval mode, source tokenizer, target tokenizer, settings), each checked to fit."""
    from ..tokenization.subword import SubwordTokenizer
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such model folder")
    for name in ("config.json", "model.safetensors", "source_tokenizer", "target_tokenizer"):
        if not os.path.exists(os.path.join(folder, name)):
            raise FileNotFoundError(f"{folder}: no {name} (a translation model folder is what "
                                    "`bertlab translate-train` writes to OUT/model)")
    config = TransformerConfig.from_json_file(os.path.join(folder, "config.json"))
    model = Seq2SeqTransformer(config)
    missing, unexpected = model.load_state_dict(read_state_dict(folder), strict=False)
    tied = {name for name in missing if _tied_to_a_loaded(model, name, missing)}
    if set(missing) - tied or unexpected:
        raise ValueError(f"{folder}/model.safetensors does not fit config.json: missing "
                         f"{sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}")
    source, target = (SubwordTokenizer.load(os.path.join(folder, side)) for side in ("source_tokenizer",
                                                                                      "target_tokenizer"))
    for side, tokenizer, size in (("source", source, config.source_vocab_size),
                                  ("target", target, config.target_vocab_size)):
        if len(tokenizer) != size:
            raise ValueError(f"{folder}: the {side} vocabulary has {len(tokenizer)} tokens, the model {size}")
    path = os.path.join(folder, "translation.json")
    settings = {}
    if os.path.exists(path):
        settings = read_json(path)
    return model.to(device).eval(), source, target, settings


def _tied_to_a_loaded(model, name, missing) -> bool:
    params = dict(model.named_parameters(remove_duplicate=False))
    tensor = params.get(name)
    return tensor is not None and any(p is tensor and other not in missing for other, p in params.items())
