"""bertlab gpt-train: train a GPT language model on text files."""
import sys

from ..models.gpt_config import PRESETS
from .args import flags_for

EXAMPLE = """example:
  bertlab gpt-train notes/*.txt --out runs/tiny --preset tiny --vocab-size 8000 --max-minutes 10
  torchrun --nproc_per_node 2 -m bertlab gpt-train corpus.txt --out runs/ddp --max-steps 2000
  bertlab gpt-train corpus.txt --out runs/tiny --resume      # continue exactly where it stopped

OUT gets: tokenizer files, data/ (train.bin, val.bin, meta.json with the unigram baseline),
inputs.json (the files and tokenizer settings the data was made from), checkpoint.pt (for --resume),
model/ (HF GPT-2 format: config.json, model.safetensors, vocab.json, merges.txt), metrics.jsonl,
curves.png, summary.json and samples.txt. A new run (or --overwrite) makes the tokenizer and token
files from the FILEs given; --resume reuses them and refuses FILEs or tokenizer settings other than
those it was started with. Progress and evaluations go to stderr (a line every 30 s in a log)."""


def add_parser(subparsers):
    from .args import (
        add_run_arguments,
        fraction_below_one,
        nonnegative_float,
        nonnegative_int,
        positive_fraction,
        positive_int,
    )
    p = subparsers.add_parser(
        "gpt-train", help="train a GPT (decoder-only language model) on text files",
        description="Train a GPT to predict the next token of UTF-8 text files. The text is tokenized "
                    "once into a memory-mapped token file; training draws random contiguous blocks.",
        epilog=EXAMPLE, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    add_run_arguments(p.add_argument_group("run and optimisation"), defaults=dict(
        batch_size=16, grad_accum=1, lr=1e-3, max_steps=2000, max_minutes=None, eval_every=200, save_every=None,
        seed=0, device="auto", precision="auto", sharding="ddp", checkpoint_format="file", compile=False,
        resume=False),
        help={"batch_size": "sequences per micro-batch per process",
              "max_steps": "optimizer steps; the cosine decays over these",
              "save_every": "steps between checkpoints (default: --eval-every)",
              "resume": "continue from OUT/checkpoint.pt (with the FILEs and tokenizer settings it started with)"})
    g = p.add_argument_group("tokenizer")
    g.add_argument("--tokenizer", default="bpe", metavar="bpe|char|DIR",
                   help="learn byte-level BPE from the files (default), use characters, or load "
                        "vocab.json + merges.txt from DIR (e.g. GPT-2's own)")
    g.add_argument("--vocab-size", type=positive_int, default=8000,
                   help="BPE vocabulary to learn, at least 257 (default 8000)")
    g.add_argument("--val-fraction", type=positive_fraction, default=0.05,
                   help="share of lines held out, 0 < F < 1 (default 0.05)")
    g = p.add_argument_group("model")
    g.add_argument("--preset", default="tiny", choices=sorted(PRESETS),
                   help="size: tiny (4 layers, 256 wide; default), gpt2 (124M), gpt2-medium, -large, -xl")
    for name in ("--n-layer", "--n-embd", "--n-head"):
        g.add_argument(name, type=positive_int)
    g.add_argument("--dropout", type=fraction_below_one, default=0.0, help="residual/embedding/attention dropout (default 0)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--block-size", type=positive_int, default=256,
                   help="tokens per sequence, the model's positions (256)")
    g.add_argument("--warmup", type=nonnegative_int, default=100, help="linear warmup steps (100)")
    g.add_argument("--weight-decay", type=nonnegative_float, default=0.1)
    g.add_argument("--eval-tokens", type=positive_int, default=100_000, help="held-out tokens evaluated (100000)")
    g.add_argument("--overwrite", action="store_true",
                   help="start afresh in an OUT that holds a checkpoint (its checkpoint, data and log are replaced)")
    g.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.set_defaults(run=run)


def run(args):
    from ..lm.job import gpt_train_job
    from ..lm.objective import GPTSettings, report
    from ..training.distributed import is_main_process
    sizes = {k: v for k, v in (("n_layer", args.n_layer), ("n_embd", args.n_embd), ("n_head", args.n_head)) if v}
    dropout = {"resid_pdrop": args.dropout, "embd_pdrop": args.dropout, "attn_pdrop": args.dropout}
    summary = gpt_train_job(**flags_for(gpt_train_job, args, GPTSettings, model={**sizes, **dropout}))
    if is_main_process():
        print(report(summary, args.out), file=sys.stderr)
