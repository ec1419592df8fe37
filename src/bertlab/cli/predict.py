"""bertlab predict: run a fine-tuned model folder over a file, one JSON prediction per example."""
import json
import sys

from .args import flags_for, positive_int
from .finetune import ANSWER_FLAGS, add_answer_arguments
from .model_args import add_output_arguments


def add_parser(subparsers):
    p = subparsers.add_parser(
        "predict", help="predict with a model folder written by `bertlab finetune`",
        description="Read FILE in the layout the model was fine-tuned on (same columns / CoNLL / SQuAD "
                    "JSON), write one JSON object per example (label and probability, score, tags or "
                    "answer) to OUT or stdout, and print the metrics when FILE has gold labels.")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--model", required=True, help="OUT/model of a `bertlab finetune` run")
    add_output_arguments(p, required=False, metavar="OUT.jsonl", help="where to write (default: standard output)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--int8", action="store_true",
                   help="CPU only: dynamic int8 linear layers, faster at a small accuracy cost (compare the "
                        "metrics with a run without it; docs/guide/export.md)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_answer_arguments(p.add_argument_group("squad answers (default: what the model was fine-tuned with, "
                                              "from its task.json)"))
    p.set_defaults(run=run)


def run(args):
    from ..finetune.predict import predict_file
    from ..io import check_output_file
    if args.out:
        check_output_file(args.out, args.overwrite)
    options = {name: getattr(args, name) for name in ANSWER_FLAGS if getattr(args, name) is not None}
    scores = predict_file(**flags_for(predict_file, args, model_dir=args.model, path=args.file, output=args.out,
                                      options=options))
    if scores:
        print(json.dumps(scores), file=sys.stderr)
