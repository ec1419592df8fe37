"""SQuAD's exact match and F1, as the official evaluate-v2.0.py computes them.

Answers are compared after normalisation (lower case, no punctuation, no articles a/an/the,
whitespace collapsed); F1 is over the bag of normalised words; a question scores the best value
over its gold answers. A question without gold answers (SQuAD 2.0's unanswerable ones) has the
single gold answer "", so only the empty prediction scores 1 on it.

The v2.0 script is a superset of v1.1's: on v1.1 data they agree except when a gold answer
normalises to nothing (v1.1 then scores F1 0, v2.0 drops that gold answer), which SQuAD avoids.
Scores are fractions in [0, 1], like every bertlab metric; the official script prints them x100.
"""
import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    pred_words, gold_words = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_words or not gold_words:  # "no answer" on either side: right only if both are empty
        return float(pred_words == gold_words)
    common = sum((collections.Counter(pred_words) & collections.Counter(gold_words)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_words), common / len(gold_words)
    return 2 * precision * recall / (precision + recall)


def gold_texts(answers: list[str]) -> list[str]:
    """The gold answers the official script scores against: the non-empty ones, or [""]."""
    return [a for a in answers if normalize_answer(a)] or [""]


def squad_evaluate(gold: dict[str, list[str]], predictions: dict[str, str],
                   breakdown: bool = False) -> dict[str, float]:
    """`exact` and `f1` over every gold question (a missing prediction scores 0), with `total`;
    `breakdown` (SQuAD 2.0) adds the same over the questions with answers (HasAns_*) and over those
    without (NoAns_*), each where there are any, as evaluate-v2.0.py reports them."""
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        golds = gold_texts(answers)
        if qid not in predictions:
            exact[qid] = f1[qid] = 0.0
            continue
        exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1[qid] = max(f1_score(predictions[qid], g) for g in golds)
    scores = _mean_scores(exact, f1, list(gold))
    if breakdown:
        for prefix, has in (("HasAns", True), ("NoAns", False)):
            qids = [qid for qid, answers in gold.items() if bool(answers) == has]
            if qids:
                scores.update({f"{prefix}_{k}": v for k, v in _mean_scores(exact, f1, qids).items()})
    return scores


def _mean_scores(exact: dict, f1: dict, qids: list[str]) -> dict[str, float]:
    n = len(qids)
    return {"exact": sum(exact[q] for q in qids) / max(n, 1),
            "f1": sum(f1[q] for q in qids) / max(n, 1),
            "total": n}
