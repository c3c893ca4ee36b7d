"""Scores of a test split's predictions, by name (:data:`METRICS`): the metrics of GLUE (Wang et al. 2018) that
Wang et al. (2021, Table 3) report, besides accuracy.

Each takes the predictions and the targets of the whole split, 1-D tensors of equal length: class ids for a
classification, scores for a regression (STS-B), and returns a float.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["METRICS", "accuracy", "matthews", "f1", "pearson", "spearman"]


def accuracy(predictions: Tensor, targets: Tensor) -> float:
    """The share of predictions equal to their target."""
    return (predictions == targets).double().mean().item()


def matthews(predictions: Tensor, targets: Tensor) -> float:
    """Matthews' correlation coefficient (CoLA's metric), for any number of classes (Gorodkin 2004):

    ``MCC = (c s - Σ_k p_k t_k) / sqrt((s² - Σ_k p_k²)(s² - Σ_k t_k²))``

    with ``s`` examples, ``c`` of them correct, ``p_k`` predicted and ``t_k`` true in class ``k``; for two classes
    ``(TP·TN - FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))``. 0 when a factor of the denominator is 0 (every
    prediction, or every target, in one class), as scikit-learn defines it.
    """
    classes = int(torch.cat([predictions, targets]).max()) + 1
    p = torch.bincount(predictions, minlength=classes).double()
    t = torch.bincount(targets, minlength=classes).double()
    s, c = float(len(targets)), float((predictions == targets).sum())
    denominator = (s * s - (p * p).sum()) * (s * s - (t * t).sum())
    return 0.0 if denominator == 0 else ((c * s - (p * t).sum()) / denominator.sqrt()).item()


def f1(predictions: Tensor, targets: Tensor) -> float:
    """F1 of class 1, the positive class (MRPC's "equivalent", QQP's "duplicate"): ``2 TP / (2 TP + FP + FN)``;
    0 when there is no positive prediction or target."""
    tp = int(((predictions == 1) & (targets == 1)).sum())
    wrong = int((predictions != targets).sum())  # FP + FN for two classes
    return 0.0 if tp + wrong == 0 else 2 * tp / (2 * tp + wrong)


def pearson(predictions: Tensor, targets: Tensor) -> float:
    """Pearson's correlation ``cov(x, y) / (σ_x σ_y)`` (STS-B's first metric); NaN if either is constant."""
    x, y = predictions.double() - predictions.double().mean(), targets.double() - targets.double().mean()
    return ((x * y).sum() / ((x * x).sum() * (y * y).sum()).sqrt()).item()


def spearman(predictions: Tensor, targets: Tensor) -> float:
    """Spearman's rank correlation: :func:`pearson` of the ranks, tied values sharing their mean rank."""
    return pearson(_ranks(predictions), _ranks(targets))


def _ranks(values: Tensor) -> Tensor:
    """Ranks 1..n of ``values``, each run of equal values given the mean of its ranks."""
    ordered, order = torch.sort(values.double())
    _, run, lengths = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    mean_rank = lengths.cumsum(0).double() - (lengths.double() - 1) / 2
    ranks = torch.empty_like(ordered)
    ranks[order] = mean_rank[run]
    return ranks


METRICS: dict[str, Callable[[Tensor, Tensor], float]] = {
    "accuracy": accuracy,
    "matthews": matthews,
    "f1": f1,
    "pearson": pearson,
    "spearman": spearman,
}
"""The metrics a dataset's :attr:`~neuralode_tf.data.Splits.metrics` may name."""
