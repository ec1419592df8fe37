"""bertlab extract-features: google-research/bert's extract_features.py — every token's (or word's)
vectors from chosen layers, as .jsonl or .npz."""
import argparse
import sys
import textwrap

from .args import flags_for, positive_int
from .model_args import add_model_arguments, add_output_arguments, truncation_note

LAYOUT = """\
output layouts:
  OUT.jsonl  google's extract_features.py output, one object per input line:
             {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
             "values": [...]}, ...]}, ...]}, values rounded to 6 decimals; with --words each
             entry has "word" (the word's original text) instead of "token".
  OUT.npz    numpy arrays for ragged lines:
               values   float32 (all tokens, len(layers), hidden): the vectors of every line, one
                        after another
               offsets  int64 (lines + 1): line i is values[offsets[i]:offsets[i+1]]
               tokens   str (all tokens): the token (or, with --words, word) of each row
               layers   int64: the layer numbers, in the order of values' second axis
             load with: d = np.load("OUT.npz"); d["values"][d["offsets"][i]:d["offsets"][i+1]]

Tokens include [CLS] and [SEP]; with --words they are words of their own.
Layers are google's numbers: 0 is the first Transformer layer, -1 the last, -2 the one below."""


def add_parser(subparsers):
    p = subparsers.add_parser(
        "extract-features", help="every token's (or word's) vectors from chosen BERT layers (.jsonl or .npz)",
        description=textwrap.fill(
            "Run each line of FILE through BERT and write the hidden states of the chosen layers for every "
            "token, as google-research/bert's extract_features.py does. A line 'A ||| B' is a sentence pair "
            "([CLS] A [SEP] B [SEP], segment ids 0 then 1); a blank line gives [CLS] [SEP] alone, as in google's "
            "script, so lines and outputs stay aligned.", 79),
        epilog=LAYOUT, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="UTF-8 text file, one text per line ('-' for stdin)")
    add_output_arguments(p, required=True, metavar="OUT",
                         help="OUT.jsonl (google's layout) or OUT.npz (arrays); see below")
    add_model_arguments(p)
    p.add_argument("--layers", nargs="+", metavar="N",
                   help="layer numbers, negative counting from the top, written as -1 -2 or as =-1,-2 "
                        "(default -1,-2,-3,-4: the last four, or every layer of a model with fewer)")
    p.add_argument("--max-seq-length", type=positive_int, metavar="N",
                   help="tokens per line including [CLS]/[SEP]; longer lines are truncated (a pair longest "
                        "first) and counted in a note at the end (default 128, or the model's "
                        "max_position_embeddings when smaller)")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N",
                   help="lines per batch, sorted by length so padding stays small (default 32)")
    p.add_argument("--words", action="store_true",
                   help="one vector per word instead of per WordPiece token: the mean of the word's pieces, "
                        "words as BERT's basic tokenizer splits them (punctuation is a word of its own)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or progress lines on stderr")
    p.set_defaults(run=run)


def parse_layers(chunks) -> list[int] | None:
    """["-1,-2", "-3"] -> [-1, -2, -3]: both spellings of --layers (None stays None)."""
    if chunks is None:
        return None
    text = ",".join(chunks)
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--layers {text}: expected integers such as -1,-2,-3,-4") from None


def run(args):
    from ..inference.features import check_format, extract_features_file
    check_format(args.out)
    r = extract_features_file(**flags_for(extract_features_file, args, model_dir=args.model, output=args.out,
                                          layers=parse_layers(args.layers)))
    print(f"wrote {r.vectors} {'word' if r.words else 'token'} vectors x {len(r.layers)} layers for "
          f"{r.lines} lines to {r.output}", file=sys.stderr)
    note = truncation_note(r.truncated, r.lines, r.max_seq_length)
    if note:
        print(f"bertlab extract-features: {note}", file=sys.stderr)
