"""bertlab vocab: learn a WordPiece vocabulary (vocab.txt + tokenizer_config.json) from text."""
from .args import add_out_argument, flags_for, nonnegative_int, positive_int


def add_parser(subparsers):
    p = subparsers.add_parser(
        "vocab", help="learn a WordPiece vocabulary from text files",
        description="Learn a WordPiece vocabulary (BPE merges over word counts, as the tokenizers library's "
                    "WordPieceTrainer, with ties settled so that the same text always gives the same "
                    "vocabulary) from the words bertlab's own BasicTokenizer makes of the text "
                    "(lower-cased and accent-stripped unless --cased, punctuation split off, each CJK "
                    "character a word), so it fits what the exact tokenizer produces. Writes "
                    "OUT_DIR/vocab.txt ([PAD] [UNK] [CLS] [SEP] [MASK] first, then the characters, then "
                    "the merges in order) and tokenizer_config.json, then checks that the text "
                    "round-trips through it.")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    add_out_argument(p, metavar="OUT_DIR")
    p.add_argument("--vocab-size", type=positive_int, default=30522, help="at most this many tokens (default 30522)")
    p.add_argument("--min-frequency", type=nonnegative_int, default=2,
                   help="a merge must occur at least this often (default 2)")
    casing = p.add_mutually_exclusive_group()
    casing.add_argument("--uncased", dest="do_lower_case", action="store_true", default=True,
                        help="lower-case and strip accents (the default)")
    casing.add_argument("--cased", dest="do_lower_case", action="store_false", help="keep case and accents")
    p.add_argument("--overwrite", action="store_true", help="replace a vocab.txt already in OUT_DIR")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(run=run)


def run(args):
    from ..pretraining.vocab import vocab_job
    report = vocab_job(**flags_for(vocab_job, args))
    ran_out = report["vocab_size"] < args.vocab_size
    short = f" (asked for {args.vocab_size}: the text ran out of merges)" if ran_out else ""
    print(f"wrote {report['path']}: {report['vocab_size']} tokens{short}, "
          f"{'uncased' if args.do_lower_case else 'cased'}")
    print(f"  {report['words']} words ({report['distinct_words']} distinct); "
          f"{report['split_fraction']:.1%} of them split into several pieces; "
          f"[UNK] for {report['unknown_words']} (words over 100 characters)")
