"""bertlab unilm-generate: one generated line per input line, with a unilm-train model."""
import argparse
import sys

from .args import flags_for
from .model_args import add_device_argument

EXAMPLE = """examples:
  bertlab unilm-generate --model runs/unilm/model corpus/synopses/test.desc --ref corpus/synopses/test.syn
  echo "GNU Wget is a free utility for downloading files from the Web." | bertlab unilm-generate --model runs/unilm/model --beam 4

Decoding runs left to right with the same greedy search and beam search as `bertlab translate`: each
step appends a [MASK] after the target so far and reads the next token from its output (UniLM). A
blank input line gives a blank output line; a line longer than the model's source budget
(max_source_tokens - 2 WordPiece tokens) is cut to fit, and which lines were cut is said on stderr.
With --ref, ROUGE-1/2/L F1 (Google's rouge-score, Porter stemming) go to stderr."""


def add_parser(subparsers):
    from .args import beam_size, nonnegative_float, positive_int
    p = subparsers.add_parser(
        "unilm-generate", help="generate text with a model from unilm-train (e.g. a synopsis per description)",
        description="Generate one line of text for each line of FILE (or standard input) with a UniLM "
                    "model: beam search, greedy with --beam 1.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="UTF-8 text, one source per line (default stdin)")
    p.add_argument("--model", required=True, metavar="DIR", help="the OUT/model folder of unilm-train")
    p.add_argument("--beam", type=beam_size, default=1, help="beam size, 1 to 1024; 1 is greedy decoding (default)")
    p.add_argument("--length-penalty", type=nonnegative_float, default=1.0,
                   help="rank beam hypotheses by log-prob / length^this (1.0)")
    p.add_argument("--max-len", type=positive_int, help="at most this many tokens per line (default: the model's "
                                                        "max_target_tokens - 1)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="lines decoded together (32)")
    p.add_argument("--ref", metavar="FILE", help="reference lines: print ROUGE to stderr")
    add_device_argument(p)
    p.set_defaults(run=run)


def run(args):
    from ..inference.unilm import generate_file
    from .model_args import numbered
    done = generate_file(**flags_for(generate_file, args, model_dir=args.model))
    if done.cut:
        print(f"bertlab unilm-generate: {'stdin' if args.file == '-' else args.file}: {len(done.cut)} line(s) longer "
              f"than the model's {done.longest} source tokens were cut to fit: {numbered(done.cut)}", file=sys.stderr)
    sys.stdout.write("".join(t + "\n" for t in done.texts))
    sys.stdout.flush()
    if done.rouge is not None:
        print("ROUGE F1: " + ", ".join(f"{k} {v:.2f}" for k, v in done.rouge.items()) + f" ({len(done.texts)} lines)",
              file=sys.stderr)
    return 0
