"""bertlab generate: continue prompts with a GPT, streaming the text as it is made."""
import sys

from .args import flags_for
from .model_args import add_device_argument

EXAMPLE = """examples:
  bertlab generate --model runs/tiny/model "The program"                  # greedy
  bertlab generate --model runs/tiny/model "Once" --temperature 0.8 --top-p 0.95 -n 200
  bertlab generate --model runs/tiny/model --prompts prompts.txt --batch-size 8 --stop "\\n\\n"

MODEL is a folder in HF GPT-2 format: config.json, model.safetensors (or pytorch_model.bin), and
vocab.json + merges.txt (or chars.json) -- what gpt-train writes to OUT/model.

With --prompts, each line's output is the prompt and its continuation on one line (newlines in the
continuation written as \n); a blank line gives a blank line. A prompt plus -n new tokens must fit
the model's positions (n_positions in config.json): a longer one is an error naming the prompt,
never cut silently."""


def add_parser(subparsers):
    import argparse

    from .args import escaped_text, nonnegative_float, nonnegative_int, positive_float, positive_fraction, positive_int
    p = subparsers.add_parser(
        "generate", help="generate text with a GPT model (greedy or sampled, streamed)",
        description="Continue each prompt with a GPT model, one token at a time with a key/value cache. "
                    "Without --temperature/--top-k/--top-p the decoding is greedy.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prompt", nargs="?", type=escaped_text,
                   help="the prompt text, \\n escapes allowed (or use --prompts FILE)")
    p.add_argument("--model", required=True, metavar="DIR", help="HF GPT-2 format model folder")
    p.add_argument("--prompts", metavar="FILE", help="UTF-8 file, one prompt per line; outputs in input order")
    p.add_argument("-n", "--max-new-tokens", type=positive_int, default=100,
                   help="tokens to add per prompt (100); prompt + N must fit the model's positions")
    p.add_argument("--temperature", type=nonnegative_float, help="sample with this temperature (0 = greedy)")
    p.add_argument("--top-k", type=nonnegative_int, default=0, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=positive_fraction, default=1.0,
                   help="sample among the smallest set of mass p (0 < p <= 1)")
    p.add_argument("--repetition-penalty", type=positive_float, default=1.0,
                   help="> 1 discourages repeats (1.2 is mild)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", type=escaped_text,
                   help="stop a prompt's continuation at this text (repeatable; \\n escapes allowed)")
    p.add_argument("--batch-size", type=positive_int, default=8, help="prompts per batch with --prompts (8)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed for sampling (0)")
    add_device_argument(p)
    p.add_argument("--int8", action="store_true",
                   help="CPU only: dynamic int8 linear layers and output layer: faster steps (a step reads every "
                        "weight) at a small cost in perplexity (docs/guide/export.md)")
    p.add_argument("--no-prepack", action="store_true",
                   help="do not prepack the weights for MKL (saves memory equal to the model's size, "
                        "decoding steps are slower)")
    p.set_defaults(run=run)


def options_from(args):
    """The sampling options of the flags (checked before the model is loaded); the tokenizer's EOS
    is filled in once it is."""
    from ..inference.generate import SamplingOptions
    sampling = (args.temperature not in (None, 0)) or args.top_k > 0 or args.top_p < 1
    return SamplingOptions(**flags_for(SamplingOptions, args, do_sample=sampling, stop=tuple(args.stop)))


def run(args):
    from ..inference.generate import generate_file, generate_prompt
    if (args.prompt is None) == (args.prompts is None):
        raise ValueError("give either a PROMPT or --prompts FILE")
    if args.prompt is not None and not args.prompt.strip():
        raise ValueError("PROMPT is blank: give some text to continue")
    given = dict(model_dir=args.model, options=options_from(args), prepack=not args.no_prepack)
    if args.prompt is not None:
        generate_prompt(**flags_for(generate_prompt, args, on_text=_write, **given))
        sys.stdout.write("\n")
        return 0
    for line in generate_file(**flags_for(generate_file, args, prompts_file=args.prompts, **given)):
        _write(line + "\n")
    return 0


def _write(text: str):
    sys.stdout.write(text)
    sys.stdout.flush()
