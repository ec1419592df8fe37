"""bertlab embed: one vector per input line, saved as .npy."""
import sys

import numpy as np

from ..device import autocast_dtype, pick_device
from ..inference import embed_texts
from ..inference.embed import POOLINGS
from ..interop import load_pretrained
from ..io import atomic_write, read_lines


def add_model_arguments(p):
    p.add_argument("--model", required=True,
                   help="an HF-format BERT folder (config.json, model.safetensors or pytorch_model.bin, "
                        "vocab.txt), or 'minilm' for the packaged all-MiniLM-L6-v2")
    p.add_argument("--pooling", choices=POOLINGS, default="mean",
                   help="mean of the last layer over real tokens (default; what sentence-transformers "
                        "models are trained for), the [CLS] vector, or the pooler's tanh([CLS] W)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N",
                   help="texts per batch; texts are sorted by length first so padding stays small (default 64)")
    p.add_argument("--device", default="auto", help="cpu, cuda, mps or auto (default)")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="fp32 (exact, default); bf16/fp16 autocast are faster on GPUs and on CPUs with "
                        "AVX-512 BF16/AMX, at about 1e-3 deviation")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "embed", help="embed each line of a file with a BERT model into an .npy matrix",
        description="Embed each line of FILE (one text per line, split on \\n) and write an "
                    "(n_lines, hidden_size) float32 matrix to OUT.npy, rows in input order.")
    p.add_argument("file", metavar="FILE", help="UTF-8 text file, one text per line ('-' for stdin)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy", help="where to write the matrix")
    add_model_arguments(p)
    p.add_argument("--normalize", action="store_true", help="scale every vector to unit length")
    p.set_defaults(run=run)


def load_model(args):
    device = pick_device(args.device)
    dtype = autocast_dtype(args.precision, device)
    model, tokenizer, _ = load_pretrained(args.model)
    return model.to(device), tokenizer, dtype


def run(args):
    if not args.output.endswith(".npy"):
        raise ValueError(f"--output {args.output}: must end in .npy")
    lines = read_lines(args.file)
    model, tokenizer, dtype = load_model(args)
    vectors = embed_texts(model, tokenizer, lines, args.pooling, args.normalize, args.batch_size,
                          dtype=dtype, progress=sys.stderr.isatty() or None)
    atomic_write(args.output, lambda f: np.save(f, vectors), mode="wb")
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors to {args.output}", file=sys.stderr)
