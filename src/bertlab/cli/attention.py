"""bertlab attention: one layer's attention as a heatmap PNG, and where a chosen token looks."""
import os
import sys

from ..inference.attention import DEFAULT_SENTENCE, FONT_HINT
from ..io import check_output_file
from .args import positive_int
from .model_args import add_checkpoint_arguments, add_output_arguments


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
    add_checkpoint_arguments(p)
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


def pick_heads(head: str, num_heads: int) -> list[int]:
    if head == "all":
        return list(range(num_heads))
    try:
        h = int(head)
    except ValueError:
        raise ValueError(f"--head {head}: expected a head number or 'all'") from None
    if not 0 <= h < num_heads:
        raise ValueError(f"--head {h}: the model has {num_heads} heads per layer, numbered 0 to {num_heads - 1}")
    return [h]


def print_top(tokens, weights, heads, query, k, where):
    from ..inference.attention import most_attended
    rows = weights[heads].mean(axis=0)  # one head, or the mean over every head
    for position, top in most_attended(tokens, rows, query, k):
        print(f"{tokens[position]!r} (token {position}), {where}, attends to:")
        for token, weight in top:
            print(f"  {weight:.4f}  {token}")


def run(args):
    from ..device import pick_device
    from ..inference.attention import attention_weights, layer_number, render_heatmaps
    from ..interop import load_pretrained
    if not args.output and not args.print_top:
        raise ValueError("nothing to do: give -o OUT.png for the heatmap and/or --print-top TOKEN")
    if args.output:
        if not args.output.endswith(".png"):
            raise ValueError(f"--output {args.output}: must end in .png")
        check_output_file(args.output, args.overwrite)
    model, tokenizer, _ = load_pretrained(args.model)
    config = model.config
    layer = layer_number(args.layer, config.num_hidden_layers)
    heads = pick_heads(args.head, config.num_attention_heads)
    tokens, weights = attention_weights(model.to(pick_device(args.device)), tokenizer, args.sentence, layer)
    where = f"layer {layer}, " + (f"head {heads[0]}" if len(heads) == 1 else f"mean of {len(heads)} heads")
    if args.print_top:
        print_top(tokens, weights, heads, args.print_top, args.top_k, where)
    if args.output:
        missing = render_heatmaps(args.output, tokens, weights[heads], [f"head {h}" for h in heads],
                                  f"{os.path.basename(os.path.normpath(args.model))}: layer {layer} of "
                                  f"{config.num_hidden_layers} (counting from 0)")
        if missing:
            print(f"bertlab attention: warning: no installed font has glyphs for {' '.join(missing[:10])}"
                  f"{' ...' if len(missing) > 10 else ''}, drawn as empty boxes; for Chinese, Japanese or "
                  f"Korean text: {FONT_HINT}", file=sys.stderr)
        print(f"wrote layer {layer}, {len(heads)} head(s), {len(tokens)} tokens to {args.output}", file=sys.stderr)
