"""bertlab finetune: train a BERT checkpoint on a labelled task; the best dev model becomes a folder."""
import json
import sys

from ..finetune.tasks import TASK_NAMES, WINDOWED
from ..finetune.windows import LONG_INPUTS
from .args import add_run_arguments, flags_for, fraction, nonnegative_float, positive_float, positive_int


def add_parser(subparsers):
    p = subparsers.add_parser(
        "finetune", help="fine-tune BERT on classification, pairs, regression, NER, SQuAD or a GLUE task",
        description="Fine-tune a BERT checkpoint (ours, HF's, or 'minilm') on a task: reads the training "
                    "and dev files, trains with AdamW (warmup, linear decay), evaluates on dev after every "
                    "epoch and keeps the best model in OUT/model (weights, config with the label map, "
                    "vocab, task.json), which `bertlab predict --model OUT/model` needs alone; without "
                    "--dev it keeps the last step's model and reports no score. Also writes "
                    "OUT/metrics.jsonl, OUT/curves.png, OUT/summary.json, and OUT/checkpoint.pt at each "
                    "evaluation until the run completes (for --resume).",
        epilog="Tasks: classify (one text or a pair, any labels), regression (a number), ner "
               "(CoNLL files), squad (SQuAD v1.1/v2.0 JSON), multiple_choice or swag (SWAG's CSV: a context and N endings), relation (SemEval-2010 Task 8 or TACRED: two marked entities), and the GLUE tasks by name with "
               "--data-dir (cola sst-2 mrpc sts-b qqp mnli qnli rte wnli). Example: bertlab finetune "
               "--task mrpc --data-dir glue_data/MRPC --model minilm -o runs/mrpc")
    p.add_argument("--task", required=True, metavar="NAME", help="one of: " + ", ".join(TASK_NAMES))
    p.add_argument("--model", required=True, help="a BERT folder (HF layout) or 'minilm'")
    add_run_arguments(p.add_argument_group("run (google-research/bert's defaults)"), defaults=dict(
        batch_size=32, grad_accum=1, lr=5e-5, grad_clip=1.0, max_steps=None, max_minutes=None, eval_every=None,
        seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False,
        resume=False),
        help={"out": "folder for the model, logs and curves",
              "eval_every": "evaluate on dev and save a checkpoint every N steps (default: every epoch)",
              "max_minutes": "stop after this many minutes, keeping the best model and a checkpoint for --resume"})
    data = p.add_argument_group("data")
    data.add_argument("--data-dir", help="a GLUE task's folder (train.tsv, dev.tsv, test.tsv)")
    data.add_argument("--train", help="training file (.tsv/.csv/.jsonl for classify/regression, CoNLL for ner, JSON for squad)")
    data.add_argument("--dev", help="dev file: evaluated after every epoch; the best model is kept "
                                    "(without it, the last step's model)")
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
    data.add_argument("--max-seq-length", type=positive_int, help="word pieces per input (default 128; 384 for squad)")
    data.add_argument("--doc-stride", type=positive_int, help="the step between the starts of the sliding windows over "
                                                              "long inputs, google's doc_stride (default: half a "
                                                              "window; 128 for squad). HF run_qa's --doc_stride is "
                                                              "the overlap instead: its 128 equals ours of a "
                                                              "window's context length minus 128")
    data.add_argument("--long-inputs", choices=LONG_INPUTS,
                      help="classify/regression of one text longer than --max-seq-length: truncate it (the "
                           "default, as google-research/bert and HF do), or read it in sliding windows and average "
                           "their logits (an epoch then holds a step's work per window: 4.3x on long manual-page "
                           "texts, which scored far better truncated at the same compute; docs/guide/finetune.md)")
    data.add_argument("--relation-format", choices=["auto", "semeval", "tacred"], default="auto",
                      help="relation: SemEval-2010 Task 8 text or TACRED JSON (auto: .json/.jsonl are TACRED)")
    data.add_argument("--version-2-with-negative", action="store_true", help="squad: SQuAD 2.0 (unanswerable questions)")
    add_answer_arguments(data)
    data.add_argument("--add-tokens", metavar="T1,T2", help="new special tokens never split (e.g. entity markers "
                                                           "[S-PER],[E-PER]); the embedding table grows to fit")
    train = p.add_argument_group("training (google-research/bert's defaults)")
    train.add_argument("--epochs", type=positive_float, default=3.0)
    train.add_argument("--warmup-proportion", type=fraction, default=0.1, help="0 to 1 (default 0.1)")
    train.add_argument("--weight-decay", type=nonnegative_float, default=0.01)
    train.add_argument("--patience", type=positive_int, help="early stopping: evaluations without a better dev score")
    train.add_argument("--group-by-length", action="store_true",
                       help="batches of similar lengths (less padding, faster on mixed lengths; on short texts it "
                            "cost ~1.4 points of accuracy, see docs/results/fine-tuning.md). Default: plain shuffled batches")
    train.add_argument("--init", choices=["pretrained", "random"], default="pretrained",
                       help="random: the same architecture from random weights (a baseline)")
    train.add_argument("--grid", action="store_true",
                       help="sweep batch {16,32} x lr {5e-5,3e-5,2e-5} x epochs {2,3,4} (the notes' grid) and keep "
                            "the best dev score; each run in OUT/grid/, the winner copied to OUT/model")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--overwrite", action="store_true", help="replace the earlier run in OUT")
    p.set_defaults(run=run)


