"""Masked-LM predictions, as google-research/bert's create_pretraining_data.py draws them.

Of an instance's pieces (never [CLS], [SEP] or padding) a share ``masked_lm_prob`` of the sequence
length is chosen, at most ``max_predictions_per_seq``; each chosen piece becomes [MASK] 80% of the
time, a random vocabulary entry 10% and stays itself 10% (so the model cannot learn that an
unmasked piece is always right), and the original piece is the label.

Whole-word masking chooses words instead of pieces: a piece that *continues* a word joins the
candidate of the piece before it ("##" pieces, or characters inside a Chinese word, whose pieces
carry no "##"); a word that would overshoot the number to predict is skipped, and each of its
pieces still gets its own 80/10/10 draw -- google's master create_pretraining_data.py exactly.

Two ways to draw:
* ``create_masked_lm_predictions``: static masking at data-creation time with ``random.Random``,
  call for call google's function, so the instances equal google's for the same seed.
* ``make_mask_fn``: dynamic masking (RoBERTa) at training time with a numpy ``Generator``, a fresh
  mask every time a batch is read; the ``mask_fn`` of ``PretrainingData.batch``.
"""
import numpy as np

from ..tokenization import CLS, MASK, PAD, SEP, Vocab, is_chinese_char


def create_masked_lm_predictions(tokens: list[int], masked_lm_prob: float, max_predictions_per_seq: int,
                                 vocab_size: int, rng, *, never_mask: frozenset, mask_id: int,
                                 continues=None) -> tuple[list[int], list[int], list[int]]:
    """(output ids, masked positions sorted, their original ids) for one instance of ids.

    ``never_mask``: the ids of [CLS] and [SEP]. ``continues[i]`` (whole-word masking only) says
    that piece i belongs to the word of the candidate before it. ``rng`` is a ``random.Random``,
    called in google's order (shuffle, then per piece: random(), maybe random(), maybe randint)."""
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in never_mask:
            continue
        if continues is not None and cand_indexes and continues[i]:
            cand_indexes[-1].append(i)  # google's quirk kept: also across a [SEP]
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output = list(tokens)
    k = num_to_predict(len(tokens), masked_lm_prob, max_predictions_per_seq)
    masked, covered = [], set()
    for index_set in cand_indexes:
        if len(masked) >= k:
            break
        if len(masked) + len(index_set) > k or not covered.isdisjoint(index_set):
            continue  # a whole word that would overshoot is skipped, not cut
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                output[index] = mask_id
            elif rng.random() >= 0.5:  # else: 10% keep the original piece
                output[index] = rng.randint(0, vocab_size - 1)
            masked.append(index)
    masked.sort()
    return output, masked, [tokens[i] for i in masked]


def ref_continues(positions: list[int], num_pieces: int, where: str) -> list[bool]:
    """Flags from a Chinese reference line: HF's run_chinese_ref.py lists the positions, in
    [CLS] + the line's pieces, of the characters that continue a word (so piece i is position i+1)."""
    flags = [False] * num_pieces
    for p in positions:
        if not 1 <= p <= num_pieces:
            raise ValueError(f"{where}: position {p} is not one of the line's {num_pieces} pieces "
                             "(positions count [CLS] as 0): the reference file does not fit the input")
        flags[p - 1] = True
    return flags


def jieba_continues(text: str, tokenizer) -> list[bool]:
    """Flags of the pieces of ``text`` that continue a Chinese word as jieba segments the text:
    a single-character piece inside a word of several Chinese characters, after its first."""
    inside = bytearray(len(text))
    for word, start, end in _jieba().tokenize(text):
        if len(word) > 1 and all(is_chinese_char(ord(c)) for c in word):
            inside[start + 1:end] = b"\1" * (end - start - 1)
    ids, offsets = tokenizer.tokenize_with_offsets(text)
    tokens = tokenizer.vocab.id_to_token
    return [bool(inside[start]) and len(tokens[i]) == 1 and is_chinese_char(ord(tokens[i]))
            for i, (start, _) in zip(ids, offsets)]


def _jieba():
    try:
        import jieba
    except ImportError:
        raise ValueError("Chinese whole-word masking with jieba needs the jieba package, which bertlab "
                         "requires but this environment lacks: pip install 'jieba>=0.42' (or give "
                         "--chinese-ref files instead)") from None
    import logging
    jieba.setLogLevel(logging.WARNING)  # it announces loading its dictionary otherwise
    return jieba


def num_to_predict(length: int, masked_lm_prob: float, max_predictions_per_seq: int) -> int:
    """google's count: round(length * prob) of the whole sequence, [CLS]/[SEP] included, at least 1."""
    return min(max_predictions_per_seq, max(1, int(round(length * masked_lm_prob))))


