"""Sampling from a GPT one token at a time, with a key/value cache so each step costs one position.

Prompts of different lengths are left-padded into one batch: every row's newest token then sits in
the last column, padded keys are hidden by an attention mask, and positions count real tokens only,
so a row's continuation does not depend on the other rows in its batch.
"""
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .. import validate


@dataclass(frozen=True)
class SamplingOptions:
    """How the next token is chosen. temperature 0 (or do_sample=False) is greedy decoding."""
    max_new_tokens: int = 64
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0             # keep the k most likely tokens (0: all)
    top_p: float = 1.0         # keep the smallest set of tokens whose probability reaches p
    repetition_penalty: float = 1.0  # > 1 discourages tokens already in the text (CTRL's rule)
    eos_token_id: int | None = None
    stop: tuple = ()           # stop strings; the text is cut before them (needs `decode`)

    def __post_init__(self):
        validate.check_fields(self, {"max_new_tokens": validate.nonnegative_int,
                                     "temperature": validate.nonnegative_float, "top_k": validate.nonnegative_int,
                                     "repetition_penalty": validate.positive_float})
        validate.check_number("top_p", self.top_p, minimum=0, exclusive_minimum=True, maximum=1)
        validate.nonnegative_int("eos_token_id", self.eos_token_id, optional=True)
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError(f"stop strings must be non-empty text, got {self.stop!r}")

    @property
    def greedy(self) -> bool:
        return not self.do_sample or self.temperature == 0


def apply_repetition_penalty(logits, seen, penalty: float):
    """Divide positive (multiply negative) scores of the tokens in `seen` (batch, len) by `penalty`."""
    if penalty == 1.0:
        return logits
    scores = logits.gather(-1, seen)
    scores = torch.where(scores < 0, scores * penalty, scores / penalty)
    return logits.scatter(-1, seen, scores)


def top_k_filter(logits, k: int):
    """Keep the k highest scores of each row; the rest become -inf."""
    if k <= 0 or k >= logits.size(-1):
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits, p: float):
    """Nucleus sampling: keep the most likely tokens until their probability mass reaches p."""
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # mass of the tokens ranked above each one
    drop = before >= p
    drop[..., 0] = False  # the most likely token always stays: a p that rounds to 0 in float32 removed it too
    remove = drop.scatter(-1, order, drop)
    return logits.masked_fill(remove, float("-inf"))


def next_token(logits, options: SamplingOptions, seen, generator=None):
    """Choose one token per row from the last position's logits (batch, vocab)."""
    logits = apply_repetition_penalty(logits, seen, options.repetition_penalty)
    if options.greedy:
        return logits.argmax(-1)
    # shifted so the largest is 0, and the temperature no smaller than the dtype's least normal number
    # (1e-300 is 0 in float32): a tiny temperature then sends the rest to -inf, the largest staying 0,
    # where dividing the raw logits overflowed to inf and the softmax gave NaN
    temperature = max(options.temperature, torch.finfo(logits.dtype).tiny)
    logits = (logits - logits.max(-1, keepdim=True).values) / temperature
    logits = top_p_filter(top_k_filter(logits, options.top_k), options.top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device=None):
    """(ids, attention_mask) of shape (batch, longest); attention_mask is None when nothing is padded."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), longest, dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, longest - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
        mask[row, longest - len(p):] = 1
    padded = bool((mask == 0).any())
    return ids.to(device), (mask.to(device) if padded else None)


def unpad(ids, attention_mask) -> list[list[int]]:
    """Rows of a padded (batch, len) tensor — left or right padded — as lists of real tokens."""
    if attention_mask is None:
        return ids.tolist()
    return [row[m.bool()].tolist() for row, m in zip(ids, attention_mask)]


def _stopped_by_string(tokens, decode, stops) -> bool:
    return bool(stops) and any(s in decode(tokens) for s in stops)


def truncate_at_stop(text: str, stops) -> str:
    """The text before the first stop string, if any occurs."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=len(text))
    return text[:cut]


