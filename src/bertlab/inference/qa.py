"""Extractive QA post-processing: from per-window start/end logits to one answer per question,
as run_squad.py's write_predictions does it.

A question read through several windows (features) is answered once: every window proposes its
`n_best_size` most likely starts and ends; a pair is a candidate when both ends are context tokens,
end >= start, the span is at most `max_answer_length` tokens and the start token is read in its
max-context window (so a span is scored where the model saw most around it). Candidates are ranked
by start_logit + end_logit across all windows.

The answer is cut from the original context with the tokens' character offsets, so it is the exact
original text (accents, case and spacing kept); run_squad instead had to re-align normalised tokens
with whitespace words (get_final_text), which the offsets make unnecessary.

SQuAD 2.0: each window also scores "no answer" as start_logit[0] + end_logit[0] (the [CLS] token);
the question's null score is the smallest over its windows, and the answer is "" when
null_score - best span score > null_score_diff_threshold.

A feature here is the dict `bertlab.finetune.squad` builds: `example_index`, `token_offsets`
((start, end) into the context, None for question and special tokens) and `token_is_max_context`.
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class QaSettings:
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0


@dataclass
class QaAnswer:
    answer: str  # "" means "no answer" (SQuAD 2.0) or no valid span at all
    nbest: list[dict] = field(default_factory=list)  # {text, probability, start_logit, end_logit}
    null_score: float | None = None  # SQuAD 2.0 only


@dataclass(frozen=True)
class _Candidate:
    text: str
    start_logit: float
    end_logit: float

    @property
    def score(self) -> float:
        return self.start_logit + self.end_logit


def answer_questions(contexts: list[str], features: list[dict], outputs: list,
                     settings: QaSettings = QaSettings()) -> list[QaAnswer]:
    """One QaAnswer per context (question), from every feature's (start_logits, end_logits)."""
    if len(features) != len(outputs):
        raise ValueError(f"{len(features)} features but {len(outputs)} model outputs")
    grouped = [[] for _ in contexts]
    for feature, output in zip(features, outputs):
        grouped[feature["example_index"]].append((feature, output))
    return [answer_question(context, pairs, settings) for context, pairs in zip(contexts, grouped)]


def answer_question(context: str, pairs: list[tuple[dict, tuple]], settings: QaSettings) -> QaAnswer:
    """The answer of one question from its (feature, (start_logits, end_logits)) pairs."""
    candidates, null = [], None
    for feature, (start_logits, end_logits) in pairs:
        start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
        _check_lengths(feature, start_logits, end_logits)
        candidates += _feature_candidates(context, feature, start_logits, end_logits, settings)
        feature_null = _Candidate("", float(start_logits[0]), float(end_logits[0]))
        if null is None or feature_null.score < null.score:
            null = feature_null
    if not settings.version_2_with_negative:
        nbest = _nbest(candidates, settings.n_best_size) or [_Candidate("", 0.0, 0.0)]
        return QaAnswer(nbest[0].text, _with_probabilities(nbest))
    if null is None:  # a question without features: nothing was read, so nothing is answered
        return QaAnswer("", _with_probabilities([_Candidate("", 0.0, 0.0)]), None)
    # As run_squad: "no answer" competes for a place in the n-best and is listed there in any case.
    nbest = _nbest(candidates + [null], settings.n_best_size)
    if all(c.text for c in nbest):
        nbest.append(null)
    best = next((c for c in nbest if c.text), None)
    no_answer = best is None or null.score - best.score > settings.null_score_diff_threshold
    return QaAnswer("" if no_answer else best.text, _with_probabilities(nbest), null.score)


def _check_lengths(feature, start_logits, end_logits):
    n = len(feature["token_offsets"])
    if len(start_logits) != n or len(end_logits) != n:
        raise ValueError(f"feature of example {feature['example_index']} has {n} tokens but "
                         f"{len(start_logits)} start and {len(end_logits)} end logits (padding not cut?)")


def _feature_candidates(context, feature, start_logits, end_logits, settings) -> list[_Candidate]:
    offsets, max_context = feature["token_offsets"], feature["token_is_max_context"]
    found = []
    # As run_squad: the top n over the whole window (question tokens included), then filtered.
    for start in _top_indices(start_logits, settings.n_best_size):
        if offsets[start] is None or not max_context[start]:
            continue
        for end in _top_indices(end_logits, settings.n_best_size):
            if offsets[end] is None or end < start or end - start + 1 > settings.max_answer_length:
                continue
            text = context[offsets[start][0]:offsets[end][1]]
            found.append(_Candidate(text, float(start_logits[start]), float(end_logits[end])))
    return found


def _top_indices(logits, n) -> list[int]:
    return np.argsort(-logits, kind="stable")[:n].tolist()  # ties keep the earlier token first


def _nbest(candidates: list[_Candidate], n: int) -> list[_Candidate]:
    """The n best distinct answer texts (the same text from two windows counts once, at its best)."""
    best, seen = [], set()
    for c in sorted(candidates, key=lambda c: c.score, reverse=True):
        if c.text not in seen:
            seen.add(c.text)
            best.append(c)
            if len(best) == n:
                break
    return best


def _with_probabilities(nbest: list[_Candidate]) -> list[dict]:
    scores = np.array([c.score for c in nbest], dtype=np.float64)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    return [{"text": c.text, "probability": float(p), "start_logit": c.start_logit, "end_logit": c.end_logit}
            for c, p in zip(nbest, probs)]
