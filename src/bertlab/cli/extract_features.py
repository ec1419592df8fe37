"""bertlab extract-features: google-research/bert's extract_features.py — every token's (or word's)
vectors from chosen layers, as .jsonl or .npz."""
import argparse
import sys
import textwrap

from ..device import pick_device
from ..inference.features import (convert_example, extract, hidden_state_indices, read_examples, units,
                                  write_jsonl, write_npz)
from ..interop import load_pretrained
from ..io import atomic_write, read_lines

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


def add_checkpoint_arguments(p):
    """--model and --device: the arguments every command that loads a BERT checkpoint shares."""
    p.add_argument("--model", required=True,
                   help="an HF-format BERT folder (config.json, model.safetensors or pytorch_model.bin, "
                        "vocab.txt), or 'minilm' for the packaged all-MiniLM-L6-v2")
    p.add_argument("--device", default="auto", help="cpu, cuda, mps or auto (default)")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "extract-features", help="every token's (or word's) vectors from chosen BERT layers (.jsonl or .npz)",
        description=textwrap.fill(
            "Run each line of FILE through BERT and write the hidden states of the chosen layers for every "
            "token, as google-research/bert's extract_features.py does. A line 'A ||| B' is a sentence pair "
            "([CLS] A [SEP] B [SEP], segment ids 0 then 1).", 79),
        epilog=LAYOUT, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="UTF-8 text file, one text per line ('-' for stdin)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="OUT.jsonl (google's layout) or OUT.npz (arrays); see below")
    add_checkpoint_arguments(p)
    p.add_argument("--layers", nargs="+", default=["-1,-2,-3,-4"], metavar="N",
                   help="layer numbers, negative counting from the top, written as -1 -2 or as =-1,-2 "
                        "(default -1,-2,-3,-4: the last four)")
    p.add_argument("--max-seq-length", type=int, default=128, metavar="N",
                   help="tokens per line including [CLS]/[SEP]; longer lines are truncated (a pair longest "
                        "first) and counted in a note at the end (default 128)")
    p.add_argument("--batch-size", type=int, default=32, metavar="N",
                   help="lines per batch, sorted by length so padding stays small (default 32)")
    p.add_argument("--words", action="store_true",
                   help="one vector per word instead of per WordPiece token: the mean of the word's pieces, "
                        "words as BERT's basic tokenizer splits them (punctuation is a word of its own)")
    p.set_defaults(run=run)


def parse_layers(chunks) -> list[int]:
    """["-1,-2", "-3"] -> [-1, -2, -3]: both spellings of --layers."""
    text = ",".join(chunks)
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--layers {text}: expected integers such as -1,-2,-3,-4") from None


def check_arguments(args):
    if not args.output.endswith(FORMATS):
        hint = " (a .npy file holds one array; ragged lines need .npz)" if args.output.endswith(".npy") else ""
        raise ValueError(f"--output {args.output}: must end in .jsonl or .npz{hint}")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: must be at least 1")


def check_max_seq_length(n: int, config, pairs: bool):
    least = 3 if pairs else 2
    if not least <= n <= config.max_position_embeddings:
        raise ValueError(f"--max-seq-length {n}: must be from {least} (room for [CLS]/[SEP]) to the "
                         f"model's max_position_embeddings {config.max_position_embeddings}")


def truncation_note(features, max_seq_length: int) -> str | None:
    """The stderr note naming the lines that were cut, or None when none was."""
    cut = [f.unique_id + 1 for f in features if f.truncated]
    if not cut:
        return None
    shown = ", ".join(map(str, cut[:10])) + (", ..." if len(cut) > 10 else "")
    return (f"note: {len(cut)} of {len(features)} lines were longer than --max-seq-length {max_seq_length} "
            f"tokens and were truncated ({'line' if len(cut) == 1 else 'lines'} {shown})")


def run(args):
    check_arguments(args)
    layers = parse_layers(args.layers)
    examples = read_examples(read_lines(args.file))
    model, tokenizer, _ = load_pretrained(args.model)
    check_max_seq_length(args.max_seq_length, model.config, any(e.text_b is not None for e in examples))
    hidden_state_indices(layers, model.config.num_hidden_layers)  # fail before any work
    model = model.to(pick_device(args.device))
    features = [convert_example(e, tokenizer, args.max_seq_length) for e in examples]
    values = extract(model, features, layers, args.batch_size, progress=sys.stderr.isatty() or None,
                     pad_id=tokenizer.pad_token_id)
    all_units = [units(f, v, args.words) for f, v in zip(features, values)]
    if args.output.endswith(".jsonl"):
        atomic_write(args.output, lambda f: write_jsonl(f, all_units, layers, args.words))
    else:
        atomic_write(args.output, lambda f: write_npz(f, all_units, layers), mode="wb")
    n = sum(len(labels) for labels, _ in all_units)
    print(f"wrote {n} {'word' if args.words else 'token'} vectors x {len(layers)} layers for "
          f"{len(features)} lines to {args.output}", file=sys.stderr)
    note = truncation_note(features, args.max_seq_length)
    if note:
        print(f"bertlab extract-features: {note}", file=sys.stderr)
