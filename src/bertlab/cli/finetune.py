"""bertlab finetune: train a BERT checkpoint on a labelled task; the best dev model becomes a folder."""
import json
import os
import sys

from ..finetune.grid import run_grid
from ..finetune.setup import load_base_model, read_splits
from ..finetune.tasks import TASK_NAMES, make_task
from ..finetune.trainer import FinetuneSettings, finetune
from ..io import atomic_write_text
from ..training.metrics import MetricsLog, plot_learning_curve


def add_parser(subparsers):
    p = subparsers.add_parser(
        "finetune", help="fine-tune BERT on classification, pairs, regression, NER, SQuAD or a GLUE task",
        description="Fine-tune a BERT checkpoint (ours, HF's, or 'minilm') on a task: reads the training "
                    "and dev files, trains with AdamW (warmup, linear decay), evaluates on dev after every "
                    "epoch and keeps the best model in OUT/model (weights, config with the label map, "
                    "vocab, task.json), which `bertlab predict --model OUT/model` needs alone. Also "
                    "writes OUT/metrics.jsonl, OUT/curves.png and OUT/summary.json.",
        epilog="Tasks: classify (one text or a pair, any labels), regression (a number), ner "
               "(CoNLL files), squad (SQuAD v1.1/v2.0 JSON), multiple_choice or swag (SWAG's CSV: a context and N endings), and the GLUE tasks by name with "
               "--data-dir (cola sst-2 mrpc sts-b qqp mnli qnli rte wnli). Example: bertlab finetune "
               "--task mrpc --data-dir glue_data/MRPC --model minilm -o runs/mrpc")
    p.add_argument("--task", required=True, metavar="NAME", help="one of: " + ", ".join(TASK_NAMES))
    p.add_argument("--model", required=True, help="a BERT folder (HF layout) or 'minilm'")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder for the model, logs and curves")
    data = p.add_argument_group("data")
    data.add_argument("--data-dir", help="a GLUE task's folder (train.tsv, dev.tsv, test.tsv)")
    data.add_argument("--train", help="training file (.tsv/.csv/.jsonl for classify/regression, CoNLL for ner, JSON for squad)")
    data.add_argument("--dev", help="dev file: evaluated after every epoch; the best model is kept")
    data.add_argument("--test", help="optional test file: predicted (and scored, if labelled) with the best model")
    data.add_argument("--text-a", default="sentence", help="column of the (first) text (name, or 0-based index with --no-header)")
    data.add_argument("--text-b", help="column of the second text of a pair")
    data.add_argument("--label", default="label", help="column of the label (default 'label')")
    data.add_argument("--no-header", action="store_true", help="the table's first row is data; name columns by index")
    data.add_argument("--context", default="sent1", help="multiple_choice: column of the context (default sent1, SWAG's)")
    data.add_argument("--prefix", default="sent2", help="multiple_choice: column of the start every ending shares "
                                                        "(SWAG's sent2); '' for none")
    data.add_argument("--endings", default="ending0,ending1,ending2,ending3",
                      help="multiple_choice: the candidate endings' columns; the label is the right one's index")
    data.add_argument("--metric", help="dev metric to maximise: accuracy (default), macro_f1, f1 (binary), mcc; "
                                       "pearson (default) or spearman for regression")
    data.add_argument("--max-seq-length", type=int, help="word pieces per input (default 128; 384 for squad)")
    data.add_argument("--doc-stride", type=int, help="stride of the sliding windows over long inputs "
                                                     "(default: half a window; 128 for squad)")
    data.add_argument("--version-2-with-negative", action="store_true", help="squad: SQuAD 2.0 (unanswerable questions)")
    data.add_argument("--add-tokens", metavar="T1,T2", help="new special tokens never split (e.g. entity markers "
                                                           "[S-PER],[E-PER]); the embedding table grows to fit")
    train = p.add_argument_group("training (google-research/bert's defaults)")
    train.add_argument("--epochs", type=float, default=3.0)
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--lr", type=float, default=5e-5, help="peak learning rate (default 5e-5)")
    train.add_argument("--warmup-proportion", type=float, default=0.1)
    train.add_argument("--weight-decay", type=float, default=0.01)
    train.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    train.add_argument("--grad-clip", type=float, default=1.0)
    train.add_argument("--eval-every", type=int, help="evaluate every N steps (default: every epoch)")
    train.add_argument("--patience", type=int, help="early stopping: evaluations without a better dev score")
    train.add_argument("--max-steps", type=int)
    train.add_argument("--max-minutes", type=float, help="stop (and keep the best model) after this many minutes")
    train.add_argument("--group-by-length", action="store_true",
                       help="batches of similar lengths (less padding, faster on mixed lengths; on short texts it "
                            "cost ~1.4 points of accuracy, see the README). Default: plain shuffled batches")
    train.add_argument("--init", choices=["pretrained", "random"], default="pretrained",
                       help="random: the same architecture from random weights (a baseline)")
    train.add_argument("--grid", action="store_true",
                       help="sweep batch {16,32} x lr {5e-5,3e-5,2e-5} x epochs {2,3,4} (the notes' grid) and keep "
                            "the best dev score; each run in OUT/grid/, the winner copied to OUT/model")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default="auto", help="cpu, cuda, mps or auto")
    train.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def task_options(args) -> dict:
    if args.task in ("classify", "regression"):
        options = {"text_a": _column(args.text_a, args), "text_b": _column(args.text_b, args),
                   "label": _column(args.label, args), "header": not args.no_header, "metric": args.metric}
    elif args.task in ("multiple_choice", "swag"):
        options = {"context": args.context, "prefix": args.prefix or None, "endings": args.endings.split(",")}
    elif args.task == "squad":
        options = {"version_2_with_negative": args.version_2_with_negative}
    else:
        options = {}
    if args.doc_stride:
        options["doc_stride"] = args.doc_stride
    return options


