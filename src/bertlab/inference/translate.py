"""Translation with a Seq2SeqTransformer: batched greedy decoding and beam search.

Both encode the source once and extend the target one token per step. With `use_cache=True` (the
default) each step feeds only the newest token and the decoder appends its keys and values to a
cache, so a step costs one position; `use_cache=False` recomputes the whole prefix every step (the
reference the tests compare against).

Output length: a sentence's hypothesis has at most min(max_len, a * source_len + b) tokens before
EOS (source_len counts its real tokens including EOS; fairseq's --max-len-a/--max-len-b), and never
more than the model's positions allow. The limit is per sentence, so a translation does not depend
on the other sentences of its batch.
"""
import math
from dataclasses import dataclass

import torch

from .. import validate


@dataclass(frozen=True)
class Hypothesis:
    tokens: list          # target ids, without BOS and EOS
    score: float          # log_prob / length ** length_penalty (what beams are ranked by)
    log_prob: float       # sum of the log-probabilities of the tokens and the final EOS


def length_limits(model, src, max_len=None, max_len_a=2.0, max_len_b=10) -> torch.Tensor:
    """(batch,) the most target tokens (EOS excluded) each sentence may get."""
    src_len = (src != model.config.pad_token_id).sum(1)
    limits = (max_len_a * src_len + max_len_b).floor().long()
    cap = model.config.max_position_embeddings - 1  # BOS takes a position; a forced EOS is never fed
    if max_len is not None:
        cap = min(cap, max_len)
    return limits.clamp(min=0, max=cap)


def _step_logits(model, tokens, memory, src_mask, cache):
    """Next-token logits (rows, vocab) after `tokens` (rows, len)."""
    if cache is not None:
        return model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]
    return model.decode(tokens, memory, src_mask, last_only=True)[:, -1]


def _keep_sources(rows, memory, src_mask, cache):
    """Drop finished sentences' sources (encoder output, mask, encoder-decoder keys and values):
    keep batch rows `rows`, in that order. The self-attention caches are reordered by the caller."""
    if cache is not None:
        cache.reorder_sources(rows)
    return memory.index_select(0, rows), src_mask.index_select(0, rows)


@torch.no_grad()
def greedy_decode(model, src, max_len=None, max_len_a=2.0, max_len_b=10, use_cache=True) -> list[list[int]]:
    """The most likely token at every step, for a batch of padded sources (batch, src_len).
    A sentence leaves the batch once it has its EOS or reaches its length limit."""
    c, was_training = model.config, model.training
    model.eval()
    memory, src_mask = model.encode(src)
    limits = length_limits(model, src, max_len, max_len_a, max_len_b).tolist()
    out = [[] for _ in limits]
    alive = [b for b, limit in enumerate(limits) if limit > 0]  # the sentence in each batch row
    if len(alive) < len(limits):
        memory, src_mask = memory[alive], src_mask[alive]
    tokens = torch.full((len(alive), 1), c.bos_token_id, dtype=torch.long, device=src.device)
    cache = model.new_cache(max(limits) + 1) if use_cache and alive else None
    step = 0
    while alive:
        next_token = _step_logits(model, tokens, memory, src_mask, cache).argmax(-1)
        step += 1
        still = []
        for i, (b, t) in enumerate(zip(alive, next_token.tolist())):
            if t != c.eos_token_id:
                out[b].append(t)
            if t != c.eos_token_id and step < limits[b]:
                still.append(i)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if len(still) < len(alive):
            rows = torch.tensor(still, dtype=torch.long, device=src.device)
            tokens = tokens.index_select(0, rows)
            memory, src_mask = _keep_sources(rows, memory, src_mask, cache)
            if cache is not None:
                cache.reorder(rows)
            alive = [alive[i] for i in still]
    model.train(was_training)
    return out


