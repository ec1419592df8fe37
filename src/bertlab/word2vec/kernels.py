"""word2vec's inner loop, compiled: one SGD update per example, as word2vec.c and gensim make them.

Per (input, target) example with k noise words, h the input's vector (skip-gram) or the mean of the
window's input vectors (CBOW), v_w the output vector of word w:

    for w in [target, noise_1, ..., noise_k]   (a noise word equal to the target is skipped)
        label = 1 for the target, 0 for noise;  f = h . v_w
        g = alpha * (label - sigma(f))           the loss -log sigma(+-f) is summed for the log
        work += g * v_w                          (h's gradient, applied after the loop)
        v_w  += g * h
    h's words += work                            (CBOW: each window word takes the whole of it)

The same update as autograd's SGD step on models/word2vec.py's loss for one example
(tests/test_word2vec.py checks it), made in place on the model's float32 tables, one example after
the other: a frequent word's next example reads its vector as the last one left it. That is why the
loop is compiled (numba) instead of batched through autograd: a batch sums many updates of the same
row computed from one stale value, which cost word2vec 4-5 points of WordSim-353 at 2,000 words a
step (docs/models/word2vec.md), and a small batch pays the engine's per-step cost many times over.

A chunk of the corpus is trained in three passes: subsampling (each occurrence kept with its word's
probability, the dropped ones removed before windows are drawn), each kept word's reduced window
1..window, then the examples. Random numbers come from word2vec.c's 48-bit linear congruential
generator, seeded per chunk (and per worker) from the objective's numpy generator, so one worker
repeats a run exactly. With `workers` > 1 the chunk's centre words are split into that many
contiguous parts trained at once on shared tables without locks (word2vec.c's and gensim's
"Hogwild"): faster, and no longer bit-for-bit repeatable.
"""
import math

import numba
import numpy as np
from numba import njit, prange

_MUL, _ADD, _MASK = np.uint64(25214903917), np.uint64(11), np.uint64((1 << 48) - 1)
_SHIFT, _LOW32 = np.uint64(16), np.uint64(0xFFFFFFFF)


@njit(inline="always")
def _next(r):
    return (r * _MUL + _ADD) & _MASK


@njit(inline="always")
def _uniform(r):
    """A float in [0, 1) from the generator's upper 32 bits."""
    return float((r >> _SHIFT) & _LOW32) * (1.0 / 4294967296.0)


@njit(cache=True, nogil=True)
def subsample(ids, sentence, keep, window, seed):
    """(kept ids, their sentence numbers, each kept word's reach 1..window) of one chunk."""
    n = len(ids)
    kept_ids = np.empty(n, dtype=ids.dtype)
    kept_sentence = np.empty(n, dtype=sentence.dtype)
    r = np.uint64(seed) & _MASK
    m = 0
    for i in range(n):
        r = _next(r)
        if _uniform(r) < keep[ids[i]]:
            kept_ids[m] = ids[i]
            kept_sentence[m] = sentence[i]
            m += 1
    reach = np.empty(m, dtype=np.int32)
    for i in range(m):
        r = _next(r)
        reach[i] = window - np.int32((r >> _SHIFT) % np.uint64(window))
    return kept_ids[:m], kept_sentence[:m], reach


