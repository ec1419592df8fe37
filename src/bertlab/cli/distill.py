"""bertlab distill: a smaller, faster BERT trained from a teacher's outputs (DistilBERT)."""
import argparse
import json
import sys

from .args import (
    add_run_arguments,
    flags_for,
    fraction,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)

EXAMPLE = """examples:
  # task distillation: a fine-tuned teacher (bertlab finetune ... -o runs/teacher) into 3 layers
  bertlab distill --teacher runs/teacher/model --student-layers 3 --train train.tsv --dev dev.tsv \\
      --test test.tsv -o runs/student
  bertlab predict --model runs/student/model test.tsv

  # general distillation: masked LM on shards (or a text file) from a BERT folder
  bertlab distill --teacher minilm --student-layers 3 --data corpus/train.txt --eval-data corpus/heldout.txt \\
      --max-steps 300 -o runs/minilm-l3
  bertlab embed --model runs/minilm-l3/model sentences.txt -o vectors.npy

The student starts from the teacher: its embeddings, pooler and heads, and teacher layers
0, 2, 4, ... (i * L // N for N layers of L). The loss is alpha_soft * T^2 * CE(teacher/T, student/T)
+ alpha_hard * (the task's or MLM's loss) + alpha_cos * (1 - cos) of the last hidden states. A teacher
without a masked-LM head (all-MiniLM-L6-v2) gives no soft targets: general distillation then
defaults to the cosine term alone, on the original tokens. See docs/models/distillation.md."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "distill", help="distil a BERT into a smaller student (DistilBERT): a fine-tuned task or masked LM",
        description="Knowledge distillation as DistilBERT does it. With --train (task distillation) the teacher "
                    "is a folder `bertlab finetune` wrote, its logits on each training batch are the soft "
                    "targets, and OUT/model is a task folder `bertlab predict` reads. With --data (general "
                    "distillation) the teacher is a BERT folder and the student learns masked LM from it on "
                    "create-pretraining-data shards or a text file; OUT/model is a BERT folder.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", required=True, metavar="DIR", help="the teacher: a fine-tuned task folder "
                                                                  "(--train) or a BERT folder or 'minilm' (--data)")
    student = p.add_mutually_exclusive_group(required=True)
    student.add_argument("--student-layers", type=positive_int, metavar="N",
                         help="a student of N layers (fewer than the teacher's) made from the teacher's every other layer")
    student.add_argument("--student", metavar="DIR", help="or a BERT folder to start the student from "
                                                          "(the teacher's vocabulary)")
    add_run_arguments(p.add_argument_group("run"), defaults=dict(
        batch_size=32, grad_accum=1, lr=None, grad_clip=1.0, max_steps=None, max_minutes=None, eval_every=None,
        save_every=None, seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False, resume=False),
        help={"lr": "peak learning rate (default 5e-5 with --train, 1e-4 with --data)",
              "max_steps": "optimizer steps (default: --epochs with --train, 1000 with --data)",
              "eval_every": "steps between evaluations (default: every epoch with --train, 500 with --data)"})
    g = p.add_argument_group("distillation (DistilBERT's defaults)")
    g.add_argument("--alpha-soft", type=nonnegative_float, metavar="W",
                   help="weight of the soft-target cross-entropy, times T^2 (default 5; 0 without a masked-LM head)")
    g.add_argument("--alpha-hard", type=nonnegative_float, metavar="W",
                   help="weight of the hard-label loss: the task's labels or masked LM (default 2; 0 without a "
                        "masked-LM head)")
    g.add_argument("--alpha-cos", type=nonnegative_float, metavar="W",
                   help="weight of 1 - cos between the last hidden states (default 1)")
    g.add_argument("--temperature", type=positive_float, metavar="T", default=2.0, help="(default 2)")
    g = p.add_argument_group("task distillation (the task and its layout come from the teacher's task.json)")
    g.add_argument("--train", help="training file, in the layout the teacher was fine-tuned on")
    g.add_argument("--dev", help="dev file: evaluated every epoch, the best student kept")
    g.add_argument("--test", help="test file: predicted (and scored, if labelled) with the kept student")
    g.add_argument("--epochs", type=positive_float, default=3.0, help="(default 3)")
    g.add_argument("--warmup-proportion", type=fraction, default=0.1, help="(default 0.1)")
    g.add_argument("--patience", type=positive_int, help="early stopping: evaluations without a better dev score")
    g = p.add_argument_group("general distillation")
    g.add_argument("--data", metavar="SHARDS_OR_TEXT", help="create-pretraining-data shards made with the teacher's "
                                                           "vocab.txt, or a text file (shards made in OUT/data)")
    g.add_argument("--eval-data", metavar="SHARDS_OR_TEXT", help="held-out shards or text: cosine to the teacher")
    g.add_argument("--eval-instances", type=positive_int, metavar="N", help="held-out instances evaluated (default 1024)")
    g.add_argument("--max-seq-length", type=positive_int, default=128, help="pieces per instance made from a text "
                                                                            "file (default 128)")
    g.add_argument("--warmup", type=nonnegative_int, metavar="N", help="warmup steps (default 100)")
    p.add_argument("--weight-decay", type=nonnegative_float, default=0.01)
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run in OUT")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def check_mode_flags(args):
    """Flags of one distillation mode refused in the other: task (--train) or general (--data)."""
    if args.train and (args.save_every or args.warmup or args.eval_instances):
        raise ValueError("--save-every, --warmup and --eval-instances are for general distillation (--data); "
                         "task distillation saves at each evaluation and warms up --warmup-proportion")
    if not args.train and (args.patience or args.dev or args.test):
        raise ValueError("--dev, --test and --patience are for task distillation (--train)")


def run(args):
    from ..distillation.job import distill_job
    from ..distillation.objective import GeneralDistillSettings, TaskDistillSettings
    check_mode_flags(args)
    summary = distill_job(**flags_for(distill_job, args, TaskDistillSettings if args.train else GeneralDistillSettings))
    keys = ("task", "best_score", "dev", "test", "held_out", "teacher_layers", "student_layers", "student_parameters",
            "teacher_parameters")
    print(json.dumps({k: summary[k] for k in keys if k in summary}, default=str), file=sys.stderr)
