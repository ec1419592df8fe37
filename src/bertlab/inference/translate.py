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


@torch.no_grad()
def greedy_decode(model, src, max_len=None, max_len_a=2.0, max_len_b=10, use_cache=True) -> list[list[int]]:
    """The most likely token at every step, for a batch of padded sources (batch, src_len)."""
    c, was_training = model.config, model.training
    model.eval()
    memory, src_mask = model.encode(src)
    limits = length_limits(model, src, max_len, max_len_a, max_len_b)
    steps = int(limits.max()) if len(limits) else 0
    tokens = torch.full((src.size(0), 1), c.bos_token_id, dtype=torch.long, device=src.device)
    done = limits == 0
    cache = model.new_cache(steps + 1) if use_cache else None
    for step in range(steps):
        if done.all():
            break
        next_token = _step_logits(model, tokens, memory, src_mask, cache).argmax(-1)
        next_token = next_token.masked_fill(done, c.pad_token_id)  # finished rows only wait
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done |= (next_token == c.eos_token_id) | (step + 1 >= limits)
    model.train(was_training)
    return [_strip(row[1:].tolist(), c.eos_token_id, c.pad_token_id) for row in tokens]


def _strip(ids, eos, pad):
    for i, t in enumerate(ids):
        if t == eos or t == pad:
            return ids[:i]
    return ids


@torch.no_grad()
def beam_search(model, src, beam_size=4, length_penalty=1.0, max_len=None, max_len_a=2.0, max_len_b=10,
                nbest=1, use_cache=True) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses of each source sentence, best first.

    A hypothesis is scored by its log-probability divided by length ** length_penalty, where length
    counts its tokens and the EOS (fairseq's --lenpen; 1.0 ranks by mean log-probability per token,
    0.0 by the plain sum, which favours short outputs). Each step keeps the best `beam_size` of
    every live beam's continuations; a continuation that ends in EOS among the best `beam_size` is
    finished and not expanded further. A sentence is done once it has `beam_size` finished
    hypotheses (fairseq's rule) or reaches its length limit, where EOS is forced; the search stops
    when every sentence is done.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be between 1 and the beam size {beam_size}, got {nbest}")
    c, was_training = model.config, model.training
    model.eval()
    batch, k = src.size(0), beam_size
    memory, src_mask = model.encode(src)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)  # row b*k+j: beam j
    limits = length_limits(model, src, max_len, max_len_a, max_len_b)
    tokens = torch.full((batch * k, 1), c.bos_token_id, dtype=torch.long, device=src.device)
    # Every beam starts as the same empty prefix: only beam 0 may expand at the first step.
    scores = torch.full((batch, k), -math.inf, device=src.device)
    scores[:, 0] = 0.0
    finished = [[] for _ in range(batch)]
    done = [False] * batch
    cache = model.new_cache(int(limits.max()) + 1) if use_cache and batch else None
    offsets = (torch.arange(batch, device=src.device) * k)[:, None]
    step = 0
    while not all(done):
        log_probs = _step_logits(model, tokens, memory, src_mask, cache).float().log_softmax(-1)
        at_limit = (step >= limits).repeat_interleave(k)  # `step` tokens made: only EOS may follow
        if at_limit.any():
            eos_only = torch.full_like(log_probs[0], -math.inf)
            eos_only[c.eos_token_id] = 0.0
            log_probs[at_limit] = log_probs[at_limit] + eos_only
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(batch, k * vocab)
        # 2k candidates: each beam offers at most one EOS, so at least k of them continue.
        top_scores, top_index = candidates.topk(2 * k, dim=1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token == c.eos_token_id
        _finish(finished, done, tokens, top_scores, top_beam, is_eos, k, step, length_penalty)
        for b in range(batch):
            done[b] = done[b] or len(finished[b]) >= k or bool(step >= limits[b])
        # The best k candidates that do not end in EOS become the next beams.
        rank = torch.arange(2 * k, device=src.device) + is_eos * 2 * k
        keep = rank.topk(k, dim=1, largest=False).indices
        rows = (offsets + top_beam.gather(1, keep)).view(-1)
        scores = top_scores.gather(1, keep)
        tokens = torch.cat([tokens[rows], top_token.gather(1, keep).view(-1, 1)], dim=1)
        if cache is not None:
            # The encoder-decoder caches stay: every beam of a sentence holds the same source.
            for layer in cache:
                layer["self"].reorder(rows)
        step += 1
    model.train(was_training)
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _finish(finished, done, tokens, top_scores, top_beam, is_eos, k, step, length_penalty):
    """Record the EOS candidates among each live sentence's best k as finished hypotheses."""
    length = step + 1  # the tokens made so far and this EOS
    for b, j in is_eos[:, :k].nonzero().tolist():
        score = float(top_scores[b, j])
        if done[b] or len(finished[b]) >= k or score == -math.inf:
            continue
        prefix = tokens[b * k + int(top_beam[b, j]), 1:].tolist()
        finished[b].append(Hypothesis(prefix, score / length ** length_penalty, score))


def translate_ids(model, source_ids: list[list[int]], beam_size=1, nbest=1, length_penalty=1.0, batch_size=32,
                  max_len=None, max_len_a=2.0, max_len_b=10) -> list[list[Hypothesis]]:
    """Hypotheses for many sources (id lists without EOS), in input order. Sources are sorted by
    length into batches of `batch_size` so that little is padded. Beam size 1 is greedy decoding,
    whose hypotheses carry no scores (NaN)."""
    c = model.config
    device = next(model.parameters()).device
    order = sorted(range(len(source_ids)), key=lambda i: len(source_ids[i]))
    results = [None] * len(source_ids)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        src = torch.full((len(rows), max(len(source_ids[i]) for i in rows) + 1), c.pad_token_id, dtype=torch.long)
        for r, i in enumerate(rows):
            src[r, :len(source_ids[i]) + 1] = torch.tensor(source_ids[i] + [c.eos_token_id])
        src, limits = src.to(device), dict(max_len=max_len, max_len_a=max_len_a, max_len_b=max_len_b)
        if beam_size == 1 and nbest == 1:
            out = [[Hypothesis(t, math.nan, math.nan)] for t in greedy_decode(model, src, **limits)]
        else:
            out = beam_search(model, src, beam_size, length_penalty, nbest=nbest, **limits)
        for i, hyps in zip(rows, out):
            results[i] = hyps
    return results
