"""Span masking: SpanBERT's contiguous spans of whole words (Joshi et al., 2020, section 3.1) and
ERNIE's phrase/entity-level masking (Sun et al., 2019) as the same mechanism with the spans a word
segmenter gives (notes 001, "MASK的机制好吗？"; notes 003, ERNIE).

SpanBERT: repeatedly draw a span length in words from a geometric distribution (p = 0.2, clipped
at 10: mean 3.8 words), a random starting word, and mask that many consecutive whole words, until
15% of the pieces are masked. The 80/10/10 replacement is
drawn once per span: all of its pieces become [MASK], all random pieces, or all stay. A span never
starts or ends inside a word, never crosses a [SEP], and never overshoots the number to predict
(a word that would is left out, as whole-word masking does).

ERNIE: every span is one unit of the segmentation (a jieba word, so a Chinese phrase or named
entity, or one English word with its ## pieces).

Each predicted piece also gets its span's boundaries (the unmasked pieces just outside the span,
left and right) for the span-boundary objective (models/span_boundary.py).
"""
from .masking import num_to_predict

SPAN_P, MAX_SPAN_WORDS = 0.2, 10  # SpanBERT's geometric distribution
MASKINGS = ("token", "span", "ernie")


def span_length_weights(p: float = SPAN_P, longest: int = MAX_SPAN_WORDS) -> list[float]:
    """P(length = n) for n = 1..longest: the geometric p (1-p)^(n-1), renormalised after clipping."""
    weights = [p * (1 - p) ** (n - 1) for n in range(1, longest + 1)]
    total = sum(weights)
    return [w / total for w in weights]


def words_of(tokens, never_mask: frozenset, continues) -> list[tuple[int, int]]:
    """[start, end) of every word among the maskable pieces, in order: a piece flagged in
    `continues` joins the word before it unless a never-masked piece ([CLS], [SEP]) lies between."""
    words = []
    for i, token in enumerate(tokens):
        if token in never_mask:
            continue
        if words and words[-1][1] == i and continues is not None and continues[i]:
            words[-1] = (words[-1][0], i + 1)
        else:
            words.append((i, i + 1))
    return words


def draw_spans(words: list[tuple[int, int]], budget: int, rng, masking: str = "span") -> list[tuple[int, int]]:
    """[start, end) piece ranges of the chosen spans, at most `budget` pieces in all, in the order
    drawn (``rng`` is a random.Random). Each span's length is drawn first, then its first word
    uniformly among those where that many free, adjacent words fit; where none does (the budget's
    last pieces, a crowded sequence) among the starts of the longest run that still fits."""
    taken, spans, covered = [False] * len(words), [], 0
    lengths, weights = range(1, MAX_SPAN_WORDS + 1), span_length_weights()
    while covered < budget:
        want = 1 if masking == "ernie" else rng.choices(lengths, weights)[0]
        runs = [(w, _run(words, taken, w, want, budget - covered)) for w in range(len(words))]
        longest = max((n for _, n in runs), default=0)
        if longest == 0:
            break  # no free word fits what is left of the budget
        first, n = rng.choice([(w, n) for w, n in runs if n == longest])
        for w in range(first, first + n):
            taken[w] = True
        spans.append((words[first][0], words[first + n - 1][1]))
        covered += spans[-1][1] - spans[-1][0]
    return spans


def _run(words, taken, first: int, want: int, room: int) -> int:
    """How many words, at most `want`, a span starting at word `first` can take: free words, each
    adjacent to the one before (no [SEP] between), their pieces within `room`."""
    n = 0
    while n < want and first + n < len(words) and not taken[first + n] \
            and words[first + n][1] - words[first][0] <= room \
            and (n == 0 or words[first + n][0] == words[first + n - 1][1]):
        n += 1
    return n


def create_span_masked_lm_predictions(tokens: list[int], masked_lm_prob: float, max_predictions_per_seq: int,
                                      vocab_size: int, rng, *, never_mask: frozenset, mask_id: int, continues,
                                      masking: str = "span"):
    """(output ids, masked positions sorted, their original ids, their spans' (left, right)
    boundary positions) for one instance, as masking.create_masked_lm_predictions but by spans."""
    budget = num_to_predict(len(tokens), masked_lm_prob, max_predictions_per_seq)
    output, boundary = list(tokens), {}
    for start, end in draw_spans(words_of(tokens, never_mask, continues), budget, rng, masking):
        r = rng.random()  # one 80/10/10 draw per span, as SpanBERT
        for i in range(start, end):
            if r < 0.8:
                output[i] = mask_id
            elif r < 0.9:
                output[i] = rng.randint(0, vocab_size - 1)
            boundary[i] = (start - 1, end)
    masked = sorted(boundary)
    return output, masked, [tokens[i] for i in masked], [boundary[i] for i in masked]
