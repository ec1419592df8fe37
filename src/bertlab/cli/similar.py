"""bertlab similar: semantic search over the lines of a corpus file."""
import sys

from .args import flags_for, positive_int
from .embed import add_embedding_arguments
from .model_args import numbered, truncation_note


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
    add_embedding_arguments(p)
    p.set_defaults(run=run)


def run(args):
    from ..inference.embedder import search_corpus
    r = search_corpus(**flags_for(search_corpus, args, model_dir=args.model))
    for cut, total, what, noun in ((r.truncated_queries, len(args.queries), "queries", "QUERY"),
                                   (r.truncated_lines, r.corpus_lines, "corpus lines", "line")):
        note = truncation_note(cut, total, r.max_seq_length, what, noun)
        if note:
            print(f"bertlab similar: {note}", file=sys.stderr)
    if r.skipped:
        print(f"bertlab similar: note: skipped {len(r.skipped)} blank corpus lines ({numbered(r.skipped)})",
              file=sys.stderr)
    for query, hits in zip(args.queries, r.hits):
        print(f"query: {query}")
        for score, line in hits:
            print(f"  {score:.4f}  {line}")
        print()