def alias_table(probabilities) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias method (Vose's construction) for drawing from `probabilities` in constant time:
    (threshold, alias), so that column i = a uniform draw of 0..n-1 gives i where a second uniform
    draw is below threshold[i], else alias[i]. Every word's total chance, summed over the columns,
    is its probability (tests/test_word2vec.py checks it); a binary search of the cumulative
    distribution, as gensim draws, took a quarter of a skip-gram step."""
    p = np.asarray(probabilities, dtype=np.float64)
    n = len(p)
    scaled = p * n / p.sum()
    threshold, alias = np.ones(n), np.arange(n, dtype=np.int64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        threshold[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return threshold, alias  # what is left holds 1 (up to rounding): it is always itself


@njit(inline="always")
def _draw(threshold, alias, r):
    """One word drawn by the alias table, and the generator's state after its two draws."""
    r = _next(r)
    column = np.int64(_uniform(r) * len(threshold))  # below len: the uniform is below 1 - 2^-33
    r = _next(r)
    return (column if _uniform(r) < threshold[column] else alias[column]), r


@njit(inline="always", fastmath=True)
def _example(syn1, h, work, target, noise, negative, alpha, r, words, gains):
    """One example's SGD step on the output vectors, its h-gradient added into `work` (every term
    computed from the vectors as the example found them, as autograd's step is): (loss, r).
    words and gains: scratch arrays of negative + 1."""
    dim = h.shape[0]
    # the loss, -sum log sigma(x), as minus the log of the product of the sigmas: one logarithm
    # an example rather than one an output word (which cost a third of the loop's time)
    product, n = 1.0, 0
    for d in range(negative + 1):
        if d == 0:
            w = target
        else:
            w, r = _draw(noise[0], noise[1], r)
            if w == target:
                continue
        out = syn1[w]
        f = np.float32(0.0)
        for k in range(dim):
            f += h[k] * out[k]
        x = float(f) if d == 0 else -float(f)  # the term's loss is -log sigma(x)
        e = math.exp(min(max(x, -30.0), 30.0))  # sigma(30) = 1 - 9e-14: beyond, nothing changes
        one_minus_sigma = 1.0 / (1.0 + e)
        product *= e * one_minus_sigma  # sigma(x)
        words[n] = w
        gains[n] = np.float32(alpha * one_minus_sigma * (1.0 if d == 0 else -1.0))
        n += 1
    for i in range(n):
        out, g = syn1[words[i]], gains[i]
        for k in range(dim):
            work[k] += g * out[k]
    for i in range(n):
        out, g = syn1[words[i]], gains[i]
        for k in range(dim):
            out[k] += g * h[k]
    return -math.log(product), r


@njit(inline="always")
def _scratch(dim, negative):
    """A part's buffers: h's gradient, and an example's output words and their gains."""
    return (np.empty(dim, dtype=np.float32), np.empty(negative + 1, dtype=np.int64),
            np.empty(negative + 1, dtype=np.float32))


@njit(cache=True, nogil=True, fastmath=True)
def _skipgram_part(syn0, syn1, ids, sentence, reach, lo, hi, noise, negative, alpha, seed):
    """Every example whose target is kept word lo..hi-1: each word of its window as the input."""
    dim, n = syn0.shape[1], len(ids)
    work, words, gains = _scratch(dim, negative)
    r = np.uint64(seed) & _MASK
    loss, examples = 0.0, 0
    for i in range(lo, hi):
        b = reach[i]
        for j in range(max(0, i - b), min(n, i + b + 1)):
            if j == i or sentence[j] != sentence[i]:
                continue
            h = syn0[ids[j]]
            work[:] = 0.0
            step_loss, r = _example(syn1, h, work, ids[i], noise, negative, alpha, r, words, gains)
            for k in range(dim):
                h[k] += work[k]
            loss += step_loss
            examples += 1
    return loss, examples


@njit(cache=True, nogil=True, fastmath=True)
def _cbow_part(syn0, syn1, ids, sentence, reach, lo, hi, noise, negative, alpha, seed):
    """Every example whose target is kept word lo..hi-1: the mean of its window's vectors as h."""
    dim, n = syn0.shape[1], len(ids)
    (work, words, gains), h = _scratch(dim, negative), np.empty(dim, dtype=np.float32)
    r = np.uint64(seed) & _MASK
    loss, examples = 0.0, 0
    for i in range(lo, hi):
        b = reach[i]
        start, stop = max(0, i - b), min(n, i + b + 1)
        h[:] = 0.0
        count = 0
        for j in range(start, stop):
            if j != i and sentence[j] == sentence[i]:
                row = syn0[ids[j]]
                for k in range(dim):
                    h[k] += row[k]
                count += 1
        if count == 0:
            continue
        inverse = np.float32(1.0 / count)
        for k in range(dim):
            h[k] *= inverse
        work[:] = 0.0
        step_loss, r = _example(syn1, h, work, ids[i], noise, negative, alpha, r, words, gains)
        for j in range(start, stop):
            if j != i and sentence[j] == sentence[i]:
                row = syn0[ids[j]]
                for k in range(dim):
                    row[k] += work[k]
        loss += step_loss
        examples += 1
    return loss, examples


@njit(cache=True, parallel=True)
def _parallel(cbow, syn0, syn1, ids, sentence, reach, bounds, noise, negative, alpha, seeds):
    parts = len(seeds)
    losses = np.zeros(parts)
    counts = np.zeros(parts, dtype=np.int64)
    for p in prange(parts):
        if cbow:
            losses[p], counts[p] = _cbow_part(syn0, syn1, ids, sentence, reach, bounds[p], bounds[p + 1],
                                              noise, negative, alpha, seeds[p])
        else:
            losses[p], counts[p] = _skipgram_part(syn0, syn1, ids, sentence, reach, bounds[p], bounds[p + 1],
                                                  noise, negative, alpha, seeds[p])
    return losses.sum(), counts.sum()


def train_chunk(syn0, syn1, ids, sentence, keep, noise, architecture: str, window: int, negative: int,
                alpha: float, seeds: np.ndarray) -> tuple[float, int]:
    """Train the tables syn0 (inputs) and syn1 (outputs), float32 (vocabulary, dim), in place on one
    chunk of the corpus (word ids and sentence numbers, int64); keep: each word's subsampling keep
    probability; noise: alias_table(the noise distribution); seeds (uint64): one for the
    subsampling and windows, then one per worker. Returns (summed loss, examples)."""
    kept, kept_sentence, reach = subsample(ids, sentence, keep, window, seeds[0])
    workers = len(seeds) - 1
    cbow = architecture == "cbow"
    if workers == 1:
        part = _cbow_part if cbow else _skipgram_part
        loss, examples = part(syn0, syn1, kept, kept_sentence, reach, 0, len(kept), noise, negative, alpha,
                              seeds[1])
    else:
        bounds = np.linspace(0, len(kept), workers + 1).astype(np.int64)
        numba.set_num_threads(workers)
        loss, examples = _parallel(cbow, syn0, syn1, kept, kept_sentence, reach, bounds, noise, negative, alpha,
                                   seeds[1:])
    return float(loss), int(examples)


def most_workers() -> int:
    """How many workers train_chunk can run at once (numba's thread pool: the CPU cores by default,
    NUMBA_NUM_THREADS to change)."""
    return numba.config.NUMBA_NUM_THREADS
