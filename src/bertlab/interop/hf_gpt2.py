"""GPT-2 checkpoints in the HF layout (config.json + model.safetensors | pytorch_model.bin).

GPT-2 stores its linear layers as `Conv1D`, whose weight is (in, out) — the transpose of
nn.Linear's — and fuses the query, key and value projections into one `c_attn`. One table maps
our names to HF's and says how each tensor is converted; both directions read the same table.
"""
import os
import re

import torch

from ..io import read_json
from ..models.gpt import GPT, GPTConfig
from ..tokenization.char_level import load_gpt_tokenizer
from .folder import LoadedModel, LoadReport, copy_matching, read_state_dict, write_hf_folder

# (ours, HF, how): "same" copies, "conv1d" transposes, "qkv" splits/fuses c_attn.
# `{i}` is a layer index; our query/key/value weights and biases become one c_attn tensor.
NAME_TABLE = [
    ("wte.weight", "transformer.wte.weight", "same"),
    ("wpe.weight", "transformer.wpe.weight", "same"),
    ("h.{i}.self_attention_sublayer.norm.{p}", "transformer.h.{i}.ln_1.{p}", "same"),
    ("h.{i}.self_attention.{qkv}.{p}", "transformer.h.{i}.attn.c_attn.{p}", "qkv"),
    ("h.{i}.self_attention.output.{p}", "transformer.h.{i}.attn.c_proj.{p}", "conv1d"),
    ("h.{i}.feed_forward_sublayer.norm.{p}", "transformer.h.{i}.ln_2.{p}", "same"),
    ("h.{i}.feed_forward.intermediate.{p}", "transformer.h.{i}.mlp.c_fc.{p}", "conv1d"),
    ("h.{i}.feed_forward.output.{p}", "transformer.h.{i}.mlp.c_proj.{p}", "conv1d"),
    ("ln_f.{p}", "transformer.ln_f.{p}", "same"),
]
QKV = ("query", "key", "value")
# Buffers old checkpoints carry (the causal mask), and the output layer tied to wte.
IGNORED = re.compile(r"\.attn\.(bias|masked_bias)$|^lm_head\.weight$")


def _pattern(template: str) -> re.Pattern:
    out = re.escape(template)
    for name, regex in (("i", r"\d+"), ("p", r"weight|bias"), ("qkv", "|".join(QKV))):
        out = out.replace(re.escape("{" + name + "}"), f"(?P<{name}>{regex})")
    return re.compile(out + "$")


TABLE = [(_pattern(ours), _pattern(hf), ours, hf, how) for ours, hf, how in NAME_TABLE]


def _fill(template, groups):
    return template.format(**{k: v for k, v in groups.items() if v is not None})


def hf_state_dict(model: GPT) -> dict:
    """Our state dict under GPT-2's names and layouts, contiguous for safetensors."""
    ours, out = model.state_dict(), {}
    for key, tensor in ours.items():
        for ours_re, _, _, hf, how in TABLE:
            m = ours_re.match(key)
            if not m:
                continue
            g = m.groupdict()
            if how == "qkv":
                if g["qkv"] != "query":
                    break  # written together with the query
                parts = [ours[key.replace(".query.", f".{n}.")] for n in QKV]
                tensor = torch.cat(parts, dim=0)
                tensor = tensor.t() if g["p"] == "weight" else tensor
            elif how == "conv1d" and g["p"] == "weight":
                tensor = tensor.t()
            out[_fill(hf, g)] = tensor.detach().contiguous().cpu()
            break
        else:
            raise ValueError(f"no GPT-2 name for parameter {key}")
    return out


def our_state_dict(hf_state: dict) -> tuple[dict, list]:
    """GPT-2 tensors under our names and layouts, and the checkpoint names nothing maps to."""
    out, unused = {}, []
    for original, tensor in hf_state.items():
        key = original if original.startswith(("transformer.", "lm_head.")) else "transformer." + original
        if IGNORED.search(key):
            continue
        for _, hf_re, ours, _, how in TABLE:
            m = hf_re.match(key)
            if not m:
                continue
            g = m.groupdict()
            if how == "qkv":
                tensor = tensor.t() if g["p"] == "weight" else tensor
                for name, part in zip(QKV, tensor.chunk(3, dim=0)):
                    out[_fill(ours, {**g, "qkv": name})] = part.contiguous()
            else:
                out[_fill(ours, g)] = tensor.t().contiguous() if how == "conv1d" and g["p"] == "weight" else tensor
            break
        else:
            unused.append(original)
    return out, unused


def load_state_dict_strict(model: GPT, hf_state: dict, source="checkpoint") -> LoadReport:
    """Copy every tensor; a missing or mis-shaped one is an error that names it."""
    ours, unused = our_state_dict(hf_state)
    report = copy_matching(model, ours, source=source)
    report.unused = sorted(unused)
    problems = report.misfits()
    if problems:
        shown = problems[:5] + ([f"... and {len(problems) - 5} more"] if len(problems) > 5 else [])
        raise ValueError(f"{source}: does not fit the model:\n  " + "\n  ".join(shown))
    return report


def load_gpt2(folder, map_location="cpu") -> LoadedModel:
    """The LoadedModel (kind "gpt", extra "report") of an HF GPT-2 folder (config.json + weights),
    every tensor checked, with the tokenizer saved beside it (byte-level BPE or characters), checked
    to be the model's; None when the folder has none (HF's GPT-2 saved without its tokenizer)."""
    config_path = os.path.join(folder, "config.json")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such model folder")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{folder}: no config.json (is this a GPT-2 model folder?)")
    settings = read_json(config_path)
    kind = settings.get("model_type", "gpt2" if "n_embd" in settings else None)
    if kind != "gpt2":
        raise ValueError(f"{config_path}: describes {f'a {kind!r} model' if kind else 'no GPT-2 model'}, not a "
                         "GPT (model_type 'gpt2', as gpt-train writes)")
    try:
        model = GPT(GPTConfig.from_dict(settings))
    except (TypeError, ValueError) as e:  # a value of the wrong kind or out of range
        raise ValueError(f"{config_path}: {e}") from None
    report = load_state_dict_strict(model, read_state_dict(folder), source=folder)
    tokenizer = None
    if any(os.path.exists(os.path.join(folder, name)) for name in ("merges.txt", "chars.json")):
        tokenizer = load_gpt_tokenizer(folder)
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ValueError(f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens, the model "
                             f"{model.config.vocab_size}; they are not one model's files")
    return LoadedModel("gpt", model.to(map_location).eval(), tokenizer, {"report": report})


def save_pretrained(model: GPT, folder, tokenizer=None, extra_config: dict | None = None):
    """Write config.json and model.safetensors (and the tokenizer's files), each atomically, in the
    layout HF's GPT2LMHeadModel.from_pretrained loads with no missing or unexpected keys."""
    write_hf_folder(folder, {**model.config.to_dict(hf=True), **(extra_config or {})}, hf_state_dict(model))
    if tokenizer is not None:
        tokenizer.save(folder)