@torch.no_grad()
def beam_search(model, src, beam_size=4, length_penalty=1.0, max_len=None, max_len_a=2.0, max_len_b=10,
                nbest=1, use_cache=True) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses of each source sentence, best first.

    A hypothesis is scored by its log-probability divided by length ** length_penalty, where length
    counts its tokens and the EOS (fairseq's --lenpen; 1.0 ranks by mean log-probability per token,
    0.0 by the plain sum, which favours short outputs). Each step keeps the best `beam_size` of
    every live beam's continuations; a continuation that ends in EOS among the best `beam_size` is
    finished and not expanded further. A sentence is done once it has `beam_size` finished
    hypotheses (fairseq's rule) or reaches its length limit, where EOS is forced; a done sentence
    leaves the batch (its rows of the cache too), and the search stops when none is left.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be between 1 and the beam size {beam_size}, got {nbest}")
    c, was_training = model.config, model.training
    model.eval()
    batch, k, device = src.size(0), beam_size, src.device
    memory, src_mask = model.encode(src)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)  # row i*k+j: beam j
    limits = length_limits(model, src, max_len, max_len_a, max_len_b).tolist()
    alive = list(range(batch))  # the sentence in each group of k rows
    tokens = torch.full((batch * k, 1), c.bos_token_id, dtype=torch.long, device=device)
    # Every beam starts as the same empty prefix: only beam 0 may expand at the first step.
    scores = torch.full((batch, k), -math.inf, device=device)
    scores[:, 0] = 0.0
    finished = [[] for _ in range(batch)]
    cache = model.new_cache(max(limits) + 1) if use_cache and batch else None
    beams = torch.arange(k, device=device)
    step = 0
    while alive:
        n = len(alive)
        log_probs = _step_logits(model, tokens, memory, src_mask, cache).float().log_softmax(-1)
        at_limit = [i for i, b in enumerate(alive) if step >= limits[b]]  # `step` tokens made: only EOS
        if at_limit:
            limit_rows = (torch.tensor(at_limit, device=device)[:, None] * k + beams).view(-1)
            eos = log_probs[limit_rows, c.eos_token_id]
            log_probs[limit_rows] = -math.inf
            log_probs[limit_rows, c.eos_token_id] = eos
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(n, k * vocab)
        # 2k candidates: each beam offers at most one EOS, so at least k of them continue.
        top_scores, top_index = candidates.topk(2 * k, dim=1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token == c.eos_token_id
        _finish(finished, alive, tokens, top_scores, top_beam, is_eos, k, step, length_penalty)
        # The best k candidates that do not end in EOS become the next beams.
        rank = torch.arange(2 * k, device=device) + is_eos * 2 * k
        keep = rank.topk(k, dim=1, largest=False).indices
        rows = torch.arange(n, device=device)[:, None] * k + top_beam.gather(1, keep)
        scores, next_token = top_scores.gather(1, keep), top_token.gather(1, keep)
        step += 1
        still = [i for i, b in enumerate(alive) if len(finished[b]) < k and step <= limits[b]]
        if len(still) < n:  # done sentences leave the batch
            kept = torch.tensor(still, dtype=torch.long, device=device)
            rows, scores, next_token = rows[kept], scores[kept], next_token[kept]
            memory, src_mask = _keep_sources((kept[:, None] * k + beams).view(-1), memory, src_mask, cache)
            alive = [alive[i] for i in still]
        rows = rows.view(-1)
        tokens = torch.cat([tokens[rows], next_token.view(-1, 1)], dim=1)
        if cache is not None:
            cache.reorder(rows)
    model.train(was_training)
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _finish(finished, alive, tokens, top_scores, top_beam, is_eos, k, step, length_penalty):
    """Record the EOS candidates among each live sentence's best k as finished hypotheses."""
    length = step + 1  # the tokens made so far and this EOS
    for i, j in is_eos[:, :k].nonzero().tolist():
        b, score = alive[i], float(top_scores[i, j])
        if len(finished[b]) >= k or score == -math.inf:
            continue
        prefix = tokens[i * k + int(top_beam[i, j]), 1:].tolist()
        finished[b].append(Hypothesis(prefix, score / length ** length_penalty, score))


def check_search_memory(model, rows: int, sentences: int, beam: int, source_len: int, target_len: int, *,
                        width: int, layers: int, vocab: int):
    """Refuse a search whose memory would pass the limit (validate.check_memory), before its first
    step allocates it: `rows` = sentences x beam, each with a self-attention cache of `target_len`
    positions in every one of `layers` decoder layers (keys and values, `width` wide; beam search
    keeps a second pair of buffers to reorder into), the source's keys and values (`source_len`
    positions), and three (rows x vocab) float32 tables of scores a step. A --beam of 1,024 over a
    batch of 32 sentences is 32,768 rows: tens of GB for a base model."""
    param = next(model.parameters(), None)
    element = param.element_size() if param is not None and param.is_floating_point() else 4
    pairs = 4 if beam > 1 else 2
    cache = rows * layers * (pairs * target_len + 2 * source_len) * width * element
    scores = 3 * rows * vocab * 4
    validate.check_memory(f"a search of beam {beam} over {sentences} sentences ({rows:,} rows, sources of {source_len} "
                          f"and targets of up to {target_len} tokens) needs its caches and scores", cache + scores,
                          advice="use a smaller --beam or --batch-size (or pass --max-model-gb to allow it)")


def max_source_tokens(config) -> int:
    """The longest source (in tokens, without its EOS) the model's positions hold."""
    return config.max_position_embeddings - 1


def translate_ids(model, source_ids: list[list[int]], beam_size=1, nbest=1, length_penalty=1.0, batch_size=32,
                  max_len=None, max_len_a=2.0, max_len_b=10) -> list[list[Hypothesis]]:
    """Hypotheses for many sources (id lists without EOS), in input order. Sources are sorted by
    length into batches of `batch_size` so that little is padded. Beam size 1 is greedy decoding,
    whose hypotheses carry no scores (NaN). An empty source (a blank line) gets `nbest` empty
    hypotheses without decoding: the model would invent a sentence for it. A source longer than
    `max_source_tokens` is an error; the caller decides whether to cut it."""
    validate.beam_size("beam_size", beam_size)
    validate.check_number("nbest", nbest, integer=True, minimum=1, maximum=beam_size)
    validate.check_number("length_penalty", length_penalty)
    validate.positive_int("batch_size", batch_size)
    validate.positive_int("max_len", max_len, optional=True)
    validate.nonnegative_float("max_len_a", max_len_a)
    validate.nonnegative_int("max_len_b", max_len_b)
    c = model.config
    longest = max_source_tokens(c)
    too_long = next((i for i, ids in enumerate(source_ids) if len(ids) > longest), None)
    if too_long is not None:
        raise ValueError(f"source {too_long} has {len(source_ids[too_long])} tokens, more than the model's "
                         f"{longest} (max_position_embeddings {c.max_position_embeddings}, one for EOS)")
    device = next(model.parameters()).device
    results = [[Hypothesis([], math.nan, math.nan)] * nbest for _ in source_ids]
    order = sorted((i for i in range(len(source_ids)) if source_ids[i]), key=lambda i: len(source_ids[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        src = torch.full((len(rows), max(len(source_ids[i]) for i in rows) + 1), c.pad_token_id, dtype=torch.long)
        for r, i in enumerate(rows):
            src[r, :len(source_ids[i]) + 1] = torch.tensor(source_ids[i] + [c.eos_token_id])
        src, limits = src.to(device), dict(max_len=max_len, max_len_a=max_len_a, max_len_b=max_len_b)
        check_search_memory(model, len(rows) * beam_size, len(rows), beam_size, src.size(1),
                            int(length_limits(model, src, **limits).max()) + 1, width=c.d_model,
                            layers=c.decoder_layers, vocab=c.target_vocab_size)
        if beam_size == 1 and nbest == 1:
            out = [[Hypothesis(t, math.nan, math.nan)] for t in greedy_decode(model, src, **limits)]
        else:
            out = beam_search(model, src, beam_size, length_penalty, nbest=nbest, **limits)
        for i, hyps in zip(rows, out):
            results[i] = hyps
    return results


@dataclass
class FileTranslation:
    """What translate_file made: per input line its hypotheses (best first) and their texts; the
    numbers (from 1) of the lines cut to fit; with references, sacreBLEU's BLEU and chrF."""
    hypotheses: list          # list[list[Hypothesis]]
    texts: list               # list[list[str]], the decoded hypotheses
    cut: list                 # line numbers cut to `longest` source tokens
    longest: int              # the model's source tokens
    bleu: object = None       # sacrebleu BLEUScore of the best translations, with references
    chrf: object = None

    @property
    def best(self) -> list[str]:
        return [texts[0] for texts in self.texts]


def translate_file(model_dir: str, file: str = "-", beam: int = 4, nbest: int = 1, length_penalty: float = 1.0,
                   batch_size: int = 32, max_len: int | None = None, max_len_a: float = 2.0, max_len_b: int = 10,
                   ref: str | None = None, device: str = "auto", int8: bool = False) -> FileTranslation:
    """Translate every line of `file` ('-': standard input) with a translate-train model folder.
    A line longer than the model's positions is cut to fit (listed in .cut); a blank line gets an
    empty translation. With `ref` (line-aligned references), the best translations are scored."""
    from ..device import pick_device
    from ..interop.load import load_model_of
    from ..interop.translation_folder import bleu_tokenize
    from ..tokenization.files import text_lines
    from .int8 import check_int8_settings, quantize_int8
    device = pick_device(device)
    if int8:
        check_int8_settings(device)
    loaded = load_model_of(model_dir, ("translation",), "translate", device)
    model, source = loaded.model, loaded.tokenizer
    target, settings = loaded.extra["target_tokenizer"], loaded.extra["settings"]
    if int8:
        quantize_int8(model)
    lines = text_lines(file, allow_empty_file=True)  # CRLF ends: the "\r" is no part of the text
    refs = text_lines(ref, allow_empty_file=True) if ref else None
    if refs is not None and len(refs) != len(lines):
        raise ValueError(f"{ref} has {len(refs)} lines, the input {len(lines)}")
    if refs is not None and not lines:
        raise ValueError(f"{'stdin' if file == '-' else file}: no lines, so nothing to score against {ref}")
    longest = max_source_tokens(model.config)
    sources = [source.encode(line) for line in lines]
    cut = [number for number, ids in enumerate(sources, 1) if len(ids) > longest]
    with torch.inference_mode():
        results = translate_ids(model, [ids[:longest] for ids in sources], beam, nbest, length_penalty, batch_size,
                                max_len, max_len_a, max_len_b)
    done = FileTranslation(results, [[target.decode(h.tokens) for h in hyps] for hyps in results], cut, longest)
    if refs is not None:
        import sacrebleu
        tokenize = settings.get("bleu_tokenize", bleu_tokenize(settings.get("target_lang")))
        done.bleu = sacrebleu.corpus_bleu(done.best, [refs], tokenize=tokenize)
        done.chrf = sacrebleu.corpus_chrf(done.best, [refs])
    return done
