"""Sliding windows over inputs longer than the model takes, as run_squad.py cuts a document.

A text of n tokens becomes windows of at most `size` tokens, each starting `stride` tokens after
the previous one (run_squad's doc_stride), the last one ending at the text's end. A token seen by
several windows is answered by the window where it has the most context: the larger of
min(tokens to its left, tokens to its right) + 0.01 * window length ("max context").
QA, and long inputs for classification and tagging, all use these two functions.
"""
from typing import NamedTuple

# How sentence classification reads a text longer than max_seq_length (classification.py):
# its first window only, as google-research/bert and HF do, or every window, their logits averaged.
LONG_INPUTS = ("truncate", "windows")


class Window(NamedTuple):
    start: int  # index of the window's first token in the whole text
    length: int


def sliding_windows(n: int, size: int, stride: int) -> list[Window]:
    if size < 1 or stride < 1:
        raise ValueError(f"window size ({size}) and stride ({stride}) must be at least 1")
    windows, start = [], 0
    while True:
        length = min(n - start, size)
        windows.append(Window(start, length))
        if start + length >= n:
            return windows
        start += min(length, stride)


def is_max_context(windows: list[Window], current: int, position: int) -> bool:
    """Whether window `current` is the best one in which to read token `position` of the text."""
    best, best_score = None, None
    for i, w in enumerate(windows):
        if not w.start <= position < w.start + w.length:
            continue
        score = min(position - w.start, w.start + w.length - 1 - position) + 0.01 * w.length
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best == current
