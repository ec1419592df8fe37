"""bertlab similar: semantic search over the lines of a corpus file."""
import sys

from ..inference import embed_texts, top_k
from ..io import read_lines
from .embed import add_model_arguments, load_model


def add_parser(subparsers):
    p = subparsers.add_parser(
        "similar", help="semantic search: the corpus lines closest in meaning to each query",
        description="Embed every line of the corpus and each QUERY (normalised, so the score is "
                    "cosine similarity) and print the top-k corpus lines for each query.")
    p.add_argument("queries", nargs="+", metavar="QUERY", help="text to search for")
    p.add_argument("--corpus", required=True, metavar="FILE", help="UTF-8 text file, one document per line")
    p.add_argument("-k", type=int, default=5, metavar="N", help="results per query (default 5)")
    add_model_arguments(p)
    p.set_defaults(run=run)


def run(args):
    if args.k < 1:
        raise ValueError(f"-k {args.k}: must be at least 1")
    corpus = read_lines(args.corpus)
    model, tokenizer, dtype = load_model(args)
    kw = dict(pooling=args.pooling, normalize=True, batch_size=args.batch_size, dtype=dtype)
    corpus_vectors = embed_texts(model, tokenizer, corpus, progress=sys.stderr.isatty() or None, **kw)
    scores, indices = top_k(embed_texts(model, tokenizer, args.queries, **kw), corpus_vectors, args.k)
    for query, row_scores, row_indices in zip(args.queries, scores, indices):
        print(f"query: {query}")
        for score, i in zip(row_scores, row_indices):
            print(f"  {score:.4f}  {corpus[i]}")
        print()
