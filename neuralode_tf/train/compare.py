"""Comparisons over model variants and seeds, and inference step-count sweeps, built on :func:`train`."""

from __future__ import annotations

import csv
import json
import math
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from ..continuous import set_solve_options
from ..numerics.errors import NonFiniteStateError
from ._checkpoint import CHECKPOINT, load_checkpoint
from ._history import TEST_COLUMNS
from .config import TrainConfig
from .loop import NonFiniteLossError, evaluate, train
from .presets import PRESETS
from .setup import build_setup

__all__ = ["compare_variants", "summarize", "markdown_table", "step_sweep", "learning_curve"]


def learning_curve(run_dir: str | Path) -> dict[str, list[float | None]]:
    """Per epoch, the mean training loss (the data-fitting term, without the transport cost) and accuracy
    over the steps of a run's ``metrics.csv``; for a run with ``eval_every``, also ``test_accuracy`` and
    ``test_loss``, the test split's at the epoch's last step (``None`` for an epoch not evaluated)."""
    with open(Path(run_dir) / "metrics.csv", newline="") as handle:
        records = list(csv.DictReader(handle))
    epochs: dict[int, list[dict[str, str]]] = {}
    for record in records:
        epochs.setdefault(int(record["epoch"]), []).append(record)
    groups = [group for _, group in sorted(epochs.items())]
    curve: dict[str, list[float | None]] = {
        key: [statistics.fmean(float(r[key]) for r in group) for group in groups] for key in ("loss", "accuracy")
    }
    for key in TEST_COLUMNS if records and TEST_COLUMNS[0] in records[0] else ():
        values = [float(group[-1][key]) for group in groups]
        curve[key] = [None if math.isnan(value) else value for value in values]
    return curve


def compare_variants(
    preset: str,
    variants: dict[str, dict[str, Any]],
    seeds: tuple[int, ...] = (0, 1, 2),
    out_dir: str | Path = "runs/compare",
    workers: int = 1,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Train ``preset`` once per variant (model overrides) and seed; one row per run.

    A run whose loss or ODE state becomes non-finite is kept as a row with ``non_finite=True`` and
    no accuracy (the training loop stops it with :class:`~neuralode_tf.train.NonFiniteLossError`, or
    the solver with :class:`~neuralode_tf.numerics.NonFiniteStateError`), so divergences are
    counted instead of crashing the comparison.

    Args:
        preset: A name of :data:`~neuralode_tf.train.PRESETS`.
        variants: Variant name -> model overrides (e.g. :data:`~neuralode_tf.train.presets.OT_VARIANTS`).
        seeds: Training seeds (model initialisation and data order).
        out_dir: Each run writes to ``out_dir/<variant>/seed<k>``.
        workers: Runs in parallel, each in its own process with one torch thread (``spawn``); the rows are
            those of ``workers=1`` under ``OMP_NUM_THREADS=1``, in the same order.
        **settings: Further :class:`TrainConfig` fields (``epochs``, ``max_steps``, ``progress``, ``data``, ...).

    Returns:
        Rows ``{"variant", "seed", "parameters", "test_accuracy", "scores", "non_finite", "out_dir", "curve"}``,
        where ``scores`` holds the test accuracy and the dataset's metrics by name (``{"accuracy": ..., "matthews":
        ...}`` on GLUE's CoLA) and ``curve`` is the run's :func:`learning_curve` (both ``None`` for a non-finite
        run), with the test accuracy and loss per epoch under ``eval_every``.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, not {workers!r}")
    base = replace(PRESETS[preset].config, **settings)
    jobs = [(name, overrides, seed) for name, overrides in variants.items() for seed in seeds]
    if workers == 1:
        return [_run(base, *job, Path(out_dir)) for job in jobs]
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=torch.set_num_threads, initargs=(1,)
    ) as pool:
        futures = [pool.submit(_run, base, *job, Path(out_dir)) for job in jobs]
        return [future.result() for future in futures]


