"""A run's history, one record per step: the test split's scores every ``eval_every`` epochs, and the files
``metrics.csv`` and ``metrics.json`` written from it.

The test evaluation leaves training as it was: the model is evaluated in eval mode and put back in its mode, the
random state of the CPU (and of the run's CUDA device) is put back, and the record's other entries (the step's
loss, accuracy, function evaluations) are taken before it, so a run with ``eval_every=1`` trains bit for bit as one
without it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ._checkpoint import write_atomically
from ._evaluation import scores
from .setup import Setup

__all__ = ["TEST_COLUMNS", "epoch_test", "write_metrics"]

TEST_COLUMNS = ("test_accuracy", "test_loss")
"""The columns of ``metrics.csv`` that ``eval_every`` adds: the test accuracy and the mean test loss per target."""


def epoch_test(
    model: nn.Module, setup: Setup, device: torch.device, batch_size: int, eval_every: int, epoch_end: int | None
) -> dict[str, float]:
    """The test columns (:data:`TEST_COLUMNS`) of a step's record: ``{}`` without ``eval_every``; the test split's
    accuracy and mean loss if the step ends epoch ``epoch_end`` (counted from 1; ``None``: the step ends no epoch,
    or ends the run, whose final evaluation fills its record) and ``epoch_end`` is a multiple of ``eval_every``
    (evaluated in eval mode, then the model put back in its mode and the random state as it was); NaN otherwise."""
    if not eval_every:
        return {}
    if epoch_end is None or epoch_end % eval_every:
        return dict.fromkeys(TEST_COLUMNS, math.nan)
    training = model.training
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        test = scores(model, setup, device, batch_size)
    model.train(training)
    return {"test_accuracy": test["accuracy"], "test_loss": test["loss"]}


def write_metrics(out: Path, history: list[dict[str, float]], result: dict[str, Any]) -> None:
    """Write ``metrics.csv`` (one row per step; a column that some steps lack, e.g. the test columns of a run
    resumed with another ``eval_every``, is NaN there) and ``metrics.json`` (the result), each atomically."""
    if history:
        table = io.StringIO(newline="")
        columns = list(dict.fromkeys(key for record in history for key in record))
        writer = csv.DictWriter(table, fieldnames=columns, restval=math.nan)
        writer.writeheader()
        writer.writerows(history)
        write_atomically(out / "metrics.csv", lambda handle: handle.write(table.getvalue().encode()))
    summary = json.dumps({**result, "written": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2)
    write_atomically(out / "metrics.json", lambda handle: handle.write(summary.encode()))
