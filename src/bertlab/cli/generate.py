"""bertlab generate: continue prompts with a GPT, streaming the text as it is made."""
import sys

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
    p.add_argument("--device", default="auto", help="cpu, cuda, mps or auto (default)")
    p.add_argument("--int8", action="store_true",
                   help="CPU only: dynamic int8 linear layers and output layer: faster steps (a step reads every "
                        "weight) at a small cost in perplexity (docs/export.md)")
    p.add_argument("--no-prepack", action="store_true",
                   help="do not prepack the weights for MKL (saves memory equal to the model's size, "
                        "decoding steps are slower)")
    p.set_defaults(run=run)


def options_from(args):
    """The sampling options of the flags (checked before the model is loaded); the tokenizer's EOS
    is filled in once it is."""
    from ..inference.generate import SamplingOptions
    sampling = (args.temperature not in (None, 0)) or args.top_k > 0 or args.top_p < 1
    return SamplingOptions(max_new_tokens=args.max_new_tokens, do_sample=sampling,
                           temperature=1.0 if args.temperature is None else args.temperature, top_k=args.top_k,
                           top_p=args.top_p, repetition_penalty=args.repetition_penalty, stop=tuple(args.stop))


class _Streamer:
    """Prints a single prompt's continuation as it grows (inference.generate.TextStream)."""

    def __init__(self, tokenizer, stops):
        from ..inference.generate import TextStream
        self.stream = TextStream(tokenizer.decode, stops)

    def __call__(self, row, token):
        piece = self.stream.add(token)
        if piece:
            sys.stdout.write(piece)
            sys.stdout.flush()

    def finish(self):
        sys.stdout.write(self.stream.finish() + "\n")


def run(args):
    import dataclasses

    import torch

    from ..device import pick_device
    from ..inference.generate import generate, truncate_at_stop
    from ..interop.hf_gpt2 import load_gpt2
    from ..io import read_lines
    from ..tokenization.char_level import load_gpt_tokenizer
    if (args.prompt is None) == (args.prompts is None):
        raise ValueError("give either a PROMPT or --prompts FILE")
    if args.prompt is not None and not args.prompt.strip():
        raise ValueError("PROMPT is blank: give some text to continue")
    options = options_from(args)
    prompts = read_lines(args.prompts) if args.prompts else [args.prompt]
    device = pick_device(args.device)
    if args.int8:
        from ..inference.int8 import check_int8_settings
        check_int8_settings(device)
    model, _ = load_gpt2(args.model, map_location=device)
    if args.int8:
        from ..inference.int8 import quantize_int8
        quantize_int8(model)
    tokenizer = load_gpt_tokenizer(args.model)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise ValueError(f"{args.model}: the tokenizer has {tokenizer.vocab_size} tokens, the model "
                         f"{model.config.vocab_size}; they are not one model's files")
    options = dataclasses.replace(options, eos_token_id=getattr(tokenizer, "eos_token_id", None))
    # A blank line of --prompts gets a blank output line; every other prompt must fit the model.
    encoded = [tokenizer.encode(p) if p.strip() else [] for p in prompts]
    for number, ids in enumerate(encoded, 1):
        _check_fits(ids, options.max_new_tokens, model.config.n_positions,
                    f"{args.prompts}:{number}" if args.prompts else "PROMPT")
    gen = torch.Generator().manual_seed(args.seed)
    if args.prompt is not None:
        streamer = _Streamer(tokenizer, options.stop)
        sys.stdout.write(args.prompt)
        generate(model, encoded, options, decode=tokenizer.decode, on_token=streamer, generator=gen,
                 prepack=not args.no_prepack)
        streamer.finish()
        return 0
    for start in range(0, len(prompts), args.batch_size):
        batch = range(start, min(start + args.batch_size, len(prompts)))
        real = [i for i in batch if encoded[i]]
        outs = generate(model, [encoded[i] for i in real], options, decode=tokenizer.decode, generator=gen,
                        prepack=not args.no_prepack) if real else []
        continuation = dict(zip(real, outs))
        for i in batch:
            text = truncate_at_stop(tokenizer.decode(continuation[i]), options.stop) if i in continuation else ""
            sys.stdout.write(prompts[i] + text.replace("\n", "\\n") + "\n")
        sys.stdout.flush()
    return 0


def _check_fits(ids, new_tokens: int, positions: int, where: str):
    """A prompt and its new tokens must fit the model's positions: refuse rather than cut the prompt."""
    if ids and len(ids) + new_tokens > positions:
        room = positions - len(ids)
        advice = f"use -n {room} or less, or a shorter prompt" if room > 0 else "the prompt alone fills them"
        raise ValueError(f"{where}: the prompt has {len(ids)} tokens; with -n {new_tokens} new ones that exceeds "
                         f"the model's {positions} positions ({advice})")
