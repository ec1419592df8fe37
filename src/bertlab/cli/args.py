"""Argument types shared by every command: a number outside its range is refused by argparse
(exit 2, the flag and the value named) before any work starts. The checks themselves are the
library's (bertlab.validate), so Python callers get the same ones."""
import argparse
import codecs

from .. import validate


def _type(check, kind: str, parse):
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        try:
            return check("value", value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text}: {str(e).split(': ', 1)[1]}") from None
    convert.__name__ = kind  # argparse names the type in its own messages
    return convert


positive_int = _type(validate.positive_int, "a whole number", int)
nonnegative_int = _type(validate.nonnegative_int, "a whole number", int)
positive_float = _type(validate.positive_float, "a number", float)
nonnegative_float = _type(validate.nonnegative_float, "a number", float)
fraction = _type(validate.fraction, "a number", float)
positive_fraction = _type(validate.positive_fraction, "a number", float)
fraction_below_one = _type(validate.fraction_below_one, "a number", float)
word2vec_window = _type(validate.word2vec_window, "a whole number", int)
beam_size = _type(validate.beam_size, "a whole number", int)


def escaped_text(text: str) -> str:
    """Command-line text with backslash escapes (\\n, \\t, \\\\, \\u4e2d) read as such, and every other
    character, Chinese included, kept as it is (Python's unicode_escape codec would turn non-ASCII
    characters into mojibake, since it reads its input as Latin-1)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            j = i + 2
            if text[i + 1] in "xuU":
                j += {"x": 2, "u": 4, "U": 8}[text[i + 1]]
            elif text[i + 1] in "01234567":
                while j < min(i + 4, len(text)) and text[j] in "01234567":
                    j += 1
            try:
                out.append(codecs.decode(text[i:j], "unicode_escape"))
                i = j
                continue
            except UnicodeDecodeError:
                pass
        out.append(text[i])
        i += 1
    return "".join(out)


# The flags every training command shares, declared once so that they are spelled, typed and explained
# the same way everywhere. dest: (flag, old spellings kept as hidden aliases, argparse keywords).
RUN_FLAGS = {
    "batch_size": ("--batch-size", (), dict(metavar="N", type=positive_int,
                                            help="examples per micro-batch per process")),
    "grad_accum": ("--grad-accum", (), dict(metavar="K", type=positive_int, help="micro-batches per optimizer step")),
    "lr": ("--lr", (), dict(type=positive_float, help="peak learning rate")),
    "grad_clip": ("--grad-clip", ("--clip-norm",), dict(metavar="NORM", type=nonnegative_float,
                                                        help="global gradient-norm clip, 0 for none")),
    "max_steps": ("--max-steps", (), dict(metavar="N", type=positive_int,
                                          help="optimizer steps; the learning-rate schedule ends here")),
    "max_minutes": ("--max-minutes", (), dict(metavar="M", type=positive_float,
                                              help="stop (saving a resumable checkpoint) after this much time")),
    "eval_every": ("--eval-every", ("--eval-interval",), dict(metavar="N", type=positive_int,
                                                              help="steps between held-out evaluations")),
    "save_every": ("--save-every", ("--save-interval",), dict(metavar="N", type=positive_int,
                                                              help="steps between checkpoints")),
    "seed": ("--seed", (), dict(metavar="N", type=nonnegative_int, help="random seed")),
    "device": ("--device", (), dict(help="cpu, cuda, mps or auto")),
    "precision": ("--precision", (), dict(choices=["auto", "fp32", "bf16", "fp16"],
                                          help="fp32, or bf16/fp16 autocast (fp16 on CUDA only); auto: bf16 on "
                                               "a CUDA device that has it, else fp32")),
    "sharding": ("--sharding", (), dict(choices=["ddp", "fsdp"],
                                        help="under torchrun: ddp replicates the model on every process, fsdp "
                                             "shards its weights, gradients and optimizer state across them")),
    "checkpoint_format": ("--checkpoint-format", (), dict(
        choices=["file", "sharded"], help="file: one checkpoint.pt, the whole state gathered to the main process; "
                                          "sharded: each process writes its own part with "
                                          "torch.distributed.checkpoint (checkpoint.shards/), for models too "
                                          "large to gather; either resumes on another process count where the "
                                          "data position allows")),
    "compile": ("--compile", (), dict(action="store_true", help="torch.compile the model the training step calls")),
    "resume": ("--resume", (), dict(action="store_true", help="continue from OUT/checkpoint.pt exactly as if "
                                                              "never stopped")),
}


def add_out_argument(parser, help: str | None = None, metavar: str = "DIR", required: bool = True):
    """-o/--out, what a command writes (required unless said otherwise). The old spellings --output and
    --output-dir still parse, hidden; a mutually exclusive group is how argparse lets either satisfy
    a required flag."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("-o", "--out", metavar=metavar, help=help)
    group.add_argument("--output", "--output-dir", dest="out", help=argparse.SUPPRESS)


def add_run_arguments(parser, *, defaults: dict, help: dict | None = None):
    """-o/--out and the shared training flags named in defaults (a command leaves out those it has no
    use for), each with that command's default; help replaces a flag's text where the command means
    more by it. The help shows a default other than None and a switch's False."""
    add_out_argument(parser, (help or {}).get("out", "run folder (created; reused by --resume)"))
    for dest, default in defaults.items():
        flag, old, keywords = RUN_FLAGS[dest]
        text = (help or {}).get(dest, keywords.get("help"))
        if default is not None and not isinstance(default, bool):
            text += " (default %(default)s)"
        parser.add_argument(flag, dest=dest, **{**keywords, "help": text}, default=default)
        if old:
            parser.add_argument(*old, dest=dest, **{**keywords, "help": argparse.SUPPRESS}, default=argparse.SUPPRESS)


def flags_for(target, args, settings=None, **given) -> dict:
    """The keywords for `target` (a job function or a settings dataclass) read from the parsed flags:
    every parameter or field of `target` (and, for a job that passes **settings on, every field of
    the `settings` dataclass, or every parameter of the function it passes them to) whose flag has
    the same name. A flag left unset (None) leaves the target's default (a parameter without one
    gets the None); `progress` is `not --quiet`; `given` (values a command computes) wins. The one
    seam between a command's flags and the library, so no command copies `x=args.x` by hand."""
    import dataclasses
    import inspect

    def names(thing) -> dict:  # name: whether it has a default
        if dataclasses.is_dataclass(thing):
            return {f.name: f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                    for f in dataclasses.fields(thing)}
        return {n: p.default is not p.empty for n, p in inspect.signature(thing).parameters.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    # a settings field the job fills itself may lack a default; only the target's own parameters count
    wanted = {**({n: True for n in names(settings)} if settings is not None else {}), **names(target)}
    found = {}
    for name, has_default in wanted.items():
        if name == "progress" and hasattr(args, "quiet"):
            found[name] = not args.quiet
        elif hasattr(args, name) and (getattr(args, name) is not None or not has_default):
            found[name] = getattr(args, name)
    return {**found, **given}
