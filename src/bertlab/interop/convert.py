"""`bertlab convert`: a google-research/bert folder (or one TensorFlow checkpoint in it) written
out as an HF-format folder -- config.json, model.safetensors, vocab.txt, tokenizer_config.json --
which HF transformers and every bertlab command load without TensorFlow and without a guess at
the casing."""
import os

from ..models import BertForPreTraining, BertForSequenceClassification, BertModel
from .folder import LoadedModel
from .google_bert import find_checkpoint, read_google_checkpoint
from .hf_bert import load_state_dict_strict, save_pretrained
from .pretrained import check_layers_used, load_tokenizer, read_config


def locate(source) -> tuple[str, str]:
    """(folder, checkpoint prefix) of a google folder or of a checkpoint prefix inside one."""
    source = os.fspath(source)
    if os.path.isdir(source):
        prefix = find_checkpoint(source)
        if prefix is None:
            raise FileNotFoundError(f"{source}: no TensorFlow checkpoint (bert_model.ckpt.index, or a `checkpoint` "
                                    "file naming one)")
        return source, prefix
    prefix = source[:-len(".index")] if source.endswith(".index") else source
    if not os.path.isfile(prefix + ".index"):
        raise FileNotFoundError(f"{source}: neither a folder nor a TensorFlow checkpoint (no {prefix}.index)")
    return os.path.dirname(prefix) or ".", prefix


def model_for(state: dict, config):
    """The model the checkpoint's heads make: run_classifier's output layer (its rows are the labels),
    run_pretraining's masked-LM and NSP heads, or the encoder alone."""
    if "classifier.weight" in state:
        return BertForSequenceClassification(config, state["classifier.weight"].shape[0], init_weights=False)
    if "cls.predictions.bias" in state and "cls.seq_relationship.weight" in state:
        return BertForPreTraining(config, init_weights=False)
    return BertModel(config, init_weights=False)


def load_google(source, do_lower_case=None) -> LoadedModel:
    """The LoadedModel (kind "bert") of a google folder or checkpoint prefix, every weight of the
    model from the checkpoint."""
    folder, prefix = locate(source)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, do_lower_case, config)
    state = read_google_checkpoint(prefix)
    model = model_for(state, config)
    check_layers_used(load_state_dict_strict(model, state, prefix), prefix, config)
    return LoadedModel("bert", model.eval(), tokenizer, folder=folder)


def convert_google_checkpoint(source, out, do_lower_case=None, task_state=None, labels=None):
    """Write the google checkpoint `source` to the folder `out` in HF's layout; returns the model.

    A run_classifier checkpoint becomes a BertForSequenceClassification folder. Its label names are
    not in the checkpoint: `labels` names them in checkpoint order (config.json's id2label), and a
    fine-tuning task's state (`task_state`: finetune's Task.state(), e.g. of make_task("mrpc"), whose
    labels are in the order of google's processors) also writes task.json, so that `bertlab predict`
    can use the folder.
    """
    google = load_google(source, do_lower_case)
    model, tokenizer = google.model, google.tokenizer
    rows = getattr(model, "num_labels", None)
    if (task_state is not None or labels) and not rows:
        raise ValueError(f"{source}: not a fine-tuned classifier (no output_weights), so it has no labels to name")
    if task_state is not None:
        labels = task_state.get("labels")
        if labels is None or len(labels) != rows:
            raise ValueError(f"{source}: the classifier has {rows} outputs, task {task_state['task']} has "
                             f"{'no labels (regression)' if labels is None else f'{len(labels)} labels'}")
        from .finetuned import write_finetuned
        write_finetuned(out, model, tokenizer, task_state)  # into the folder claimed, its siblings untouched
        return model
    extra = {}
    if labels:
        if len(labels) != rows:
            raise ValueError(f"{source}: the classifier has {rows} outputs, but {len(labels)} labels were given")
        extra = {"id2label": {str(i): str(label) for i, label in enumerate(labels)},
                 "label2id": {str(label): i for i, label in enumerate(labels)}}
    save_pretrained(model, out, tokenizer, extra_config=extra)
    return model


HF_FILES = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "task.json"]


def convert_folder(source: str, out: str, do_lower_case: bool | None = None, task_state: dict | None = None,
                   labels: list[str] | None = None, overwrite: bool = False):
    """`bertlab convert`: check the checkpoint exists, claim the folder `out` (refused when it holds a
    model, unless overwrite), then convert_google_checkpoint with a fine-tuning task's state
    (`task_state`: its labels, and task.json) or the label names `labels`. Returns the model written."""
    from ..io import claim_output_folder
    locate(source)  # a missing checkpoint fails before OUT_DIR is made
    claim_output_folder(out, HF_FILES, overwrite, what="a model", command="convert")
    return convert_google_checkpoint(source, out, do_lower_case, task_state, labels)
