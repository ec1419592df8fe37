"""bertlab tokenize: WordPiece tokens (or ids) of each input line."""
import os
import sys

from ..io import read_lines
from ..tokenization import CLS, SEP, UNK, BertTokenizer

CHUNK = 10_000  # lines per batch: big enough to amortise, small enough to stream


def add_parser(subparsers):
    p = subparsers.add_parser(
        "tokenize", help="WordPiece-tokenize text, one output line per input line",
        description="Tokenize each line of FILE (standard input if omitted) exactly as "
                    "google-research/bert's tokenization.py does, and print the tokens of each line "
                    "separated by single spaces. Lines are split on \\n only; an empty line gives an "
                    "empty line (an empty file is an error). No [CLS]/[SEP] are added. A word over "
                    "100 characters is one [UNK], as in HF's tokenizers (google's limit is 200).")
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="UTF-8 text file (default: stdin)")
    p.add_argument("--vocab", required=True, help="vocab.txt (one token per line), or a model folder holding one")
    p.add_argument("--cased", action="store_true", help="keep case and accents (for cased checkpoints)")
    p.add_argument("--ids", action="store_true", help="print token ids instead of tokens")
    p.set_defaults(run=run)


def run(args):
    vocab_file = os.path.join(args.vocab, "vocab.txt") if os.path.isdir(args.vocab) else args.vocab
    tokenizer = BertTokenizer(vocab_file, do_lower_case=not args.cased)
    for token in (UNK, CLS, SEP):  # a file that is not a BERT vocabulary fails now, not mid-output
        tokenizer.vocab.special_id(token, "every BERT vocabulary")
    lines = read_lines(args.file)
    vocab = tokenizer.vocab.id_to_token
    out = sys.stdout
    for start in range(0, len(lines), CHUNK):
        batch = tokenizer.tokenize_ids_batch(lines[start : start + CHUNK], add_special_tokens=False)
        if args.ids:
            out.write("".join(" ".join(map(str, ids)) + "\n" for ids in batch))
        else:
            out.write("".join(" ".join([vocab[i] for i in ids]) + "\n" for ids in batch))
    out.flush()