def make_mask_fn(vocab: Vocab, masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                 do_whole_word_mask: bool = False, seed: int = 0):
    """``mask_fn(input_ids, lengths) -> (input_ids, positions, ids, counts)`` for
    ``PretrainingData.batch``: a fresh draw from its own numpy Generator on every call.

    Whole-word masking groups "##" pieces with the piece before them (Chinese word boundaries are
    not stored in the shards, so they cannot be honoured here; create-pretraining-data refuses that
    combination)."""
    rng = np.random.default_rng(seed)
    never = np.array([vocab.special_id(t, "masking") for t in (CLS, SEP)]
                     + ([vocab.token_to_id[PAD]] if PAD in vocab else []))
    mask_id = vocab.special_id(MASK, "masking")
    continues = np.array([t.startswith("##") for t in vocab.id_to_token]) if do_whole_word_mask else None
    V, P = len(vocab), max_predictions_per_seq

    def mask_fn(input_ids: np.ndarray, lengths: np.ndarray):
        ids = np.asarray(input_ids, dtype=np.int64)
        n, L = ids.shape
        lengths = np.asarray(lengths, dtype=np.int64)
        cand = (np.arange(L)[None, :] < lengths[:, None]) & ~np.isin(ids, never)
        k = np.minimum(P, np.maximum(1, np.rint(lengths * masked_lm_prob).astype(np.int64)))  # as num_to_predict
        chosen = _choose_words(cand, _word_starts(cand, ids, continues), k, rng, whole_words=continues is not None)
        draw = rng.random((n, L))
        output = ids.copy()
        output[chosen & (draw < 0.8)] = mask_id
        randomized = chosen & (draw >= 0.9)  # and 0.8 <= draw < 0.9 keeps the piece
        output[randomized] = rng.integers(0, V, int(randomized.sum()))
        rows, cols = np.nonzero(chosen)  # row by row, positions ascending
        rank = np.cumsum(chosen, axis=1)[rows, cols] - 1
        positions, labels = np.zeros((n, P), np.int64), np.zeros((n, P), np.int64)
        positions[rows, rank], labels[rows, rank] = cols, ids[rows, cols]
        return output, positions, labels, chosen.sum(1)

    return mask_fn


def _word_starts(cand: np.ndarray, ids: np.ndarray, continues) -> np.ndarray:
    """Candidates that start a word: all of them, or with whole-word masking those that are not
    "##" pieces, and the first candidate of a row whatever it is (as google's loop has it)."""
    if continues is None:
        return cand
    return cand & (~continues[ids] | (np.cumsum(cand, axis=1) == 1))


def _choose_words(cand: np.ndarray, starts: np.ndarray, k: np.ndarray, rng, whole_words: bool) -> np.ndarray:
    """(n, L) mask of the chosen pieces: words in random order, each taken whole while it fits in
    the row's k and skipped when it would overshoot -- google's loop, run for all rows at once."""
    n, L = cand.shape
    word = np.cumsum(starts, axis=1) - 1  # a candidate's word, counted within its row
    n_words = starts.sum(1)
    W = max(int(n_words.max(initial=0)), 1)
    sizes = np.zeros((n, W), np.int64)
    rows, cols = np.nonzero(cand)
    np.add.at(sizes, (rows, word[rows, cols]), 1)
    keys = rng.random((n, W))
    keys[np.arange(W)[None, :] >= n_words[:, None]] = 2.0  # no such word: last in line
    order = np.argsort(keys, axis=1)
    in_order = np.take_along_axis(sizes, order, axis=1)
    if not whole_words:  # every word one piece: the first k in the random order
        taken_in_order = np.arange(W)[None, :] < np.minimum(k, n_words)[:, None]
    else:
        taken_in_order, total = np.zeros((n, W), bool), np.zeros(n, np.int64)
        for j in range(W):
            size = in_order[:, j]
            take = (size > 0) & (total < k) & (total + size <= k)
            taken_in_order[:, j] = take
            total += take * size
    taken = np.zeros((n, W), bool)
    np.put_along_axis(taken, order, taken_in_order, axis=1)
    return cand & np.take_along_axis(taken, np.clip(word, 0, W - 1), axis=1)


def mask_fn_for(data, seed: int = 0):
    """The ``mask_fn`` a folder of dynamically masked instances was made for: its vocab.txt and
    the masked_lm_prob / whole-word setting recorded in its meta.json."""
    settings = data.meta.get("settings", {})
    return make_mask_fn(data.vocab,
                        settings.get("masked_lm_prob", 0.15), data.meta["max_predictions_per_seq"],
                        settings.get("do_whole_word_mask", False), seed)
