"""bertlab tokenize: WordPiece tokens (or ids) of each input line."""
import itertools
import sys

from ..tokenization.files import CHUNK
from .args import flags_for


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
    from ..tokenization.files import tokenize_file
    lines = tokenize_file(**flags_for(tokenize_file, args))
    out = sys.stdout
    while chunk := list(itertools.islice(lines, CHUNK)):  # one write per chunk of lines, as they are made
        out.write("".join(line + "\n" for line in chunk))
    out.flush()
