"""bertlab translate: translate text, one line in, one line out, with a translate-train model."""
import argparse
import math
import sys

from .args import flags_for
from .model_args import add_device_argument

EXAMPLE = """examples:
  echo "Open the file" | bertlab translate --model runs/en-de/model
  bertlab translate --model runs/en-de/model test.en --beam 4 --ref test.de > test.hyp
  bertlab translate --model runs/en-de/model test.en --nbest 4      # LINE<TAB>SCORE<TAB>TRANSLATION

With --nbest K, each input line gets K output lines: its line number (from 1), the hypothesis score
(log-probability / length^length-penalty) and the translation, tab-separated, best first.

A blank input line gives a blank translation (score nan). A line longer than the model's positions
(max_position_embeddings - 1 subword tokens) is cut to fit and translated; how many lines were cut,
and which, is said on stderr."""


def add_parser(subparsers):
    from .args import beam_size, nonnegative_float, nonnegative_int, positive_int
    p = subparsers.add_parser(
        "translate", help="translate text with a model from translate-train",
        description="Translate each line of FILE (or standard input) with beam search (greedy with --beam 1), "
                    "writing one translation per line.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="UTF-8 text, one sentence per line (default stdin)")
    p.add_argument("--model", required=True, metavar="DIR", help="the OUT/model folder of translate-train")
    p.add_argument("--beam", type=beam_size, default=4,
                   help="beam size, 1 to 1024; 1 is greedy decoding (4, as the paper)")
    p.add_argument("--length-penalty", type=nonnegative_float, default=1.0,
                   help="rank hypotheses by log-prob / length^this (1.0: per-token mean; 0: plain sum)")
    p.add_argument("--max-len", type=positive_int, help="at most this many target tokens per sentence")
    p.add_argument("--max-len-a", type=nonnegative_float, default=2.0,
                   help="... and at most a * source tokens + b (a = 2)")
    p.add_argument("--max-len-b", type=nonnegative_int, default=10, help="(b = 10)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sentences decoded together (32)")
    p.add_argument("--nbest", type=positive_int, default=1,
                   help="print the K best hypotheses with scores (needs --beam >= K)")
    p.add_argument("--ref", metavar="FILE", help="reference translations: print sacreBLEU BLEU and chrF to stderr")
    add_device_argument(p)
    p.add_argument("--int8", action="store_true",
                   help="CPU only: dynamic int8 linear layers, faster at a small BLEU cost (score it with --ref; "
                        "docs/guide/export.md)")
    p.set_defaults(run=run)


def run(args):
    from ..inference.translate import translate_file
    if args.nbest > args.beam:
        raise ValueError(f"--nbest {args.nbest} needs --beam {args.nbest} or more (got --beam {args.beam})")
    done = translate_file(**flags_for(translate_file, args, model_dir=args.model))
    if done.cut:
        shown = ", ".join(map(str, done.cut[:10])) + (" ..." if len(done.cut) > 10 else "")
        print(f"bertlab translate: {'stdin' if args.file == '-' else args.file}: {len(done.cut)} line(s) longer "
              f"than the model's {done.longest} source tokens were cut to fit: line {shown}", file=sys.stderr)
    for number, (hyps, texts) in enumerate(zip(done.hypotheses, done.texts), 1):
        if args.nbest > 1:
            sys.stdout.write("".join(f"{number}\t{_score(h.score)}\t{t}\n" for h, t in zip(hyps, texts)))
        else:
            sys.stdout.write(texts[0] + "\n")
    sys.stdout.flush()
    if done.bleu is not None:
        print(f"{done.bleu}\n{done.chrf}", file=sys.stderr)
    return 0


def _score(score: float) -> str:
    return "nan" if math.isnan(score) else f"{score:.4f}"