@torch.inference_mode()
def generate(model, prompts, options: SamplingOptions = SamplingOptions(), *, decode: Callable | None = None,
             on_token: Callable | None = None, use_cache: bool = True, generator=None, pad_id: int = 0,
             attention_mask=None, prepack: bool = True) -> list[list[int]]:
    """The new tokens of each prompt (a list of token-id lists, or a padded (batch, len) tensor with
    its attention_mask). A row ends at eos (kept) or when a stop string appears in its text.
    on_token(row, token_id) is called for every new token, in order, for streaming.

    prepack: let the model prepack its weights for this batch size (GPT.prepack_for_decoding: faster
    steps on MKL CPUs; the packed copy, as large as the weights, stays until model.drop_prepacked() or a
    weight change, so the next call with the same batch size pays nothing)."""
    if isinstance(prompts, torch.Tensor):
        prompts = unpad(prompts, attention_mask)
    if options.stop and decode is None:
        raise ValueError("stop strings need a decode function")
    device = next(model.parameters()).device
    ids, mask = left_pad(prompts, pad_id, device)
    batch, prompt_len = ids.shape
    if prompt_len + options.max_new_tokens > model.config.n_positions:
        raise ValueError(f"prompt of {prompt_len} tokens + {options.max_new_tokens} new tokens exceeds the "
                         f"model's {model.config.n_positions} positions")
    step = _Stepper(model, ids, mask, use_cache, prompt_len + options.max_new_tokens)
    out = [[] for _ in range(batch)]
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    logits = step.first()
    if prepack and use_cache and hasattr(model, "prepack_for_decoding"):
        model.prepack_for_decoding(batch)  # every later call feeds `batch` rows; kept for the next call
    for _ in range(options.max_new_tokens):
        token = next_token(logits, options, step.seen(), generator).masked_fill(done, pad_id)
        _record(token, done, out, options, decode, on_token)
        if bool(done.all()):
            break
        logits = step.next(token)
    return out


def _record(token, done, out, options, decode, on_token):
    for row, t in enumerate(token.tolist()):
        if done[row]:
            continue
        out[row].append(t)
        if on_token is not None:
            on_token(row, t)
        if t == options.eos_token_id or _stopped_by_string(out[row], decode, options.stop):
            done[row] = True


class _Stepper:
    """Feeds the model: the prompt first, then one token per call (or the whole text, uncached)."""

    def __init__(self, model, ids, mask, use_cache, max_len):
        self.model, self.ids, self.mask = model, ids, mask
        self.cache = model.new_cache(max_len) if use_cache else None

    def seen(self):
        """The text so far, padding replaced by each row's newest token (for the repetition penalty)."""
        return self.ids if self.mask is None else self.ids.masked_fill(self.mask == 0, 0) + \
            (self.mask == 0) * self.ids[:, -1:]

    def _positions(self):
        if self.mask is None:
            return None
        return (self.mask.cumsum(-1) - 1).clamp(min=0)

    def first(self):
        return self.model(self.ids, cache=self.cache, attention_mask=self.mask,
                          positions=self._positions(), last_only=True)[0][:, -1]

    def next(self, token):
        self.ids = torch.cat([self.ids, token[:, None]], dim=1)
        if self.mask is not None:
            self.mask = torch.cat([self.mask, self.mask.new_ones(self.mask.size(0), 1)], dim=1)
        if self.cache is None:
            return self.first()
        positions = self._positions()
        positions = None if positions is None else positions[:, -1:]
        return self.model(token[:, None], cache=self.cache, attention_mask=self.mask,
                          positions=positions, last_only=True)[0][:, -1]


class TextStream:
    """The text of one row's new tokens, handed out piece by piece as they are made (for streaming):
    `add(token)` returns the text that is now certain. It holds back a half-made character (a byte
    BPE token can end mid-UTF-8, decoded as U+FFFD) and the tail that could be the start of a stop
    string; `finish()` returns the rest, cut at the first stop string."""

    def __init__(self, decode: Callable, stops=()):
        self.decode, self.stops, self.ids, self.shown = decode, tuple(stops), [], 0

    def add(self, token: int) -> str:
        self.ids.append(token)
        text = self.decode(self.ids)
        safe = truncate_at_stop(text, self.stops) if self.stops else text
        hold = max((len(s) - 1 for s in self.stops), default=0)  # a stop string may be half made
        end = len(safe) if len(safe) < len(text) else len(safe) - hold
        while end > self.shown and safe[end - 1] == "\ufffd":
            end -= 1
        if end <= self.shown:
            return ""
        piece, self.shown = safe[self.shown:end], end
        return piece

    def finish(self) -> str:
        rest = truncate_at_stop(self.decode(self.ids), self.stops)[self.shown:]
        self.shown += len(rest)
        return rest


