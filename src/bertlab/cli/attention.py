"""bertlab attention: one layer's attention as a heatmap PNG, and where a chosen token looks."""
import sys

from ..inference.attention import DEFAULT_SENTENCE, FONT_HINT
from .args import flags_for, positive_int
from .model_args import add_model_arguments, add_output_arguments


def add_parser(subparsers):
    p = subparsers.add_parser(
        "attention", help="heatmap PNG of a layer's attention weights for one sentence",
        description="Run SENTENCE through BERT and draw the attention weights of one layer: row i is where "
                    "token i looks (each row sums to 1), query tokens down the side, key tokens along the "
                    "bottom. 'A ||| B' is a sentence pair. A blank sentence, or one longer than the model's "
                    "max_position_embeddings, is an error (nothing is truncated). Chinese, Japanese and "
                    f"Korean tokens need a CJK font; without one they are drawn as boxes, with a warning ({FONT_HINT}).")
    p.add_argument("sentence", nargs="?", default=DEFAULT_SENTENCE, metavar="SENTENCE",
                   help=f"the text (default: {DEFAULT_SENTENCE!r})")
    add_model_arguments(p)
    p.add_argument("--layer", type=int, default=-1, metavar="N",
                   help="0 is the first layer, negative counts from the top (default -1, the last)")
    p.add_argument("--head", default="all", metavar="H|all",
                   help="a head number from 0, or 'all' for a grid of every head of the layer (default all)")
    add_output_arguments(p, required=False, metavar="OUT.png", help="where to write the heatmap")
    p.add_argument("--print-top", metavar="TOKEN",
                   help="print the tokens that TOKEN (a WordPiece token of the sentence, e.g. 'it') attends to "
                        "most: in the chosen head, or averaged over the heads with --head all")
    p.add_argument("--top-k", type=positive_int, default=5, metavar="K",
                   help="how many tokens --print-top shows (default 5)")
    p.set_defaults(run=run)


def parse_head(head: str) -> int | None:
    """--head: a head number, or None for 'all'."""
    if head == "all":
        return None
    try:
        return int(head)
    except ValueError:
        raise ValueError(f"--head {head}: expected a head number or 'all'") from None


def run(args):
    from ..inference.attention import attention_map
    if not args.out and not args.print_top:
        raise ValueError("nothing to do: give -o OUT.png for the heatmap and/or --print-top TOKEN")
    r = attention_map(**flags_for(attention_map, args, model_dir=args.model, output=args.out,
                                  query=args.print_top, head=parse_head(args.head)))
    for position, top in r.top:
        print(f"{r.tokens[position]!r} (token {position}), {r.where}, attends to:")
        for token, weight in top:
            print(f"  {weight:.4f}  {token}")
    if args.out:
        if r.missing:
            print(f"bertlab attention: warning: no installed font has glyphs for {' '.join(r.missing[:10])}"
                  f"{' ...' if len(r.missing) > 10 else ''}, drawn as empty boxes; for Chinese, Japanese or "
                  f"Korean text: {FONT_HINT}", file=sys.stderr)
        print(f"wrote layer {r.layer}, {len(r.heads)} head(s), {len(r.tokens)} tokens to {args.out}",
              file=sys.stderr)
