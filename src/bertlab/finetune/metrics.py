"""The scores GLUE and the notes report for sentence tasks, on plain label/score lists.

Written on numpy so that bertlab needs no scikit-learn at run time; tests check every function
against scikit-learn and scipy on fixed and random inputs.
"""
import numpy as np


def accuracy(gold, pred) -> float:
    gold, pred = np.asarray(gold), np.asarray(pred)
    return float((gold == pred).mean()) if len(gold) else 0.0


def _confusion(gold, pred):
    labels = np.unique(np.concatenate([np.asarray(gold), np.asarray(pred)]))
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for g, p in zip(gold, pred):
        matrix[index[g], index[p]] += 1
    return labels, matrix


def f1(gold, pred, average: str = "macro", positive=1) -> float:
    """F1 of one class ("binary": the `positive` label, as MRPC and QQP report it) or the unweighted
    mean over every label present in gold or pred ("macro"). An empty class scores 0."""
    labels, m = _confusion(gold, pred)
    tp = np.diag(m).astype(float)
    predicted, actual = m.sum(0), m.sum(1)
    per_class = np.divide(2 * tp, predicted + actual, out=np.zeros_like(tp), where=(predicted + actual) > 0)
    if average == "macro":
        return float(per_class.mean())
    if average == "binary":
        hits = np.flatnonzero(labels == positive)
        return float(per_class[hits[0]]) if len(hits) else 0.0
    raise ValueError(f"average must be 'macro' or 'binary', not {average!r}")


def matthews_corrcoef(gold, pred) -> float:
    """Matthews correlation (CoLA's metric), multi-class form (Gorodkin's R_K); 0 when undefined."""
    _, m = _confusion(gold, pred)
    t, p = m.sum(1).astype(float), m.sum(0).astype(float)
    c, s = float(np.trace(m)), float(m.sum())
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator else 0.0


def _ranks(x):
    """Ranks 1..n, ties given the mean of the ranks they span (as Spearman's rho needs)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sorted_x = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return ranks


def spearman(x, y) -> float:
    return pearson(_ranks(x), _ranks(y))
