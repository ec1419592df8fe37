"""google-research/bert's checkpoint folders: bert_config.json, vocab.txt and a TensorFlow checkpoint
(bert_model.ckpt.index + bert_model.ckpt.data-00000-of-00001), read with tf_checkpoint.py.

google's variables are renamed to HF's tensor names here, so that from there on a google folder
takes the path of an HF one (hf_bert's NAME_TABLE to our names, strict loading, save_pretrained).
HF kept google's TF scopes as its module names, so the table is short: a dense layer's `kernel`
(in x out, the transpose of torch's Linear weight) and `bias`, a LayerNorm's `gamma` and `beta`,
and the few variables that sit outside a scope (the masked-LM output bias, the NSP layer and
run_classifier's output layer, all stored as torch stores them).
"""
import os
import re

from .tf_checkpoint import TFCheckpoint

CHECKPOINT = "bert_model.ckpt"  # the prefix in google's released folders

# google's scope -> HF's module, {i} a layer index. The variables under it are LEAVES.
SCOPES = [
    ("bert/embeddings/LayerNorm", "bert.embeddings.LayerNorm"),
    ("bert/encoder/layer_{i}/attention/self/query", "bert.encoder.layer.{i}.attention.self.query"),
    ("bert/encoder/layer_{i}/attention/self/key", "bert.encoder.layer.{i}.attention.self.key"),
    ("bert/encoder/layer_{i}/attention/self/value", "bert.encoder.layer.{i}.attention.self.value"),
    ("bert/encoder/layer_{i}/attention/output/dense", "bert.encoder.layer.{i}.attention.output.dense"),
    ("bert/encoder/layer_{i}/attention/output/LayerNorm", "bert.encoder.layer.{i}.attention.output.LayerNorm"),
    ("bert/encoder/layer_{i}/intermediate/dense", "bert.encoder.layer.{i}.intermediate.dense"),
    ("bert/encoder/layer_{i}/output/dense", "bert.encoder.layer.{i}.output.dense"),
    ("bert/encoder/layer_{i}/output/LayerNorm", "bert.encoder.layer.{i}.output.LayerNorm"),
    ("bert/pooler/dense", "bert.pooler.dense"),
    ("cls/predictions/transform/dense", "cls.predictions.transform.dense"),
    ("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm"),
]
# leaf -> (HF's leaf, transposed): a dense layer's, then a LayerNorm's
LEAVES = {"kernel": ("weight", True), "bias": ("bias", False), "gamma": ("weight", False), "beta": ("bias", False)}
# google's variable -> HF's tensor, for the variables outside the scopes above
TENSORS = {
    "bert/embeddings/word_embeddings": "bert.embeddings.word_embeddings.weight",
    "bert/embeddings/position_embeddings": "bert.embeddings.position_embeddings.weight",
    "bert/embeddings/token_type_embeddings": "bert.embeddings.token_type_embeddings.weight",
    "cls/predictions/output_bias": "cls.predictions.bias",  # the decoder's weight is the word embeddings (tied)
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",  # (2, hidden), as torch's Linear
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "output_weights": "classifier.weight",  # run_classifier.py's create_model: (num_labels, hidden)
    "output_bias": "classifier.bias",
}
# Training state, not the model: the Adam moments of google's AdamWeightDecayOptimizer (and LAMB),
# tf.train.AdamOptimizer's slots and beta powers, the step counter and mixed-precision loss scaling.
SKIPPED = re.compile(r"/(adam_m|adam_v|Adam|Adam_1)$|^(global_step|bad_steps|good_steps|loss_scale|"
                     r"beta1_power|beta2_power)$")
_SCOPE_PATTERNS = [(re.compile("^" + re.escape(scope).replace(r"\{i\}", r"(\d+)") + "/([a-z]+)$"), hf)
                   for scope, hf in SCOPES]


def hf_name(variable: str) -> tuple[str, bool] | None:
    """(HF's tensor name, whether the tensor is transposed) of a google variable; None if it is not a BERT weight."""
    if variable in TENSORS:
        return TENSORS[variable], False
    for pattern, hf in _SCOPE_PATTERNS:
        m = pattern.match(variable)
        if m:
            *layer, leaf = m.groups()
            layer_norm = hf.endswith("LayerNorm")
            if leaf not in LEAVES or (leaf in ("gamma", "beta")) != layer_norm:
                return None
            name, transposed = LEAVES[leaf]
            return f"{hf.replace('{i}', layer[0]) if layer else hf}.{name}", transposed
    return None


