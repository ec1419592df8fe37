"""bertlab predict: run a fine-tuned model folder over a file, one JSON prediction per example."""
import json
import sys

from ..finetune.folder import load_finetuned
from ..finetune.trainer import predict_outputs
from ..io import atomic_write_text


def add_parser(subparsers):
    p = subparsers.add_parser(
        "predict", help="predict with a model folder written by `bertlab finetune`",
        description="Read FILE in the layout the model was fine-tuned on (same columns / CoNLL / SQuAD "
                    "JSON), write one JSON object per example (label and probability, score, tags or "
                    "answer) to OUT or stdout, and print the metrics when FILE has gold labels.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--model", required=True, help="OUT/model of a `bertlab finetune` run")
    p.add_argument("-o", "--output", metavar="OUT.jsonl", help="default: standard output")
    p.add_argument("--batch-size", type=int, default=64)
    p.set_defaults(run=run)


def predict_file(model_dir, path, output=None, batch_size=64, progress=True) -> dict:
    """Predict every example of `path`; returns the metrics (empty when the file is unlabelled)."""
    task, model, tokenizer = load_finetuned(model_dir)
    examples = task.read(path)
    features = task.featurize(examples, tokenizer)
    outputs = predict_outputs(task, model, features, tokenizer.pad_token_id, batch_size, progress=progress)
    rows = task.predictions(examples, features, outputs)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if output:
        atomic_write_text(output, text)
    else:
        sys.stdout.write(text)
    if task.is_labelled(examples):
        task.check_labels(examples, path)
        return task.evaluate(examples, features, outputs)
    return {}


def run(args):
    scores = predict_file(args.model, args.file, args.output, args.batch_size)
    if scores:
        print(json.dumps(scores), file=sys.stderr)
