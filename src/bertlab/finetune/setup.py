"""The start of a fine-tuning run: its data splits (checked) and the model to train."""
import os
import sys
from dataclasses import replace

from ..interop.hf_bert import init_from_state_dict, read_state_dict
from ..interop.pretrained import load_tokenizer, read_config, resolve
from .glue import GLUE, glue_files
from .special_tokens import grow_word_embeddings


def read_splits(task, args) -> dict:
    """{"train", "dev", "test_path"} from --data-dir (GLUE) or --train/--dev/--test; labels are
    fixed from the training file and every dev label must be one of them."""
    if args.data_dir:
        if task.name not in GLUE:
            raise ValueError(f"--data-dir is for the GLUE tasks ({', '.join(GLUE)}); "
                             f"for {task.name} give --train and --dev")
        files = glue_files(task.name, args.data_dir)
        files["test"] = args.test  # GLUE's test.tsv has no labels and, for CoLA, other columns
    else:
        files = {"train": args.train, "dev": args.dev, "test": args.test}
    if not files["train"]:
        raise ValueError("no training data: give --train FILE (or --data-dir for a GLUE task)")
    for split, path in files.items():
        if path and not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such {split} file")
    train = task.read(files["train"])
    task.fit_labels(train)
    dev = task.read(files["dev"]) if files["dev"] else []
    if dev:
        task.check_labels(dev, files["dev"])
    else:
        print("no dev file: the model of the last step is kept", file=sys.stderr)
    labels = f", {len(task.labels)} labels" if task.labels else ""
    print(f"{task.name}: {len(train)} training and {len(dev)} dev examples{labels}", file=sys.stderr)
    return {"train": train, "dev": dev, "test": bool(files["test"]), "test_path": files["test"]}


def load_base_model(task, name, init="pretrained", added_tokens=(), quiet=False):
    """(model, tokenizer): the task's model with the checkpoint's encoder (init="pretrained") or
    random weights of the same shape (init="random"); the task head is always new. `added_tokens`
    become never-split special tokens with new embedding rows (special_tokens.py)."""
    folder = resolve(name)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config=config)
    added = tokenizer.add_special_tokens(added_tokens) if added_tokens else 0
    model = task.build_model(replace(config, vocab_size=config.vocab_size + added), init_weights=True)
    if init == "pretrained":
        state = read_state_dict(folder)
        report = init_from_state_dict(model, grow_word_embeddings(state, added) if added else state)
        if not quiet:
            print(f"{folder}: initialized {len(report.initialized)} tensors; new: {', '.join(report.new) or 'none'}",
                  file=sys.stderr)
    if added_tokens and not quiet:
        print(f"special tokens {', '.join(added_tokens)}: {added} new, {config.vocab_size} -> "
              f"{config.vocab_size + added} embedding rows", file=sys.stderr)
    return model, tokenizer
