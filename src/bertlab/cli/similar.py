"""bertlab similar: semantic search over the lines of a corpus file."""
import sys

from ..io import read_lines
from .args import positive_int
from .embed import add_model_arguments, embed_lines, load_model
from .model_args import numbered


def add_parser(subparsers):
    p = subparsers.add_parser(
        "similar", help="semantic search: the corpus lines closest in meaning to each query",
        description="Embed every line of the corpus and each QUERY (normalised, so the score is "
                    "cosine similarity) and print the top-k corpus lines for each query. Blank corpus "
                    "lines (empty, spaces or control characters only) are skipped and counted on stderr; "
                    "a corpus with no other line, or a blank QUERY, is an error.")
    p.add_argument("queries", nargs="+", metavar="QUERY", help="text to search for")
    p.add_argument("--corpus", required=True, metavar="FILE", help="UTF-8 text file, one document per line")
    p.add_argument("-k", type=positive_int, default=5, metavar="N",
                   help="results per query (default 5; fewer when the corpus is smaller)")
    add_model_arguments(p)
    p.set_defaults(run=run)


def run(args):
    from ..inference import top_k
    corpus = read_lines(args.corpus)
    loaded = load_model(args)
    query_vectors, blank = embed_lines(loaded, args, args.queries, "queries", "QUERY", True, progress=False)
    if blank:
        raise ValueError(f"QUERY {blank[0] + 1} is blank; give text to search for")
    corpus_vectors, blank = embed_lines(loaded, args, corpus, "corpus lines", "line", True, progress=not args.quiet)
    if len(blank) == len(corpus):
        raise ValueError(f"{args.corpus}: every line is blank; there is nothing to search")
    if blank:  # their all-zero rows must never come back as hits
        print(f"bertlab similar: note: skipped {len(blank)} blank corpus lines ({numbered([i + 1 for i in blank])})",
              file=sys.stderr)
    skipped = set(blank)
    kept = [i for i in range(len(corpus)) if i not in skipped]
    scores, indices = top_k(query_vectors, corpus_vectors[kept], args.k)
    for query, row_scores, row_indices in zip(args.queries, scores, indices):
        print(f"query: {query}")
        for score, i in zip(row_scores, row_indices):
            print(f"  {score:.4f}  {corpus[kept[i]]}")
        print()