def add_answer_arguments(group):
    """squad's answer settings, google-research/bert's run_squad.py flags (HF run_qa.py's names in the
    help); saved in the model folder's task.json, so `predict` and `serve` answer as training did."""
    group.add_argument("--max-answer-length", type=positive_int, metavar="N",
                       help="squad: longest answer, in word pieces (default 30, google's; HF run_qa's "
                            "--max_answer_length, also 30). Raise it for long answers: at 30 they come back cut")
    group.add_argument("--n-best-size", type=positive_int, metavar="N",
                       help="squad: starts and ends considered for each window (default 20; HF run_qa's --n_best_size)")
    group.add_argument("--max-query-length", type=positive_int, metavar="N",
                       help="squad: word pieces of the question kept (default 64, google's; HF run_qa keeps the "
                            "whole question and cuts only the context)")


ANSWER_FLAGS = ("max_answer_length", "n_best_size", "max_query_length")


def answer_options(args, task: str) -> dict:
    """The squad answer flags given, refused for another task (they would be silently ignored)."""
    given = {name: getattr(args, name) for name in ANSWER_FLAGS if getattr(args, name) is not None}
    if given and task != "squad":
        flag = "--" + next(iter(given)).replace("_", "-")
        raise ValueError(f"{flag} is for the squad task, not {task}")
    return given


def task_options(args) -> dict:
    if args.task in ("classify", "regression"):
        options = {"text_a": _column(args.text_a, args), "text_b": _column(args.text_b, args),
                   "label": _column(args.label, args), "header": not args.no_header, "metric": args.metric}
    elif args.task in ("multiple_choice", "swag"):
        options = {"context": args.context, "prefix": args.prefix or None, "endings": args.endings.split(",")}
    elif args.task == "squad":
        options = {"version_2_with_negative": args.version_2_with_negative}
    elif args.task == "relation":
        options = {"format": args.relation_format, "metric": args.metric}
    else:
        options = {}
    options.update(answer_options(args, args.task))
    if args.doc_stride:
        if args.task not in WINDOWED:
            raise ValueError(f"--doc-stride: {args.task} truncates its inputs; it reads no windows")
        options["doc_stride"] = args.doc_stride
    if args.task in ("ner", "squad", "multiple_choice", "swag", "relation"):
        if args.long_inputs:
            raise ValueError(f"--long-inputs is for classification and regression, not {args.task}")
    else:
        options["long_inputs"] = args.long_inputs
    return options


def _column(value, args):
    if value is None or not args.no_header:
        return value
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"with --no-header, columns are 0-based numbers, not {value!r}") from None


def run(args):
    from ..finetune.job import finetune_job
    from ..finetune.objective import FinetuneSettings
    from ..finetune.tasks import make_task
    length = {"max_seq_length": args.max_seq_length} if args.max_seq_length else {}  # else the task's default
    task = make_task(args.task, **length, **task_options(args))
    summary = finetune_job(**flags_for(finetune_job, args, task=task, base_model=args.model,
                                       s=FinetuneSettings(**flags_for(FinetuneSettings, args)),
                                       added_tokens=args.add_tokens.split(",") if args.add_tokens else ()))
    keys = ("task", "metric", "best_score", "dev", "test") if "best_score" in summary else ("task", "kept_model", "test")
    print(json.dumps({k: summary[k] for k in keys if k in summary}), file=sys.stderr)
