"""Our metric functions against scikit-learn and scipy, the references GLUE results are quoted with."""
import numpy as np
import pytest

from bertlab.finetune import metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("seed", range(20))
def test_classification_metrics_equal_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 60)), int(rng.integers(2, 5))
    gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
    if seed % 4 == 0:
        pred = gold.copy()
    if seed % 5 == 0:
        pred[:] = 0  # a class never predicted
    assert metrics.accuracy(gold, pred) == pytest.approx(sklearn_metrics.accuracy_score(gold, pred))
    assert metrics.f1(gold, pred) == pytest.approx(sklearn_metrics.f1_score(gold, pred, average="macro", zero_division=0))
    assert metrics.matthews_corrcoef(gold, pred) == pytest.approx(sklearn_metrics.matthews_corrcoef(gold, pred), abs=1e-12)
    binary_gold, binary_pred = gold % 2, pred % 2
    assert metrics.f1(binary_gold, binary_pred, "binary") == pytest.approx(
        sklearn_metrics.f1_score(binary_gold, binary_pred, zero_division=0))


def test_string_labels_work_like_integers():
    gold, pred = ["entailment", "neutral", "neutral", "contradiction"], ["entailment", "neutral", "entailment", "neutral"]
    assert metrics.f1(gold, pred) == pytest.approx(sklearn_metrics.f1_score(gold, pred, average="macro", zero_division=0))
    assert metrics.matthews_corrcoef(gold, pred) == pytest.approx(sklearn_metrics.matthews_corrcoef(gold, pred))


@pytest.mark.parametrize("seed", range(10))
def test_correlations_equal_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    if seed % 2:  # STS-B gold scores repeat: ties must take the mean rank
        x, y = np.round(x * 2) / 2, np.round(y)
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])


def test_undefined_scores_are_zero_not_nan():
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0
    assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0
