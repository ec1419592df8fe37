"""`bertlab` — one command, one subcommand per job. Each subcommand lives in its own module with
`add_parser(subparsers)` and `run(args)`."""
import argparse
import sys

from . import embed, similar, tokenize
from . import generate, gpt_train
from . import attention, extract_features, fill_mask
from . import finetune, predict
from . import data
from . import create_pretraining_data, vocab
from . import pretrain
from . import translate, translate_train

COMMANDS = [tokenize, embed, similar, gpt_train, generate, finetune, predict, extract_features, fill_mask, attention,
            pretrain, vocab, create_pretraining_data, data, translate_train, translate]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertlab",
        description="The Transformer family end to end: an exact BERT (WordPiece tokenizer, real "
                    "checkpoints, embeddings), the seq2seq Transformer and GPT.",
        epilog="Run 'bertlab COMMAND --help' for a command's options.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except (ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"bertlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bertlab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `bertlab tokenize big.txt | head`
        return 0
