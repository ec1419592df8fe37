"""`bertlab` — one command, one subcommand per job. Each subcommand lives in its own module with
`add_parser(subparsers)` and `run(args)`; a module imports torch and the models inside `run`, so
`--help`, `--version` and the commands that need no model start at once."""
import argparse
import re
import sys
import traceback

from .. import __version__, validate
from . import args as args_module
from . import embed, similar, tokenize
from . import generate, gpt_train
from . import attention, convert, extract_features, fill_mask
from . import finetune, predict
from . import distill
from . import data
from . import create_pretraining_data, vocab
from . import pretrain
from . import translate, translate_train
from . import unilm_generate, unilm_train
from . import notes
from . import serve, export
from . import word2vec

COMMANDS = [tokenize, embed, similar, gpt_train, generate, finetune, predict, distill, extract_features, fill_mask,
            attention, convert, pretrain, vocab, create_pretraining_data, data, translate_train, translate,
            unilm_train, unilm_generate, word2vec, notes, serve, export]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertlab",
        description="The Transformer family end to end: an exact BERT (WordPiece tokenizer, real "
                    "checkpoints, embeddings), the seq2seq Transformer and GPT.",
        epilog="Run 'bertlab COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"bertlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    add_memory_limit(subparsers, default=None)
    return parser


def add_memory_limit(subparsers, default):
    """--max-model-gb on every command and every action of a command (`bertlab word2vec train ...
    --max-model-gb GB` as well as `bertlab word2vec --max-model-gb GB train ...`): whatever may build
    a model, tables or a search from numbers it was handed checks them against it first."""
    for sub in {id(p): p for p in subparsers.choices.values()}.values():  # an alias names the same parser
        sub.add_argument("--max-model-gb", metavar="GB", type=args_module.positive_float, default=default,
                         help="refuse, before allocating anything, a model (or vectors, or a beam search) that "
                              "needs more memory than this (float32 weights; four times that to train); default: "
                              "half this machine's memory")
        for action in sub._actions:  # an action's own flag must not reset the command's (SUPPRESS)
            if isinstance(action, argparse._SubParsersAction):
                add_memory_limit(action, default=argparse.SUPPRESS)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    validate.set_model_memory_limit(args.max_model_gb)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        print(f"bertlab {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `bertlab tokenize big.txt | head`
        return 0
    except Exception as e:
        message = input_error(e)
        if message is None:  # not bad input but a bug: show where, and ask for a report
            traceback.print_exc()
            print(f"bertlab {args.command}: internal error ({type(e).__name__}); this is a bug in bertlab, "
                  "please report it with the command line and the traceback above", file=sys.stderr)
            return 1
        print(f"bertlab {args.command}: error: {message}", file=sys.stderr)
        return 2


def input_error(e: Exception) -> str | None:
    """The one-line message for an error caused by the input (a file, a flag, the machine's
    limits), or None for anything else. Loaders raise ValueError naming the file; OSError names its
    file itself."""
    if isinstance(e, OSError) and not isinstance(e, BrokenPipeError):
        where = f"{e.filename}: " if e.filename else ""
        return where + (e.strerror or str(e)) if (e.strerror or e.filename) else str(e)
    if isinstance(e, ValueError):  # includes UnicodeDecodeError and json.JSONDecodeError
        return "; ".join(line.strip() for line in str(e).splitlines() if line.strip()) or type(e).__name__
    if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and _ALLOCATOR_FAILURE.search(str(e))):
        wanted = _ALLOCATOR_FAILURE.search(str(e)) if isinstance(e, RuntimeError) else None
        asked = int(wanted.group(1)) if wanted and wanted.group(1) else 0
        size = f" ({asked / 1e9:,.1f} GB asked for)" if asked >= 10**8 else ""  # a small request: memory was full
        return (f"out of memory{size}: try a smaller --batch-size, shorter inputs or a smaller model "
                "(--max-model-gb refuses large models before they are built)")
    return None


# torch's CPU allocator reports a failed allocation as a RuntimeError, not a MemoryError
_ALLOCATOR_FAILURE = re.compile(r"can't allocate memory(?:: you tried to allocate (\d+) bytes)?|not enough memory")
