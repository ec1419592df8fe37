"""bertlab embed: one vector per input line, saved as .npy."""
import sys

from ..inference.pooling import POOLINGS
from .args import flags_for, positive_int
from .model_args import add_model_arguments, add_output_arguments, numbered, truncation_note


def add_embedding_arguments(p):
    """The flags embed and similar share: the model group, pooling, length, batching, precision."""
    add_model_arguments(p)
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
                        "accuracy (embed prints the cosine to fp32 on the first 64 lines; see docs/guide/export.md)")
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
    add_embedding_arguments(p)
    p.add_argument("--normalize", action="store_true",
                   help="scale every vector to unit length (blank lines' rows stay all zero)")
    p.set_defaults(run=run)


def run(args):
    from ..inference.embedder import embed_file
    r = embed_file(**flags_for(embed_file, args, model_dir=args.model, output=args.out))
    note = truncation_note(r.truncated, r.lines, r.max_seq_length)
    if note:
        print(f"bertlab embed: {note}", file=sys.stderr)
    if r.int8 is not None:
        cost = (f"int8: cosine to fp32 over the first {r.int8.rows} lines: mean {r.int8.mean:.4f}, "
                f"min {r.int8.min:.4f}") if r.int8.rows else "int8: no line to compare with fp32"
        print(f"bertlab embed: {cost}", file=sys.stderr)
    if r.blank:
        print(f"bertlab embed: note: {len(r.blank)} of {r.lines} lines were blank and got all-zero rows "
              f"({numbered(r.blank)})", file=sys.stderr)
    print(f"wrote {r.shape[0]} x {r.shape[1]} vectors to {r.output}", file=sys.stderr)