def load_generator(model_dir, device: str = "auto", int8: bool = False):
    """The LoadedModel of a GPT folder (HF GPT-2 layout), or a LoadedModel, on `device`;
    int8 (CPU only) swaps its linear layers for dynamic int8 ones."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from .int8 import check_int8_settings, quantize_int8
    device = pick_device(device)
    if int8:
        check_int8_settings(device)
    loaded = load_model_of(model_dir, ("gpt",), "generate", device)
    if int8:
        quantize_int8(loaded.model)
    return loaded


def check_fits(ids, new_tokens: int, positions: int, where: str):
    """A prompt and its new tokens must fit the model's positions: refuse rather than cut the prompt."""
    if ids and len(ids) + new_tokens > positions:
        room = positions - len(ids)
        advice = f"use -n {room} or less, or a shorter prompt" if room > 0 else "the prompt alone fills them"
        raise ValueError(f"{where}: the prompt has {len(ids)} tokens; with -n {new_tokens} new ones that exceeds "
                         f"the model's {positions} positions ({advice})")


def generate_prompt(model_dir: str, prompt: str, options: SamplingOptions, on_text: Callable[[str], None],
                    seed: int = 0, device: str = "auto", int8: bool = False, prepack: bool = True) -> str:
    """Continue one prompt, streaming: on_text gets the prompt (once the model is loaded and the prompt
    checked), then each piece of the continuation as it becomes certain (TextStream). Returns the
    whole text, prompt included. The tokenizer's EOS ends the continuation."""
    import dataclasses
    loaded = load_generator(model_dir, device, int8)
    model, tokenizer = loaded.model, loaded.tokenizer
    options = dataclasses.replace(options, eos_token_id=getattr(tokenizer, "eos_token_id", None))
    ids = tokenizer.encode(prompt) if prompt.strip() else []
    check_fits(ids, options.max_new_tokens, model.config.n_positions, "PROMPT")
    stream, shown = TextStream(tokenizer.decode, options.stop), [prompt]
    on_text(prompt)

    def on_token(row, token):
        piece = stream.add(token)
        if piece:
            shown.append(piece)
            on_text(piece)
    generate(model, [ids], options, decode=tokenizer.decode, on_token=on_token,
             generator=torch.Generator().manual_seed(seed), prepack=prepack)
    shown.append(stream.finish())
    on_text(shown[-1])
    return "".join(shown)


def generate_file(model_dir: str, prompts_file: str, options: SamplingOptions, batch_size: int = 8, seed: int = 0,
                  device: str = "auto", int8: bool = False, prepack: bool = True):
    """The output lines of a prompts file (one prompt a line), in input order, yielded batch by batch:
    each is the prompt and its continuation, newlines in the continuation written as \\n; a blank
    prompt gives a blank line. Every prompt is checked to fit before the first line is yielded."""
    import dataclasses
    from ..tokenization.files import text_lines
    prompts = text_lines(prompts_file)  # a CRLF file's "\r" is its line end, not the prompt's last character
    loaded = load_generator(model_dir, device, int8)
    model, tokenizer = loaded.model, loaded.tokenizer
    options = dataclasses.replace(options, eos_token_id=getattr(tokenizer, "eos_token_id", None))
    encoded = [tokenizer.encode(p) if p.strip() else [] for p in prompts]
    for number, ids in enumerate(encoded, 1):
        check_fits(ids, options.max_new_tokens, model.config.n_positions, f"{prompts_file}:{number}")
    return _generate_lines(model, tokenizer, prompts, encoded, options, batch_size, seed, prepack)


def _generate_lines(model, tokenizer, prompts, encoded, options, batch_size, seed, prepack):
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, len(prompts), batch_size):
        batch = range(start, min(start + batch_size, len(prompts)))
        real = [i for i in batch if encoded[i]]
        outs = generate(model, [encoded[i] for i in real], options, decode=tokenizer.decode, generator=gen,
                        prepack=prepack) if real else []
        continuation = dict(zip(real, outs))
        for i in batch:
            text = truncate_at_stop(tokenizer.decode(continuation[i]), options.stop) if i in continuation else ""
            yield prompts[i] + text.replace("\n", "\\n")
