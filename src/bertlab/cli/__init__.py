"""`bertlab` — one command, one subcommand per job. Each subcommand lives in its own module with
`add_parser(subparsers)` and `run(args)`; a module imports torch and the models inside `run`, so
`--help`, `--version` and the commands that need no model start at once."""
import argparse
import os
import re
import shutil
import sys
import textwrap
import traceback

from .. import __version__, validate
from . import args as args_module
from . import (
    attention,
    convert,
    create_pretraining_data,
    data,
    distill,
    embed,
    export,
    extract_features,
    fill_mask,
    finetune,
    generate,
    gpt_train,
    notes,
    predict,
    pretrain,
    serve,
    similar,
    tokenize,
    translate,
    translate_train,
    unilm_generate,
    unilm_train,
    vocab,
    word2vec,
)

# The commands by what a user wants to do, as `git help` groups git's; `bertlab --help` prints them so.
GROUPS = [
    ("use a model", [tokenize, embed, similar, fill_mask, extract_features, attention, predict, generate, translate,
                     unilm_generate]),
    ("fine-tune and train", [finetune, distill, pretrain, gpt_train, translate_train, unilm_train, word2vec]),
    ("data", [data, vocab, create_pretraining_data]),
    ("ship", [export, convert, serve]),
    ("learn from the notes", [notes]),
]
COMMANDS = [command for _, commands in GROUPS for command in commands]

DESCRIPTION = ("The Transformer family end to end: an exact BERT (WordPiece tokenizer, real checkpoints, "
               "embeddings), the seq2seq Transformer and GPT.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertlab", usage="%(prog)s [-h] [--version] COMMAND ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'bertlab COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"bertlab {__version__}")
    # help=SUPPRESS: argparse's flat list of the commands gives way to the grouped one in the description
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, help=argparse.SUPPRESS,
                                       prog="bertlab")  # each command's usage: `bertlab NAME ...`
    for command in COMMANDS:
        command.add_parser(subparsers)
    add_memory_limit(subparsers, default=None)
    parser.description = grouped_commands(subparsers)
    return parser


def grouped_commands(subparsers) -> str:
    """The description of `bertlab --help`: what bertlab is, then each group of GROUPS with every
    command's one-line help (the `help=` its module gave add_parser), wrapped to the terminal."""
    helps = {action.dest: action.help for action in subparsers._choices_actions}
    width = max(60, min(shutil.get_terminal_size().columns, 100) - 2)
    column = 21  # a longer name (create-pretraining-data) puts its help on the next line, as argparse does
    lines = textwrap.wrap(DESCRIPTION, width) + ["", "The commands, by what you want to do:"]
    for title, commands in GROUPS:
        lines += ["", title]
        for command in commands:
            name = command.__name__.rsplit(".", 1)[1].replace("_", "-")
            if len(name) + 5 > column:
                lines.append(f"   {name}")
            lines += textwrap.wrap(helps[name], width, subsequent_indent=" " * column,
                                   initial_indent=" " * column if len(name) + 5 > column else f"   {name:<{column - 3}}")
    return "\n".join(lines)


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
        if message is None and peer_lost(e):
            print(f"bertlab {args.command}: stopped: another process of this torchrun run stopped first ({e}); "
                  "its own output says why. Under torchrun --max-restarts the agent restarts every process and "
                  "the run continues from its last checkpoint", file=sys.stderr)
            return 1
        if message is None:  # not bad input but a bug: show where, and ask for a report
            traceback.print_exc()
            print(f"bertlab {args.command}: internal error ({type(e).__name__}); this is a bug in bertlab, "
                  "please report it with the command line and the traceback above", file=sys.stderr)
            return 1
        print(f"bertlab {args.command}: error: {message}", file=sys.stderr)
        return 2


_PEER_LOST = re.compile(r"Connection reset by peer|Connection closed by peer|Broken pipe|connectFullMesh failed")


def peer_lost(e: Exception) -> bool:
    """Whether `e` is a collective failing because another process of a torchrun run went away (gloo
    or NCCL's error for a closed connection), rather than a bug in this one."""
    import torch.distributed as dist
    return isinstance(e, (RuntimeError, dist.DistError)) and os.environ.get("WORLD_SIZE", "1") != "1" \
        and bool(_PEER_LOST.search(str(e)))


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
