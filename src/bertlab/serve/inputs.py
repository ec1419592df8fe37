"""No silent truncation: every input is measured in the model's tokens before it is queued.

An input longer than what the model reads is refused (413, naming the input and its token count)
unless the request says `"truncate": true`; then it is cut (for embeddings at the end, or with TEI's
`truncation_direction` at the start) and the answer says how many inputs were cut. The counts also
size each job for the batcher's token budget (--max-batch-tokens).

The cutting is the library's own where the library cuts (a fine-tuned classifier's featurize, a
squad question at max_query_length); where the library refuses instead (fill-mask, attention), a
cut is not offered: it could drop the [MASK], or the words whose attention was asked for."""
from dataclasses import dataclass

from ..inference.features import convert_example, read_examples
from ..inference.fill_mask import encode_masked
from ..inference.translate import max_source_tokens
from .errors import APIError


@dataclass
class Fitted:
    """What the model reads, one id list per input, and how many inputs were cut to fit."""
    sequences: list
    cut: int = 0

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sequences)


def refuse_or_cut(lengths, limit: int, truncate: bool, what: str, name=lambda i: f"input {i}",
                  param: str | None = "input", cuttable: str | None = None) -> list[int]:
    """The indices of the inputs longer than `limit` (to be cut); a 413 for the first of them when
    the request did not ask for truncation, or when `cuttable` says why this task never cuts."""
    over = [i for i, n in enumerate(lengths) if n > limit]
    if over and (not truncate or cuttable):
        i = over[0]
        more = f" ({len(over) - 1} more too)" if len(over) > 1 else ""
        advice = cuttable or 'send a shorter input, or "truncate": true to have it cut'
        raise APIError(413, f"{name(i)} has {lengths[i]} tokens, more than {what} of {limit}{more}; {advice}",
                       param=param)
    return over


def embed_limit(loaded) -> int:
    """The most tokens (with [CLS] and [SEP]) an embedding reads: what the checkpoint is meant to read
    (a sentence-transformers model's max_seq_length), as embed_texts cuts by default."""
    limit = loaded.encoder.config.max_position_embeddings
    return min(getattr(loaded.tokenizer, "model_max_length", None) or limit, limit)


def fit_pieces(loaded, pieces: list[list[int]], truncate: bool, direction: str = "right",
               name=lambda i: f"input {i}", param: str | None = "input") -> Fitted:
    """[CLS] pieces [SEP] of each input (word-piece ids without special tokens), as embed_texts
    builds them; a blank input (no pieces) is [], which embed_ids makes an all-zero row."""
    tokenizer, limit = loaded.tokenizer, embed_limit(loaded)
    over = set(refuse_or_cut([len(p) + 2 for p in pieces], limit, truncate, "the model's limit", name, param))
    room = limit - 2
    sequences = []
    for i, p in enumerate(pieces):
        if i in over:
            p = p[:room] if direction == "right" else p[len(p) - room:]
        sequences.append([tokenizer.cls_token_id, *p, tokenizer.sep_token_id] if p else [])
    return Fitted(sequences, len(over))


def fit_texts(loaded, texts: list[str], truncate: bool, direction: str = "right", name=lambda i: f"input {i}",
              param: str | None = "input") -> Fitted:
    return fit_pieces(loaded, loaded.tokenizer.tokenize_ids_batch(texts, add_special_tokens=False), truncate,
                      direction, name, param)


def check_token_ids(loaded, ids_lists: list[list[int]], param: str = "input"):
    size = loaded.encoder.config.vocab_size
    for i, ids in enumerate(ids_lists):
        bad = next((t for t in ids if not 0 <= t < size), None)
        if bad is not None:
            raise APIError(400, f"input[{i}] holds the token id {bad}; this model's ids run from 0 to {size - 1}",
                           param=param)


