"""bertlab create-pretraining-data: text files -> masked, paired instances in the shard format
(pretraining/create.py does the work)."""
import argparse
import os

from ..pretraining.recipes import RECIPES
from .args import add_out_argument, flags_for, fraction, nonnegative_int, positive_fraction, positive_int

EXAMPLE = """examples:
  bertlab create-pretraining-data corpus.txt --vocab vocab -o shards128                  # BERT: NSP pairs
  bertlab create-pretraining-data corpus.txt --vocab vocab -o roberta --recipe roberta   # full sentences, dynamic masks
  bertlab create-pretraining-data corpus.txt --vocab vocab -o albert --recipe albert     # = --sop: sentence order
  bertlab create-pretraining-data corpus.txt --vocab vocab -o mb128 --recipe modernbert  # full sentences, 30% masked"""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "create-pretraining-data", help="make BERT pretraining instances (masked LM + next sentence)",
        description="google-research/bert's create_pretraining_data.py: FILEs hold one sentence per line "
                    "and a blank line between documents. Worker processes make the instances of chunks of "
                    "--chunk-docs documents, each chunk seeded from --random-seed and its index, so the "
                    "output is the same for any number of workers. A random next sentence comes from the "
                    "same chunk (google draws from the whole corpus, held in memory): a corpus that fits "
                    "one chunk gets google's instances exactly. Output: OUT_DIR with memory-mapped shards, "
                    "vocab.txt, tokenizer_config.json and meta.json (written last; settings and counts inside).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    p.add_argument("--vocab", required=True, help="vocab.txt, or a folder holding it (bertlab vocab's output); "
                   "a tokenizer_config.json beside it gives the casing")
    casing = p.add_mutually_exclusive_group()
    casing.add_argument("--uncased", dest="do_lower_case", action="store_true", default=None,
                        help="lower-case and strip accents (default unless tokenizer_config.json says cased)")
    casing.add_argument("--cased", dest="do_lower_case", action="store_false", help="keep case and accents")
    add_out_argument(p, metavar="OUT_DIR")
    modes = p.add_mutually_exclusive_group()
    modes.add_argument("--mode", choices=("nsp", "sop", "full-sentences"), default=None,
                       help="nsp: sentence pairs with next-sentence labels (BERT); sop: consecutive segments, "
                            "half of them swapped (ALBERT's sentence order); full-sentences: RoBERTa's packing "
                            "of whole sentences across documents, masked LM only (default nsp)")
    modes.add_argument("--sop", dest="mode", action="store_const", const="sop",
                       help="the same as --mode sop: sentence-order prediction pairs (ALBERT)")
    p.add_argument("--recipe", choices=RECIPES,
                   help="set the flags of a model's recipe: bert = --mode nsp; roberta = --mode full-sentences "
                        "--dynamic-masking; albert = --mode sop (docs/models/albert.md); modernbert = --mode "
                        "full-sentences --dynamic-masking --masked-lm-prob 0.3 (docs/models/modernbert.md); flags "
                        "given beside it must agree")
    p.add_argument("--max-seq-length", type=positive_int, default=128,
                   help="pieces per instance, [CLS] and [SEP] included (default 128; at least 5, 3 for full-sentences)")
    p.add_argument("--max-predictions-per-seq", type=positive_int, default=None,
                   help="1 to 255 (default 20; with --recipe modernbert 30%% of --max-seq-length)")
    p.add_argument("--masked-lm-prob", type=positive_fraction, default=None,
                   help="more than 0, at most 1 (default 0.15; 0.3 with --recipe modernbert)")
    p.add_argument("--short-seq-prob", type=fraction, default=0.1, help="nsp and sop modes only (default 0.1)")
    p.add_argument("--dupe-factor", type=positive_int, default=None,
                   help="times each document is used, with different masks (default 10; 1 with --dynamic-masking)")
    p.add_argument("--random-seed", type=nonnegative_int, default=12345)
    p.add_argument("--do-whole-word-mask", action="store_true",
                   help="mask all pieces of a word together (a word = a piece and the ## pieces after it)")
    chinese = p.add_mutually_exclusive_group()
    chinese.add_argument("--chinese-ref", action="append", metavar="REF",
                         help="whole-word masking for Chinese: once per FILE, in order; one JSON list per "
                              "non-blank line of FILE, the positions in [CLS] + its pieces of the pieces that "
                              "continue a word (what HF's run_chinese_ref.py writes)")
    chinese.add_argument("--jieba", action="store_true",
                         help="whole-word masking for Chinese by jieba's word segmentation")
    p.add_argument("--masking", choices=("token", "span", "ernie"), default="token",
                   help="token: pieces, or words with --do-whole-word-mask (BERT; the default); span: SpanBERT's "
                        "spans of whole words, lengths geometric (p 0.2, at most 10 words), 80/10/10 per span, "
                        "boundaries stored for `pretrain --span-boundary`; ernie: ERNIE's phrase/entity masking, "
                        "each span one jieba word (Chinese phrases and names; an English word with its ## pieces)")
    p.add_argument("--dynamic-masking", action="store_true",
                   help="store unmasked instances; training draws a fresh mask every time (RoBERTa)")
    p.add_argument("--workers", type=positive_int, default=len(os.sched_getaffinity(0))
                   if hasattr(os, "sched_getaffinity") else os.cpu_count(), help="worker processes (default: the CPUs available)")
    p.add_argument("--chunk-docs", type=positive_int, default=2000,
                   help="documents per chunk: random next sentences come from the same chunk; memory per "
                        "worker grows with it (default 2000)")
    p.add_argument("--shard-size", type=positive_int, default=50_000, help="instances per shard (default 50000)")
    p.add_argument("--encoding-errors", choices=("strict", "replace"), default="strict",
                   help="non-UTF-8 bytes: an error naming file, line and offset (strict), or U+FFFD, counted")
    p.add_argument("--overwrite", action="store_true", help="replace pretraining data already in OUT_DIR")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run into OUT_DIR: its finished shards are kept and their chunks "
                        "not made again (the same files, vocabulary and flags)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(run=run)


def run(args):
    from ..pretraining.create import create_pretraining_data_job
    created = create_pretraining_data_job(**flags_for(create_pretraining_data_job, args, seed=args.random_seed))
    print(created.report())
