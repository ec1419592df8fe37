"""bertlab fill-mask: the masked-LM head's guesses for every [MASK] in a text."""
import json

from ..io import read_lines
from .args import flags_for, positive_int
from .model_args import add_model_arguments


def add_parser(subparsers):
    p = subparsers.add_parser(
        "fill-mask", help="the most probable tokens for each [MASK] in a text (the masked-LM head)",
        description="Predict the token behind every [MASK] in each TEXT with the checkpoint's masked-LM head "
                    "(the pretraining task), printing the top-k tokens with their probabilities. Each mask "
                    "is predicted with every other mask still masked, as in pretraining. The checkpoint "
                    "must include the head (cls.predictions.*): bert-base-uncased does, sentence-embedding "
                    "models such as 'minilm' do not. A text without [MASK], or longer than the model's "
                    "max_position_embeddings, is an error naming it (nothing is truncated).")
    p.add_argument("texts", nargs="+", metavar="TEXT",
                   help="text with one or more [MASK] (written exactly so, upper case); '-' reads one text per "
                        "line from stdin")
    add_model_arguments(p)
    p.add_argument("--top-k", type=positive_int, default=5, metavar="K",
                   help="predictions per mask (default 5; at most the vocabulary size)")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per text: {"text", "masks": [[{"token", "token_id", "probability"}, '
                        '...], ...]}, one list per [MASK], most probable first')
    p.set_defaults(run=run)


def print_text(text, masks):
    print(text)
    for n, predictions in enumerate(masks, 1):
        label = f"[MASK] {n}" if len(masks) > 1 else "[MASK]"
        print(f"  {label}: " + "  ".join(f"{p.token} {p.probability:.4f}" for p in predictions))


def run(args):
    from ..inference.fill_mask import fill_mask_texts
    texts = read_lines("-") if args.texts == ["-"] else args.texts
    results = fill_mask_texts(**flags_for(fill_mask_texts, args, model_dir=args.model, texts=texts))
    for text, masks in zip(texts, results):
        if args.json:
            print(json.dumps({"text": text, "masks": [[vars(p) for p in m] for m in masks]}, ensure_ascii=False))
        else:
            print_text(text, masks)
