"""bertlab generate: continue prompts with a GPT, streaming the text as it is made."""
import sys

EXAMPLE = """examples:
  bertlab generate --model runs/tiny/model "The program"                  # greedy
  bertlab generate --model runs/tiny/model "Once" --temperature 0.8 --top-p 0.95 -n 200
  bertlab generate --model runs/tiny/model --prompts prompts.txt --batch-size 8 --stop "\\n\\n"

MODEL is a folder in HF GPT-2 format: config.json, model.safetensors (or pytorch_model.bin), and
vocab.json + merges.txt (or chars.json) -- what gpt-train writes to OUT/model."""


def add_parser(subparsers):
    import argparse
    p = subparsers.add_parser(
        "generate", help="generate text with a GPT model (greedy or sampled, streamed)",
        description="Continue each prompt with a GPT model, one token at a time with a key/value cache. "
                    "Without --temperature/--top-k/--top-p the decoding is greedy.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prompt", nargs="?", help="the prompt text (or use --prompts FILE)")
    p.add_argument("--model", required=True, metavar="DIR", help="HF GPT-2 format model folder")
    p.add_argument("--prompts", metavar="FILE", help="UTF-8 file, one prompt per line; outputs in input order")
    p.add_argument("-n", "--max-new-tokens", type=int, default=100, help="tokens to add per prompt (100)")
    p.add_argument("--temperature", type=float, help="sample with this temperature (0 = greedy)")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=float, default=1.0, help="sample among the smallest set of mass p")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="> 1 discourages repeats (1.2 is mild)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop a prompt's continuation at this text (repeatable; \\n escapes allowed)")
    p.add_argument("--batch-size", type=int, default=8, help="prompts per batch with --prompts (8)")
    p.add_argument("--seed", type=int, default=0, help="random seed for sampling (0)")
    p.add_argument("--device", default="auto", help="cpu, cuda, mps or auto (default)")
    p.add_argument("--no-prepack", action="store_true",
                   help="do not prepack the weights for MKL (saves memory equal to the model's size, "
                        "decoding steps are slower)")
    p.set_defaults(run=run)


def options_from(args, eos):
    from ..inference.generate import SamplingOptions
    sampling = (args.temperature not in (None, 0)) or args.top_k > 0 or args.top_p < 1
    stops = tuple(s.encode("utf-8").decode("unicode_escape") for s in args.stop)
    return SamplingOptions(max_new_tokens=args.max_new_tokens, do_sample=sampling,
                           temperature=1.0 if args.temperature is None else args.temperature, top_k=args.top_k,
                           top_p=args.top_p, repetition_penalty=args.repetition_penalty, eos_token_id=eos,
                           stop=stops)


class _Streamer:
    """Prints a single prompt's continuation as it grows, holding back a half-made character."""

    def __init__(self, tokenizer, stops):
        self.tokenizer, self.stops, self.ids, self.shown = tokenizer, stops, [], 0

    def __call__(self, row, token):
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids)
        from ..inference.generate import truncate_at_stop
        safe = truncate_at_stop(text, self.stops) if self.stops else text
        hold = max((len(s) - 1 for s in self.stops), default=0)  # a stop string may be half made
        end = len(safe) if len(safe) < len(text) else len(safe) - hold
        while end > self.shown and safe[end - 1] == "\ufffd":
            end -= 1
        if end > self.shown:
            sys.stdout.write(safe[self.shown:end])
            sys.stdout.flush()
            self.shown = end

    def finish(self):
        from ..inference.generate import truncate_at_stop
        text = truncate_at_stop(self.tokenizer.decode(self.ids), self.stops)
        sys.stdout.write(text[self.shown:] + "\n")


def run(args):
    import torch

    from ..device import pick_device
    from ..inference.generate import generate, truncate_at_stop
    from ..interop.hf_gpt2 import load_gpt2
    from ..io import read_lines
    from ..tokenization.char_level import load_gpt_tokenizer
    if (args.prompt is None) == (args.prompts is None):
        raise ValueError("give either a PROMPT or --prompts FILE")
    prompts = read_lines(args.prompts) if args.prompts else [args.prompt.encode().decode("unicode_escape")]
    model, _ = load_gpt2(args.model, map_location=pick_device(args.device))
    tokenizer = load_gpt_tokenizer(args.model)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ValueError(f"{args.model}: tokenizer has {tokenizer.vocab_size} tokens, the model {model.config.vocab_size}")
    options = options_from(args, getattr(tokenizer, "eos_token_id", None))
    encoded = []
    for number, p in enumerate(prompts, 1):
        ids = tokenizer.encode(p)
        if not ids:
            raise ValueError(f"{args.prompts or 'PROMPT'}:{number}: empty prompt")
        encoded.append(ids)
    gen = torch.Generator().manual_seed(args.seed)
    if len(encoded) == 1:
        streamer = _Streamer(tokenizer, options.stop)
        sys.stdout.write(prompts[0])
        generate(model, encoded, options, decode=tokenizer.decode, on_token=streamer, generator=gen,
                 prepack=not args.no_prepack)
        streamer.finish()
        return 0
    for start in range(0, len(encoded), args.batch_size):
        outs = generate(model, encoded[start:start + args.batch_size], options, decode=tokenizer.decode,
                        generator=gen, prepack=not args.no_prepack)
        for prompt, out in zip(prompts[start:], outs):
            text = truncate_at_stop(tokenizer.decode(out), options.stop)
            sys.stdout.write(prompt + text.replace("\n", "\\n") + "\n")
            sys.stdout.flush()
    return 0