def _run(base: TrainConfig, name: str, overrides: dict[str, Any], seed: int, out_dir: Path) -> dict[str, Any]:
    """One run of a comparison, as a row (see :func:`compare_variants`)."""
    run_dir = out_dir / name / f"seed{seed}"
    config = replace(base, seed=seed, out_dir=str(run_dir), model={**base.model, **overrides})
    row: dict[str, Any] = {"variant": name, "seed": seed, "out_dir": str(run_dir)}
    try:
        result = train(config)
        row.update(parameters=result["parameters"], test_accuracy=result["test_accuracy"], non_finite=False)
        row["scores"] = {name: result[f"test_{name}"] for name in [*result["metrics"], "accuracy"]}
        row["curve"] = learning_curve(run_dir)
    except (NonFiniteLossError, NonFiniteStateError):
        parameters = sum(p.numel() for p in build_setup(config).model.parameters())
        row.update(parameters=parameters, test_accuracy=None, scores=None, non_finite=True, curve=None)
    return row


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant: parameters, the ``metric`` the runs are judged by, the mean and standard deviation of its test
    value over the finite runs (x 100: accuracy in %), and the number of runs stopped by a non-finite loss.

    The metric is the dataset's main one, the first of its :attr:`~neuralode_tf.data.Splits.metrics` (GLUE's
    CoLA: Matthews' correlation), read from the rows' ``scores``; rows without them are judged by accuracy."""
    table = []
    for name in dict.fromkeys(row["variant"] for row in rows):
        runs = [row for row in rows if row["variant"] == name]
        metric, accuracies = _main_metric(runs)
        table.append(
            {
                "variant": name,
                "metric": metric,
                "parameters": runs[0]["parameters"],
                "mean": statistics.mean(accuracies) if accuracies else float("nan"),
                "std": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
                "runs": len(runs),
                "non_finite": sum(row["non_finite"] for row in runs),
            }
        )
    return table


def _main_metric(runs: list[dict[str, Any]]) -> tuple[str, list[float]]:
    """The first metric of the finite runs' ``scores`` (``accuracy`` without them) and its values x 100."""
    finite = [row for row in runs if not row["non_finite"]]
    if not finite or not finite[0].get("scores"):
        return "accuracy", [100 * row["test_accuracy"] for row in finite]
    metric = next(iter(finite[0]["scores"]))
    return metric, [100 * row["scores"][metric] for row in finite]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The :func:`summarize` table in Markdown (the column of the main metric), then, for rows with a ``"sweep"``
    (:func:`step_sweep`), the mean test accuracy by number of inference steps."""
    table = summarize(rows)
    metric = "accuracy (%)" if not table or table[0]["metric"] == "accuracy" else f"{table[0]['metric']} (x 100)"
    lines = [f"| model | parameters | test {metric} | runs | non-finite |", "|---|---|---|---|---|"]
    for entry in table:
        accuracy = f"{entry['mean']:.1f} ± {entry['std']:.1f}"
        lines.append(
            f"| {entry['variant']} | {entry['parameters']:,} | {accuracy} | {entry['runs']} | {entry['non_finite']} |"
        )
    swept = [row for row in rows if row.get("sweep")]
    if swept:
        steps = list(swept[0]["sweep"])
        lines += ["", "| model | " + " | ".join(f"{k} steps" for k in steps) + " |", "|---|" + "---|" * len(steps)]
        for name in dict.fromkeys(row["variant"] for row in swept):
            runs = [row["sweep"] for row in swept if row["variant"] == name]
            means = [100 * sum(run[k] for run in runs) / len(runs) for k in steps]
            lines.append(f"| {name} | " + " | ".join(f"{m:.1f}" for m in means) + " |")
    return "\n".join(lines) + "\n"


@torch.no_grad()
def step_sweep(run_dir: str | Path, steps: tuple[int, ...] = (1, 2, 4, 8, 16, 20)) -> dict[int, float]:
    """Test accuracy of a trained run evaluated with each number of Euler steps (Kan et al., Table 5).

    The model is rebuilt from ``run_dir/config.json`` and loaded from its checkpoint (safely: see
    :func:`~neuralode_tf.train.load_checkpoint`); every
    :class:`~neuralode_tf.ContinuousDepth` in it is then solved with ``method="euler"`` and ``k``
    steps over its own interval.
    """
    run_dir = Path(run_dir)
    config = TrainConfig(**json.loads((run_dir / "config.json").read_text()))
    setup = build_setup(config)
    state = load_checkpoint(run_dir / CHECKPOINT, "cpu")
    setup.model.load_state_dict(state["model"])
    accuracies = {}
    for k in steps:
        set_solve_options(setup.model, method="euler", steps=k)
        accuracies[k] = evaluate(setup.model, setup, torch.device("cpu"), config.eval_batch_size)
    return accuracies
