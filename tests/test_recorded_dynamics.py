"""The depth-dynamics guide quotes the recorded adaptive-depth and regularity studies (benchmarks/results/)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTIVE = ROOT / "benchmarks" / "results" / "adaptive_depth_cpu.json"
GUIDE = ROOT / "docs" / "guide" / "dynamics.md"

pytestmark = [
    pytest.mark.cpu_only("reads recorded CPU studies"),
    pytest.mark.skipif(not (ADAPTIVE.is_file() and GUIDE.is_file()), reason="no recordings or guide beside the suite"),
]


def _guide() -> str:
    return " ".join(GUIDE.read_text(encoding="utf-8").split())


def _se(differences: list[float]) -> float:
    return statistics.stdev(differences) / math.sqrt(len(differences))


def test_the_guide_quotes_the_adaptive_depth_verdicts():
    models = json.loads(ADAPTIVE.read_text(encoding="utf-8"))["models"]
    guide = _guide()
    assert all(summary["verdict_solvers"] == "disagree" for summary in models.values())  # "no solver ... of the three"
    quoted = (("vit_digits", "exit at layer, p >= 0.9", 4), ("nanogpt_tweets_char", "exit when KL < 0.05", 3))
    for name, exit_name, layers in quoted:
        test = models[name]["tests"][exit_name]
        assert test["verdict"] == "agree"
        d, se = test["mean_difference"], _se(test["differences"])
        sign = "+" if d >= 0 else "−"
        assert f"{test['evaluations_mean']:.2f} {'layers ' if name == 'vit_digits' else ''}of {layers}" in guide
        assert f"{sign}{abs(d):.2f} ± {se:.2f} points" in guide, (name, d, se)
    gpt2 = models["gpt2_tweets_char"]["tests"]
    assert all(t["verdict"] == "disagree" for t in gpt2.values() if t["family"].startswith("early exit"))
    dopri5 = [p for s in models.values() for p in s["points"] if p["family"].startswith("dopri5")]
    evaluations = sorted(p["evaluations_mean"] for p in dopri5)
    assert f"at {evaluations[0]:.0f}-{evaluations[-1]:.0f} evaluations" in guide
    vit = {p["name"]: p["accuracy_mean"] for p in models["vit_digits"]["points"]}
    flow = [a for n, a in vit.items() if n.startswith("dopri5")]
    assert f"({min(flow):.0f}-{max(flow):.0f}% instead of {vit['discrete']:.0f}% on vit_digits" in guide
    for name in ("nanogpt_tweets_char", "gpt2_tweets_char"):
        points = {p["name"]: p["accuracy_mean"] for p in models[name]["points"]}
        assert all(10 <= a <= 14.5 for n, a in points.items() if n.startswith("dopri5"))
        assert 30 <= points["discrete"] <= 34.5
    assert "10-14% instead of 30-34% next-character accuracy" in guide


REGULARITY = ROOT / "benchmarks" / "results" / "regularity_cpu.json"


@pytest.mark.skipif(not REGULARITY.is_file(), reason="no recorded regularity study beside the suite")
def test_the_guide_quotes_the_regularity_study():
    rows = json.loads(REGULARITY.read_text(encoding="utf-8"))["rows"]

    def mean(cost: str, key: str) -> float:
        return statistics.fmean(row[key] for row in rows if row["cost"] == cost)

    guide = _guide()
    nfe = {cost: mean(cost, "nfe_0.001") for cost in ("none", "kinetic", "jacobian", "both")}
    assert nfe["kinetic"] == nfe["jacobian"]
    assert f"{nfe['none']:.0f} without, {nfe['kinetic']:.0f} with either cost, {nfe['both']:.0f} with both" in guide
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"({nfe['none']:.0f} → {nfe['kinetic']:.0f}; both: {nfe['both']:.0f})" in readme
    energy = mean("none", "kinetic_energy") / mean("kinetic", "kinetic_energy")
    jacobian = mean("none", "jacobian_norm") / mean("jacobian", "jacobian_norm")
    assert f"the kinetic energy {energy:.1f}-fold, the Jacobian norm {jacobian:.1f}-fold" in guide
    slower = mean("jacobian", "train_seconds") / mean("none", "train_seconds")
    assert f"about {slower:.1f}× one without it" in guide
    assert f"{mean('jacobian', 'train_seconds'):.0f} s against {mean('none', 'train_seconds'):.0f} s" in guide