def _column(value, args):
    return int(value) if value is not None and args.no_header else value


def settings_from(args) -> FinetuneSettings:
    return FinetuneSettings(
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, warmup_proportion=args.warmup_proportion,
        weight_decay=args.weight_decay, grad_accum=args.grad_accum, grad_clip=args.grad_clip,
        eval_every=args.eval_every, patience=args.patience, max_steps=args.max_steps, max_minutes=args.max_minutes,
        group_by_length=args.group_by_length, seed=args.seed, device=args.device, precision=args.precision,
        progress=not args.quiet)


def run(args):
    length = {"max_seq_length": args.max_seq_length} if args.max_seq_length else {}  # else the task's default
    task = make_task(args.task, **length, **task_options(args))
    splits = read_splits(task, args)
    added = args.add_tokens.split(",") if args.add_tokens else []
    s = settings_from(args)
    base = lambda: load_base_model(task, args.model, args.init, added, quiet=args.quiet)  # noqa: E731
    if args.grid:
        summary = run_grid(task, base, splits, args.output, s)
    else:
        model, tokenizer = base()
        summary = finetune(task, model, tokenizer, splits["train"], splits["dev"], args.output, s)
        records = MetricsLog(os.path.join(args.output, "metrics.jsonl")).read()
        plot_learning_curve(records, os.path.join(args.output, "curves.png"), task.metric,
                            title=f"{task.name} from {args.model}")
    if splits.get("test"):
        from .predict import predict_file
        summary["test"] = predict_file(os.path.join(args.output, "model"), args.test or splits["test_path"],
                                       os.path.join(args.output, "test_predictions.jsonl"), progress=not args.quiet)
    atomic_write_text(os.path.join(args.output, "summary.json"), json.dumps(summary, indent=2, default=str) + "\n")
    print(json.dumps({k: summary[k] for k in ("task", "metric", "best_score", "dev", "test") if k in summary}),
          file=sys.stderr)
