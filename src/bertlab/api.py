"""The flat Python API: one function per `bertlab` command, named as the command (dashes become
underscores; a command with actions, `data` and `word2vec`, gives one per action). Each name is the
very function the command calls, so its arguments are the command's flags and its docstring says
what it does:

    from bertlab import api
    summary = api.finetune(task, "minilm", settings, train="train.tsv", dev="dev.tsv")
    report = api.embed("minilm", "texts.txt", "vectors.npy")
    loaded = api.load_model("runs/cls/model")          # every model folder, one loader

Names are imported on first use, so `from bertlab import api` does not import torch.
`bertlab.finetune`, `bertlab.data`, `bertlab.notes`, `bertlab.serve` and `bertlab.word2vec` are
folders of the package, which is why the functions live here rather than at the top."""
import importlib

# command (or "command action") -> (module, function)
COMMANDS = {
    "tokenize": (".tokenization.files", "tokenize_file"),
    "embed": (".inference.embedder", "embed_file"),
    "similar": (".inference.embedder", "search_corpus"),
    "extract-features": (".inference.features", "extract_features_file"),
    "fill-mask": (".inference.fill_mask", "fill_mask_texts"),
    "attention": (".inference.attention", "attention_map"),
    "generate": (".inference.generate", "generate_file"),
    "translate": (".inference.translate", "translate_file"),
    "unilm-generate": (".inference.unilm", "generate_file"),
    "predict": (".finetune.predict", "predict_file"),
    "finetune": (".finetune.job", "finetune_job"),
    "pretrain": (".pretraining.job", "pretrain_job"),
    "gpt-train": (".lm.job", "gpt_train_job"),
    "translate-train": (".translation.job", "translate_train_job"),
    "unilm-train": (".unilm.job", "unilm_train_job"),
    "distill": (".distillation.job", "distill_job"),
    "word2vec train": (".word2vec.job", "train_word2vec"),
    "word2vec neighbours": (".inference.word_vectors", "load_word2vec"),
    "word2vec analogy": (".inference.word_vectors", "load_word2vec"),
    "word2vec contrast": (".inference.static_vs_contextual", "contrast_vectors"),
    "vocab": (".pretraining.vocab", "vocab_job"),
    "create-pretraining-data": (".pretraining.create", "create_pretraining_data_job"),
    "data english-corpus": (".data.jobs", "english_corpus_job"),
    "data python-docs": (".data.jobs", "python_docs_job"),
    "data gettext": (".data.jobs", "gettext_job"),
    "data debian-zh": (".data.jobs", "debian_zh_job"),
    "data debian-synopses": (".data.jobs", "debian_synopses_job"),
    "convert": (".interop.convert", "convert_folder"),
    "export": (".inference.onnx_export", "export_onnx"),
    "serve": (".serve", "serve"),
    "notes": (".notes", "run_examples"),
}
# what every command reads a model folder with
LIBRARY = {"load_model": (".interop.load", "load_model"), "LoadedModel": (".interop.folder", "LoadedModel"),
           "export_checkpoint": (".api", "export_checkpoint")}  # `bertlab export --hf`, defined below


def python_name(command: str) -> str:
    """"word2vec train" -> "word2vec_train", "gpt-train" -> "gpt_train"."""
    return command.replace("-", "_").replace(" ", "_")


_NAMES = {python_name(command): command for command in COMMANDS}
__all__ = sorted([*_NAMES, *LIBRARY])


def export_checkpoint(run: str, out: str, overwrite: bool = False) -> str:
    """`bertlab export RUN --hf OUT`: the HF-format model folder a run writes when it ends, made now
    from its last checkpoint (one file or sharded, saved by any number of processes): a `pretrain`
    run's BERT or ALBERT (pretraining.job) or a `gpt-train` run's GPT (lm.job), told apart by the
    model config the checkpoint records."""
    import os

    from .training.checkpoint import read_checkpoint
    path = os.path.join(run, "checkpoint.pt")
    state = read_checkpoint(path)  # read once, handed on
    model, settings = state["extra"].get("model"), state["extra"].get("settings")
    if isinstance(model, dict) and "n_layer" in model:
        from .lm.job import export_gpt_checkpoint
        return export_gpt_checkpoint(run, out, overwrite, state=state)
    if isinstance(model, dict) and "num_hidden_layers" in model and isinstance(settings, dict) and "data_512" in settings:
        from .pretraining.job import export_pretraining_checkpoint
        return export_pretraining_checkpoint(run, out, overwrite, state=state)
    raise ValueError(f"{path}: export --hf takes the checkpoint of a pretrain or gpt-train run; other runs write "
                     "their model folder as they train (finetune, translate-train) or when they end")


def __getattr__(name):
    if name in _NAMES or name in LIBRARY:
        table, key = (COMMANDS, _NAMES[name]) if name in _NAMES else (LIBRARY, name)
        return getattr(importlib.import_module(table[key][0], __package__), table[key][1])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
