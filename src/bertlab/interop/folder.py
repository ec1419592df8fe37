"""The model folder every bertlab model is saved in, HF's layout: config.json beside
model.safetensors (or, read only, pytorch_model.bin or google's TensorFlow checkpoint). What
loading the weights did is a LoadReport.

Only the file I/O lives here; each family's names (hf_bert, hf_gpt2) and folder extras
(translation_folder, interop/finetuned.py) sit in their own modules, and load.py picks between them.
"""
import json
import os
from dataclasses import dataclass, field

import torch

from ..io import atomic_write, atomic_write_text, check_finite_tensors, make_folder, read_safetensors, read_torch_file


@dataclass
class LoadReport:
    """What partial initialisation did, as google-research/bert's assignment map reports it."""
    initialized: list = field(default_factory=list)
    new: list = field(default_factory=list)  # in the model, not in the checkpoint
    mismatched: list = field(default_factory=list)  # (name, model shape, checkpoint shape)
    unused: list = field(default_factory=list)  # in the checkpoint, not in the model

    def __str__(self):
        lines = [f"initialized {len(self.initialized)} tensors from the checkpoint"]
        for title, names in (("new (randomly initialised)", self.new), ("left unused", self.unused)):
            if names:
                lines.append(f"{title}: {len(names)}: " + ", ".join(names))
        for name, ours, theirs in self.mismatched:
            lines.append(f"shape mismatch, kept random: {name}: model {ours} vs checkpoint {theirs}")
        return "\n".join(lines)

    def misfits(self, most: int = 8) -> list[str]:
        """Why the checkpoint cannot be loaded strictly: its missing and mis-shaped tensors, the
        first `most` of them and a count of the rest (a config of 100,000 layers against a 2-layer
        checkpoint once printed 1.6 million lines)."""
        problems = [f"missing tensor {n}" for n in self.new]
        problems += [f"tensor {n} has shape {t} in the checkpoint, the config needs {o}" for n, o, t in self.mismatched]
        return problems[:most] + ([f"... and {len(problems) - most:,} more"] if len(problems) > most else [])


def check_float_weight(name: str, tensor, target, source=None):
    """Rule: weights are floating point. A checkpoint's tensor of another dtype (int64, int32, uint8,
    bool, complex) loaded into a float weight would be cast without a word (copy_ and
    load_state_dict both cast: int64 embeddings became zero rows), so it is refused, naming the
    tensor (and `source`, the file or folder, when the caller knows it). Every loader of weights
    calls this, whichever way it then copies them."""
    if target.is_floating_point() and not tensor.is_floating_point():
        where = f"{source}: " if source else ""
        raise ValueError(f"{where}tensor {name} has dtype {str(tensor.dtype).removeprefix('torch.')}; "
                         "weights must be floating point (float32, float16 or bfloat16)")


def copy_matching(model, tensors: dict, skip=(), source=None, file_names: dict | None = None) -> LoadReport:
    """Copy tensors[name] into each of the model's tensors of that name and shape (those in `skip`,
    e.g. tied copies, are left alone); the report names the copied, the missing and the mis-shaped
    ones. `unused` is the caller's to fill: only it knows the checkpoint's own names. A tensor that
    is not floating point for a float weight is refused (check_float_weight), named as the file has
    it (`file_names`: model name -> the checkpoint's, where they differ; `source`: the file)."""
    report = LoadReport()
    with torch.no_grad():
        for name, target in model.state_dict().items():
            if name in skip:
                continue
            if name not in tensors:
                report.new.append(name)
            elif tensors[name].shape != target.shape:
                report.mismatched.append((name, tuple(target.shape), tuple(tensors[name].shape)))
            else:
                check_float_weight((file_names or {}).get(name, name), tensors[name], target, source)
                target.copy_(tensors[name])
                report.initialized.append(name)
    return report


def read_state_dict(folder) -> dict:
    """The tensors of model.safetensors (preferred) or pytorch_model.bin in `folder`, or of the
    TensorFlow checkpoint of a google-research/bert folder, under HF's names (google_bert.py)."""
    st, pt = os.path.join(folder, "model.safetensors"), os.path.join(folder, "pytorch_model.bin")
    if os.path.exists(st):
        return read_safetensors(st)
    if os.path.exists(pt):
        tensors = read_torch_file(pt)  # sizes checked before anything is inflated; no code runs
        if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
            raise ValueError(f"{pt}: holds a {type(tensors).__name__} that is not a dict of tensors")
        check_finite_tensors(tensors, pt)
        return tensors
    from .google_bert import find_checkpoint, read_google_checkpoint
    prefix = find_checkpoint(folder)
    if prefix is not None:
        tensors = read_google_checkpoint(prefix)
        check_finite_tensors(tensors, prefix)
        return tensors
    raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin, and no TensorFlow checkpoint "
                            "(bert_model.ckpt.index)")


def write_hf_folder(folder, config: dict, tensors: dict):
    """config.json + model.safetensors, each written atomically: the HF layout every model shares."""
    from safetensors.torch import save
    make_folder(folder)
    atomic_write_text(os.path.join(folder, "config.json"), json.dumps(config, indent=2, sort_keys=True) + "\n")
    atomic_write(os.path.join(folder, "model.safetensors"),
                 lambda f: f.write(save(tensors, metadata={"format": "pt"})), mode="wb")


@dataclass(frozen=True)
class LoadedModel:
    """A model in eval mode on its device and the tokenizer that encodes its input. `extra` holds
    what a kind adds: "report" (the LoadReport, for gpt and bert but a masked-LM folder),
    "task_state" (finetuned: its task.json), "target_tokenizer" and "settings" (translation, whose
    `tokenizer` is the source side), "settings" (unilm)."""
    kind: str
    model: object
    tokenizer: object
    extra: dict = field(default_factory=dict)
    folder: str | None = None  # where load_model read it (resolved), for files beside the weights

    @property
    def encoder(self):
        """The BERT-family encoder inside the model (a task model's `.bert`, a ModernBERT head
        model's `.modernbert`), for what reads hidden states: embeddings, features, attention maps."""
        for name in ("bert", "modernbert"):
            if hasattr(self.model, name):
                return getattr(self.model, name)
        return self.model
