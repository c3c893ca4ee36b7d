"""The one rule that turns numbers into verdicts.

* An **exact** claim is a number or an identity that the paper prints: ours, rendered at the paper's
  printed precision, either is the paper's text (``matched``) or is not (``differs``).
* A **qualitative** claim says that a model ``a`` beats a model ``b`` (a direction, at reduced scale on
  an offline stand-in). With the per-seed values of each, the mean difference
  :math:`\\Delta = \\bar a - \\bar b` and its standard error
  :math:`se = \\sqrt{s_a^2 / n_a + s_b^2 / n_b}` (sample variances), the claim **agrees** if
  :math:`\\Delta > 2\\,se`, **disagrees** if :math:`\\Delta < -2\\,se`, and is **inconclusive (within
  noise)** otherwise. With no spread at all (:math:`se = 0`) a tie, :math:`\\Delta = 0`, is no noise: the effect
  claimed is absent, and the claim **disagrees** (e.g. no run of either model diverged, where the paper has one
  diverge in every trial). At least three seeds per model are required.
* A claim that needs the paper's data or hardware is **not here**.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MATCHED, DIFFERS = "matched", "differs"
AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive (within noise)"
NOT_HERE = "not here"
MIN_SEEDS = 3

VERDICTS = {
    "exact": (MATCHED, DIFFERS),
    "qualitative": (AGREES, DISAGREES, INCONCLUSIVE),
    "not here": (NOT_HERE,),
}


def exact_verdict(paper: str, ours: str) -> str:
    """``matched`` when our value, rendered at the paper's printed precision, is the paper's text."""
    return MATCHED if ours.strip() == paper.strip() else DIFFERS


@dataclass(frozen=True)
class Judgement:
    """The two-standard-error verdict on "a beats b", with the numbers behind it."""

    verdict: str
    difference: float  # mean(a) - mean(b), oriented so that positive favours a
    standard_error: float
    seeds: tuple[int, int]  # (n_a, n_b)


def two_standard_errors(a: Sequence[float], b: Sequence[float], higher_is_better: bool = True) -> Judgement:
    """Judge "a beats b" over per-seed values by the two-standard-error rule.

    Raises:
        ValueError: fewer than three values on either side, or a non-finite value.
    """
    if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
        raise ValueError(f"a qualitative verdict needs at least {MIN_SEEDS} seeds per model, got {len(a)} and {len(b)}")
    if not all(abs(v) < float("inf") for v in (*a, *b)):  # also rejects NaN
        raise ValueError(f"non-finite value among {list(a)} and {list(b)}")
    difference = statistics.mean(a) - statistics.mean(b)
    if not higher_is_better:
        difference = -difference
    standard_error = (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5
    if difference > 2 * standard_error:
        verdict = AGREES
    elif difference < -2 * standard_error or (standard_error == 0 and difference == 0):
        verdict = DISAGREES
    else:
        verdict = INCONCLUSIVE
    return Judgement(verdict, difference, standard_error, (len(a), len(b)))
