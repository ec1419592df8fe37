"""bertlab extract-features: google-research/bert's extract_features.py — every token's (or word's)
vectors from chosen layers, as .jsonl or .npz."""
import argparse
import sys
import textwrap

from ..io import check_output_file, read_lines
from .args import positive_int
from .model_args import add_checkpoint_arguments, add_output_arguments, check_max_seq_length, \
    truncation_note

FORMATS = (".jsonl", ".npz")
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
    add_checkpoint_arguments(p)
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


def last_layers(num_layers: int) -> list[int]:
    """The default layers: -1, -2, -3, -4, or every layer of a model with fewer than four."""
    return list(range(-1, -min(4, num_layers) - 1, -1))


def check_format(output: str):
    if not output.endswith(FORMATS):
        hint = " (a .npy file holds one array; ragged lines need .npz)" if output.endswith(".npy") else ""
        raise ValueError(f"--output {output}: must end in .jsonl or .npz{hint}")


def run(args):
    from ..device import pick_device
    from ..inference.features import convert_example, extract, hidden_state_indices, read_examples, units, \
        write_jsonl, write_npz
    from ..interop import load_pretrained
    from ..io import atomic_write
    check_format(args.output)
    layers = parse_layers(args.layers)
    examples = read_examples(read_lines(args.file))
    check_output_file(args.output, args.overwrite)
    model, tokenizer, _ = load_pretrained(args.model)
    config = model.config
    layers = layers or last_layers(config.num_hidden_layers)
    hidden_state_indices(layers, config.num_hidden_layers)  # fail before any work
    max_seq_length = check_max_seq_length(args.max_seq_length or min(128, config.max_position_embeddings), config,
                                          pairs=any(e.text_b is not None for e in examples))
    model = model.to(pick_device(args.device))
    features = [convert_example(e, tokenizer, max_seq_length) for e in examples]
    values = extract(model, features, layers, args.batch_size, progress=not args.quiet, pad_id=tokenizer.pad_token_id)
    all_units = [units(f, v, args.words) for f, v in zip(features, values)]
    if args.output.endswith(".jsonl"):
        atomic_write(args.output, lambda f: write_jsonl(f, all_units, layers, args.words))
    else:
        atomic_write(args.output, lambda f: write_npz(f, all_units, layers), mode="wb")
    n = sum(len(labels) for labels, _ in all_units)
    print(f"wrote {n} {'word' if args.words else 'token'} vectors x {len(layers)} layers for "
          f"{len(features)} lines to {args.output}", file=sys.stderr)
    note = truncation_note([f.unique_id + 1 for f in features if f.truncated], len(features), max_seq_length)
    if note:
        print(f"bertlab extract-features: {note}", file=sys.stderr)