def fit_classify(task, tokenizer, texts: list[str], texts_b: list[str] | None, truncate: bool) -> tuple[int, int]:
    """(tokens read, inputs cut) of a fine-tuned classifier's inputs; the cutting is featurize's.
    texts_b count only for a model trained on pairs (examples_from_inputs reads them only then)."""
    a = tokenizer.tokenize_ids_batch(texts, add_special_tokens=False)
    pairs = getattr(getattr(task, "format", None), "text_b", None) is not None
    if texts_b is None or not pairs:
        lengths = [len(p) + 2 for p in a]
        if task.options.get("long_inputs") == "windows":  # read whole, window by window
            return sum(lengths), 0
    else:
        b = tokenizer.tokenize_ids_batch(texts_b, add_special_tokens=False)
        lengths = [len(x) + len(y) + 3 for x, y in zip(a, b)]
    limit = task.max_seq_length
    over = refuse_or_cut(lengths, limit, truncate, "the model's max_seq_length", lambda i: f"texts[{i}]", "texts")
    return sum(min(n, limit) for n in lengths), len(over)


def fit_question(task, tokenizer, question: str, context: str, truncate: bool) -> tuple[int, int]:
    """A squad question is cut at max_query_length by the library; the context is read whole, in windows."""
    n = len(tokenizer.tokenize_ids(question))
    limit = task.options["max_query_length"]
    over = refuse_or_cut([n], limit, truncate, "the model's max_query_length", lambda i: "the question", "question")
    return min(n, limit) + len(tokenizer.tokenize_ids(context)) + 3, len(over)


def fit_fill_mask(loaded, texts: list[str]) -> int:
    """Tokens of the texts (a text without [MASK] counts 0: the library refuses it, with its message)."""
    limit, lengths = loaded.model.config.max_position_embeddings, []
    for text in texts:
        try:
            lengths.append(len(encode_masked(loaded.tokenizer, text, 1 << 30)[0]))
        except ValueError:
            lengths.append(0)
    refuse_or_cut(lengths, limit, False, "the model's max_position_embeddings", lambda i: f"texts[{i}]", "texts",
                  cuttable="fill-mask does not cut texts (a cut could drop a [MASK]); send a shorter text")
    return sum(lengths)


def fit_attention(loaded, text: str) -> int:
    limit = loaded.encoder.config.max_position_embeddings
    n = len(convert_example(read_examples([text])[0], loaded.tokenizer, 1 << 30).tokens)
    refuse_or_cut([n], limit, False, "the model's max_position_embeddings", lambda i: "the text", "text",
                  cuttable="attention does not cut texts (its map would miss the words cut); send a shorter text")
    return n


def fit_sources(loaded, texts: list[str], truncate: bool) -> Fitted:
    """Source ids of a translation model (its EOS is added by translate_ids); cut at the end."""
    limit = max_source_tokens(loaded.model.config)
    sources = [loaded.tokenizer.encode(t) for t in texts]
    over = set(refuse_or_cut([len(s) for s in sources], limit, truncate,
                             "the model's limit (its positions less one for EOS)", lambda i: f"texts[{i}]", "texts"))
    return Fitted([s[:limit] if i in over else s for i, s in enumerate(sources)], len(over))


def fit_prompt(loaded, prompt: str, max_new_tokens: int, truncate: bool) -> Fitted:
    """A GPT prompt and its new tokens must fit the model's positions; a cut keeps the prompt's end
    (the continuation follows it)."""
    positions = loaded.model.config.n_positions
    room = positions - max_new_tokens
    if room < 1:
        raise APIError(422, f"max_new_tokens {max_new_tokens} leaves no room for a prompt in the model's "
                            f"{positions} positions", param="max_new_tokens")
    ids = loaded.tokenizer.encode(prompt)
    if len(ids) <= room:
        return Fitted([ids])
    if not truncate:
        raise APIError(413, f"the prompt has {len(ids)} tokens: with max_new_tokens {max_new_tokens} that exceeds "
                            f"the model's {positions} positions (room for {room} prompt tokens); send a shorter "
                            f'prompt, fewer max_new_tokens, or "truncate": true to keep its last {room} tokens',
                       param="prompt")
    return Fitted([ids[len(ids) - room:]], 1)
