"""bertlab embed: one vector per input line, saved as .npy."""
import sys

from ..inference.pooling import POOLINGS
from ..io import check_output_file, read_lines
from .args import positive_int
from .model_args import add_checkpoint_arguments, add_output_arguments, check_max_seq_length, \
    numbered, truncation_note


def add_model_arguments(p):
    add_checkpoint_arguments(p)
    p.add_argument("--pooling", choices=POOLINGS, default="mean",
                   help="mean of the last layer over real tokens (default; what sentence-transformers "
                        "models are trained for), the [CLS] vector, or the pooler's tanh([CLS] W)")
    p.add_argument("--max-seq-length", type=positive_int, metavar="N",
                   help="tokens per text including [CLS]/[SEP]; longer texts keep their first tokens and "
                        "are counted in a note on stderr (default: the model's own limit, max_seq_length in "
                        "its sentence_bert_config.json, 256 for minilm, else max_position_embeddings)")
    p.add_argument("--batch-size", type=positive_int, default=64, metavar="N",
                   help="texts per batch; texts are sorted by length first so padding stays small (default 64)")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="fp32 (exact, default); bf16/fp16 autocast are faster on GPUs and on CPUs with "
                        "AVX-512 BF16/AMX, at about 1e-3 deviation")
    p.add_argument("--int8", action="store_true",
                   help="CPU only: dynamic int8 linear layers (inference.int8), faster at a small cost in "
                        "accuracy (embed prints the cosine to fp32 on the first 64 lines; see docs/export.md)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or progress lines on stderr")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "embed", help="embed each line of a file with a BERT model into an .npy matrix",
        description="Embed each line of FILE (one text per line, split on \\n) and write an "
                    "(n_lines, hidden_size) float32 matrix to OUT.npy, rows in input order. A blank line "
                    "(empty, spaces or control characters only) gets an all-zero row, so rows stay aligned "
                    "with lines; stderr says how many lines were blank and how many were truncated.")
    p.add_argument("file", metavar="FILE", help="UTF-8 text file, one text per line ('-' for stdin)")
    add_output_arguments(p, required=True, metavar="OUT.npy", help="where to write the matrix")
    add_model_arguments(p)
    p.add_argument("--normalize", action="store_true",
                   help="scale every vector to unit length (blank lines' rows stay all zero)")
    p.set_defaults(run=run)


def load_model(args):
    """(model on its device, tokenizer, autocast dtype, tokens per text) for embed and similar."""
    from ..device import autocast_dtype, pick_device
    from ..interop import load_pretrained, max_seq_length, resolve
    device = pick_device(args.device)
    dtype = autocast_dtype(args.precision, device)
    if args.int8:
        from ..inference.int8 import check_int8_settings, quantize_int8
        check_int8_settings(device, dtype)
    model, tokenizer, _ = load_pretrained(args.model)
    if args.int8:
        quantize_int8(model)
    if args.max_seq_length is None:
        length = max_seq_length(resolve(args.model), model.config)
    else:
        length = check_max_seq_length(args.max_seq_length, model.config)
    return model.to(device), tokenizer, dtype, length


def embed_lines(loaded, args, lines, what: str, noun: str, normalize: bool, progress: bool):
    """(vectors, indices of blank lines) of `lines` with the model `load_model` returned, printing
    the note on truncated lines; blank lines get all-zero rows."""
    from ..inference.embed import embed_ids, encode_texts
    model, tokenizer, dtype, max_length = loaded
    sequences, cut = encode_texts(tokenizer, lines, max_length)
    vectors = embed_ids(model, sequences, args.pooling, normalize, args.batch_size, dtype=dtype,
                        progress=progress, pad_id=tokenizer.pad_token_id)
    note = truncation_note([i + 1 for i in cut], len(lines), max_length, what, noun)
    if note:
        print(f"bertlab {args.command}: {note}", file=sys.stderr)
    return vectors, [i for i, s in enumerate(sequences) if not s]


def run(args):
    import numpy as np
    from ..io import atomic_write
    if not args.output.endswith(".npy"):
        raise ValueError(f"--output {args.output}: must end in .npy")
    lines = read_lines(args.file)
    check_output_file(args.output, args.overwrite)
    vectors, blank = embed_lines(load_model(args), args, lines, "lines", "line", args.normalize, progress=not args.quiet)
    atomic_write(args.output, lambda f: np.save(f, vectors), mode="wb")
    if args.int8:
        print(f"bertlab embed: {_int8_cost(args, lines, vectors, blank)}", file=sys.stderr)
    if blank:
        print(f"bertlab embed: note: {len(blank)} of {len(lines)} lines were blank and got all-zero rows "
              f"({numbered([i + 1 for i in blank])})", file=sys.stderr)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors to {args.output}", file=sys.stderr)


def _int8_cost(args, lines, vectors, blank, sample: int = 64) -> str:
    """What int8 cost on this input: the cosine of the first `sample` lines' vectors to fp32's."""
    import argparse

    import numpy as np
    rows = [i for i in range(len(lines)) if i not in set(blank)][:sample]
    if not rows:
        return "int8: no line to compare with fp32"
    fp32 = load_model(argparse.Namespace(**{**vars(args), "int8": False}))
    reference, _ = embed_lines(fp32, args, [lines[i] for i in rows], "lines", "line", False, progress=False)
    ours = vectors[rows]
    cosine = (ours * reference).sum(1) / np.maximum(np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1), 1e-12)
    return (f"int8: cosine to fp32 over the first {len(rows)} lines: mean {cosine.mean():.4f}, "
            f"min {cosine.min():.4f}")
