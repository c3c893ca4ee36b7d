"""Depth dynamics (issue claims beside the papers'): adaptive depth on trained models and RNODE's regularity costs.

Both are judged from recordings of runs too long for CI, by the two-standard-error rule over their seeds:

* ``benchmarks/results/adaptive_depth_cpu.json`` (``experiments/adaptive_depth/run.py``): per model, the per-seed
  differences ``d = accuracy(point) - accuracy(discrete)`` (points) of every method point that uses fewer layer
  evaluations than the model has layers. "Within the margin" (0.5 points) is "``d + margin`` beats 0": ``a`` is
  ``d + margin`` per seed and ``b`` zeros, so the standard error is the paired one, ``sd(d) / sqrt(seeds)``. Of a
  family's candidates the one with the highest lower bound ``mean(d) + margin - 2 se`` is judged: the best case for
  the claim, so an "agrees" would be optimistic and a "disagrees" holds for every candidate.
* ``benchmarks/results/regularity_cpu.json`` (``experiments/regularity/run.py``): per seed and cost, dopri5's
  evaluations and accuracy on the test split at one tolerance.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import cache

from ._ledger import ROOT, LedgerError

ADAPTIVE = ROOT / "benchmarks" / "results" / "adaptive_depth_cpu.json"
REGULARITY = ROOT / "benchmarks" / "results" / "regularity_cpu.json"
SOLVERS = ("fixed grid (layer-aligned)", "fixed grid (fewer steps)", "dopri5 (batch-joint)", "dopri5 (per sample)")
EARLY_EXITS = ("early exit (confident)", "early exit (stops changing)", "early exit (event)")
TOLERANCE = "0.001"  # dopri5's rtol = atol at which RNODE's claim is judged
ACCURACY_MARGIN = 1.0  # points: "comparable accuracy"


@cache
def _record(path) -> dict:
    if not path.is_file():
        raise LedgerError(f"no recording {path.relative_to(ROOT)}: run the experiment that writes it")
    return json.loads(path.read_text(encoding="utf-8"))


def _lower_bound(differences: list[float], margin: float) -> float:
    return statistics.fmean(differences) + margin - 2 * statistics.stdev(differences) / math.sqrt(len(differences))


def _best_within_margin(model: str, families: tuple[str, ...]) -> tuple[list[float], list[float]]:
    record = _record(ADAPTIVE)
    if model not in record["models"]:
        raise LedgerError(f"{ADAPTIVE.name} has no model {model!r}: run experiments/adaptive_depth/run.py")
    margin = record["margin"]
    tests = [t for t in record["models"][model]["tests"].values() if t["family"] in families]
    if not tests:
        raise LedgerError(f"{model}: no point of {families} uses fewer evaluations than layers")
    best = max(tests, key=lambda t: _lower_bound(t["differences"], margin))
    return [d + margin for d in best["differences"]], [0.0] * len(best["differences"])


def vit_digits_solver() -> tuple[list[float], list[float]]:
    return _best_within_margin("vit_digits", SOLVERS)


def vit_digits_early_exit() -> tuple[list[float], list[float]]:
    return _best_within_margin("vit_digits", EARLY_EXITS)


def nanogpt_tweets_char_solver() -> tuple[list[float], list[float]]:
    return _best_within_margin("nanogpt_tweets_char", SOLVERS)


def nanogpt_tweets_char_early_exit() -> tuple[list[float], list[float]]:
    return _best_within_margin("nanogpt_tweets_char", EARLY_EXITS)


def gpt2_tweets_char_solver() -> tuple[list[float], list[float]]:
    return _best_within_margin("gpt2_tweets_char", SOLVERS)


def gpt2_tweets_char_early_exit() -> tuple[list[float], list[float]]:
    return _best_within_margin("gpt2_tweets_char", EARLY_EXITS)


def _per_seed(cost: str, key: str) -> list[float]:
    rows = [row for row in _record(REGULARITY)["rows"] if row["cost"] == cost]
    if not rows:
        raise LedgerError(f"{REGULARITY.name} has no runs with cost {cost!r}")
    return [float(row[key]) for row in rows]


def _fewer_evaluations(cost: str) -> tuple[list[float], list[float]]:
    return _per_seed(cost, f"nfe_{TOLERANCE}"), _per_seed("none", f"nfe_{TOLERANCE}")


def _comparable_accuracy(cost: str) -> tuple[list[float], list[float]]:
    key = f"accuracy_{TOLERANCE}"
    return [a + ACCURACY_MARGIN for a in _per_seed(cost, key)], _per_seed("none", key)


def kinetic_fewer_evaluations() -> tuple[list[float], list[float]]:
    return _fewer_evaluations("kinetic")


def jacobian_fewer_evaluations() -> tuple[list[float], list[float]]:
    return _fewer_evaluations("jacobian")


def both_fewer_evaluations() -> tuple[list[float], list[float]]:
    return _fewer_evaluations("both")


def kinetic_comparable_accuracy() -> tuple[list[float], list[float]]:
    return _comparable_accuracy("kinetic")


def jacobian_comparable_accuracy() -> tuple[list[float], list[float]]:
    return _comparable_accuracy("jacobian")


def both_comparable_accuracy() -> tuple[list[float], list[float]]:
    return _comparable_accuracy("both")


def kinetic_lowers_the_energy() -> tuple[list[float], list[float]]:
    return _per_seed("kinetic", "kinetic_energy"), _per_seed("none", "kinetic_energy")


def jacobian_lowers_the_jacobian_norm() -> tuple[list[float], list[float]]:
    return _per_seed("jacobian", "jacobian_norm"), _per_seed("none", "jacobian_norm")
