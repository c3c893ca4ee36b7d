"""Scores of a model on a setup's test split: accuracy, mean loss and the dataset's metrics, and a language model's
validation loss and perplexity."""

from __future__ import annotations

import math

import torch
from torch import nn

from .metrics import METRICS
from .setup import Setup

__all__ = ["scores", "validation", "perplexity"]


@torch.no_grad()
def scores(model: nn.Module, setup: Setup, device: torch.device, batch_size: int) -> dict[str, float]:
    """The test split's ``accuracy`` (NaN for a regression) and mean ``loss`` per target (token, for sequences),
    in eval mode, and each metric of the dataset's :attr:`~neuralode_tf.data.Splits.metrics` by its name, computed
    on the predictions of the whole split."""
    model.eval()
    correct, loss, count = 0.0, 0.0, 0
    predictions, targets = [], []
    judged = [name for name in setup.data.metrics if name != "accuracy"]
    for first in range(0, len(setup.test), batch_size):
        rows = torch.arange(first, min(first + batch_size, len(setup.test)))
        inputs, target = setup.batch(setup.test, rows, device)
        n = setup.count(target)
        logits = model(**inputs)
        correct += setup.accuracy(logits, target) * n
        loss += setup.loss(logits, target).item() * n
        count += n
        if judged:
            predictions.append(setup.predictions(logits).cpu())
            targets.append(target.cpu())
    result = {"accuracy": correct / count, "loss": loss / count}
    for name in judged:
        result[name] = METRICS[name](torch.cat(predictions), torch.cat(targets))
    return result


def validation(model: nn.Module, setup: Setup, device: torch.device, batch_size: int, now: bool) -> dict[str, float]:
    """A language model's ``val_loss`` (mean next-token cross-entropy on the validation text) and ``perplexity``
    (its exponential) if ``now``, else NaN for both (the columns of ``metrics.csv``)."""
    loss = scores(model, setup, device, batch_size)["loss"] if now else math.nan
    return {"val_loss": loss, "perplexity": perplexity(loss)}


def perplexity(loss: float) -> float:
    """``exp(loss)``, the perplexity of a mean cross-entropy in nats (``inf`` past the float range)."""
    return math.exp(loss) if loss < 709 or math.isnan(loss) else math.inf