def read_google_checkpoint(prefix) -> dict:
    """{HF tensor name: tensor} of the TensorFlow checkpoint `prefix`, optimizer state left out.
    A variable that is neither a BERT weight nor optimizer state is an error naming it."""
    checkpoint = TFCheckpoint(prefix)
    state, unknown = {}, []
    for variable in checkpoint.names():
        if SKIPPED.search(variable):
            continue
        target = hf_name(variable)
        if target is None:
            unknown.append(variable)
            continue
        name, transposed = target
        tensor = checkpoint.tensor(variable)
        if transposed:
            if tensor.dim() != 2:
                raise ValueError(f"{checkpoint.index}: {variable} has shape {list(tensor.shape)}; a dense "
                                 "layer's kernel has two dimensions")
            tensor = tensor.t().contiguous()
        state[name] = tensor
    if unknown:
        raise ValueError(f"{checkpoint.index}: variables that are neither BERT weights nor optimizer state: "
                         f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''} ({len(unknown)}); "
                         "bertlab reads google-research/bert's pretraining and run_classifier checkpoints")
    return state


def google_architecture(folder) -> str:
    """The HF class a google folder's checkpoint fits, by the heads it holds: run_classifier's output
    layer, run_pretraining's two heads, or neither (the encoder alone)."""
    names = set(TFCheckpoint(find_checkpoint(folder)).names())
    if "output_weights" in names:
        return "BertForSequenceClassification"
    if {"cls/predictions/output_bias", "cls/seq_relationship/output_weights"} <= names:
        return "BertForPreTraining"
    return "BertModel"


def find_checkpoint(folder) -> str | None:
    """The prefix of the TensorFlow checkpoint in `folder`, or None if it holds none: bert_model.ckpt
    (google's releases), else the one its `checkpoint` file names (tf.train.Saver and run_classifier's
    Estimator write it beside model.ckpt-STEP; its path may be absolute, from another machine), else
    the only *.index there."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        return None
    if os.path.isfile(os.path.join(folder, CHECKPOINT + ".index")):
        return os.path.join(folder, CHECKPOINT)
    state = os.path.join(folder, "checkpoint")
    if os.path.isfile(state):
        with open(state, encoding="utf-8", errors="replace") as f:
            m = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', f.read(), re.MULTILINE)
        if m:
            prefix = os.path.join(folder, m.group(1).replace("\\", "/").rsplit("/", 1)[-1])
            if not os.path.isfile(prefix + ".index"):
                raise FileNotFoundError(f"{state} names the checkpoint {m.group(1)}, but {prefix}.index is not there")
            return prefix
    indexes = sorted(name[:-len(".index")] for name in os.listdir(folder) if name.endswith(".index"))
    if len(indexes) > 1:
        raise ValueError(f"{folder}: holds {len(indexes)} TensorFlow checkpoints ({', '.join(indexes)}) and no "
                         "`checkpoint` file naming one; convert the one you mean: bertlab convert "
                         f"{os.path.join(folder, indexes[-1])} -o OUT")
    return os.path.join(folder, indexes[0]) if indexes else None


def is_google_folder(folder) -> bool:
    """bert_config.json and a TensorFlow checkpoint index, and no HF weights (which would be read instead)."""
    folder = os.fspath(folder)
    if any(os.path.exists(os.path.join(folder, name)) for name in ("model.safetensors", "pytorch_model.bin")):
        return False
    return (os.path.isfile(os.path.join(folder, "bert_config.json"))  # so the folder exists
            and any(name.endswith(".index") for name in os.listdir(folder)))


def checkpoint_folder(path) -> str | None:
    """The folder of a checkpoint given by its prefix (FOLDER/bert_model.ckpt, or its .index file),
    which must be the checkpoint the folder is read by; None if `path` is not a checkpoint prefix."""
    path = os.fspath(path)
    prefix = path[:-len(".index")] if path.endswith(".index") else path
    if not os.path.isfile(prefix + ".index"):
        return None
    folder = os.path.dirname(prefix) or "."
    chosen = find_checkpoint(folder)
    if os.path.abspath(chosen) != os.path.abspath(prefix):
        raise ValueError(f"{prefix}: its folder is read by its checkpoint {os.path.basename(chosen)} (bertlab reads "
                         f"one checkpoint per folder); to use this one, convert it: bertlab convert {prefix} -o OUT")
    return folder


def google_casing(folder) -> tuple[bool, str]:
    """(do_lower_case, why) of a google folder, which records no casing: google names its uncased
    models uncased_L-12_H-768_A-12, multilingual_L-12_H-768_A-12, chinese_L-12_H-768_A-12 and its
    cased ones cased_L-12_H-768_A-12, multi_cased_L-12_H-768_A-12 (run_classifier.py checks
    --do_lower_case against those names), so a name with "cased" and not "uncased" is cased."""
    name = os.path.basename(os.path.abspath(folder)).lower()
    lower = not ("cased" in name and "uncased" not in name)
    return lower, (f"{folder} is a google-research/bert folder, which records no casing; by google's naming "
                   f"(cased_L-12_H-768_A-12 cased; uncased_..., multilingual_..., chinese_... uncased) its name "
                   f"makes it {'uncased' if lower else 'cased'}")
