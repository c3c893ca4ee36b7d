"""Adaptive depth on trained models: quality against layer evaluations per sample, judged over seeds.

Run from the repository root (2 CPU threads; about 12 minutes for the three models)::

    OMP_NUM_THREADS=2 .venv/bin/python experiments/adaptive_depth/run.py [--models vit_digits ...]

For each model of ``subjects.SUBJECTS`` and seeds 0, 1, 2 it trains the model, then measures every point of
``methods.measure``: quality (accuracy; perplexity for the language models), layer evaluations per sample and
wall-clock time. Writes ``benchmarks/results/adaptive_depth_cpu.json`` (every point, per-seed values, the verdicts)
and ``benchmarks/results/adaptive_depth_cpu.png`` (the Pareto fronts). A run of some models keeps the others'
recorded results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib
import torch
from methods import measure
from subjects import SUBJECTS

from neuralode_tf.numerics.causality import CausalityWarning

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
RECORD = RESULTS / "adaptive_depth_cpu.json"
MARGIN = 0.5  # accuracy points
SAVING = 0.02  # a candidate saves at least this fraction of the layers on average (3.997 of 4 saves nothing)
RULE = (
    f"candidates: points with at most {1 - SAVING:g} x layers evaluations per sample; per-seed difference "
    f"d = acc(point) - acc(discrete) in points; agree if mean(d) + {MARGIN} > 2 SE, disagree if mean(d) + {MARGIN} "
    "< -2 SE, else inconclusive; SE = sd(d) / sqrt(seeds)"
)
SOLVER_FAMILIES = (
    "fixed grid (layer-aligned)",
    "fixed grid (fewer steps)",
    "dopri5 (batch-joint)",
    "dopri5 (per sample)",
)
METRICS = ("accuracy", "perplexity", "evaluations", "seconds", "mean_exit_depth")


def two_se_verdict(differences: list[float], margin: float) -> dict:
    """Whether ``difference > -margin`` (the point is within ``margin`` of the discrete model), by the two-standard-
    error rule on the per-seed differences: agree if ``mean + margin > 2 SE``, disagree if ``mean + margin < -2 SE``."""
    mean = statistics.fmean(differences)
    se = statistics.stdev(differences) / math.sqrt(len(differences)) if len(differences) > 1 else math.nan
    excess = mean + margin
    verdict = "agree" if excess > 2 * se else "disagree" if excess < -2 * se else "inconclusive"
    return dict(mean_difference=mean, standard_error=se, two_se=2 * se, verdict=verdict)


def summarise(name: str, per_seed: dict[int, dict[str, dict]], seeds: list[int], train: dict) -> dict:
    """Means, deviations and per-seed values of every point, and the verdicts against the discrete model."""
    points = []
    for point in per_seed[seeds[0]]:
        first = per_seed[seeds[0]][point]
        summary = dict(name=point, family=first["family"], settings=first["settings"])
        for metric in (m for m in METRICS if m in first):
            values = [per_seed[s][point][metric] for s in seeds]
            summary[f"{metric}_mean"] = statistics.fmean(values)
            summary[f"{metric}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
            summary[f"{metric}_per_seed"] = values
        points.append(summary)
    return judge(dict(model=name, layers=per_seed[seeds[0]]["discrete"]["evaluations"], seeds=seeds, training=train,
                      points=points))  # fmt: skip


def judge(summary: dict) -> dict:
    """``summary`` with the question's verdicts: every point that saves at least ``SAVING`` of the layers, against
    the discrete model, per seed."""
    layers, points = summary["layers"], summary["points"]
    discrete = next(p for p in points if p["name"] == "discrete")["accuracy_per_seed"]
    tests = {}
    for point in points:
        if point["name"] == "discrete" or point["evaluations_mean"] > (1 - SAVING) * layers:
            continue
        d = [a - b for a, b in zip(point["accuracy_per_seed"], discrete, strict=True)]
        tests[point["name"]] = dict(family=point["family"], evaluations_mean=point["evaluations_mean"], differences=d,
                                    **two_se_verdict(d, MARGIN))  # fmt: skip
    solvers = {n: t for n, t in tests.items() if t["family"] in SOLVER_FAMILIES}
    return dict(
        summary,
        question=f"does any solver reach the discrete model's accuracy within {MARGIN} points with fewer evaluations "
        f"than it has layers ({layers:g}; at least {SAVING:.0%} fewer)?",
        verdict_solvers=overall(solvers),
        verdict_all_methods=overall(tests),
        tests=tests,
    )


def overall(group: dict) -> str:
    verdicts = [t["verdict"] for t in group.values()]
    if not verdicts:
        return "no candidate (none uses fewer evaluations than layers)"
    return "agree" if "agree" in verdicts else "disagree" if set(verdicts) == {"disagree"} else "inconclusive"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(SUBJECTS), default=list(SUBJECTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--no-per-sample", action="store_true", help="skip per-sample dopri5")
    parser.add_argument("--no-early-exit", action="store_true", help="skip the event-based early exit")
    parser.add_argument("--rejudge", action="store_true", help="recompute the verdicts of the recorded points only")
    args = parser.parse_args()
    # dopri5 on a causal language model warns that its steps depend on every position of a window: once is enough
    warnings.filterwarnings("once", category=CausalityWarning)
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    models = record.get("models", {})
    if args.rejudge:
        record["models"] = {name: judge(summary) for name, summary in models.items()}
        record.update(saving=SAVING, rule=RULE)
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        for summary in record["models"].values():
            report(summary)
        return
    for name in args.models:
        start, per_seed, train = time.perf_counter(), {}, {}
        with tempfile.TemporaryDirectory() as workdir:
            for seed in args.seeds:
                began = time.perf_counter()
                subject = SUBJECTS[name](seed, Path(workdir))
                trained = time.perf_counter()
                per_seed[seed] = measure(subject, not args.no_per_sample, not args.no_early_exit)
                train[seed] = {k: v for k, v in subject.train_result.items() if not isinstance(v, (list, dict))}
                print(f"{name} seed {seed}: trained in {trained - began:.0f} s, measured in "
                      f"{time.perf_counter() - trained:.0f} s", flush=True)  # fmt: skip
        summary = summarise(name, per_seed, args.seeds, train)
        summary["runtime_s"] = round(time.perf_counter() - start, 1)
        summary["skipped"] = [
            *(["per-sample dopri5"] if args.no_per_sample else []),
            *(["event early exit"] if args.no_early_exit else []),
        ]
        models[name] = summary
        report(summary)
    record = dict(
        date=datetime.date.today().isoformat(),
        command=f"OMP_NUM_THREADS={torch.get_num_threads()} .venv/bin/python experiments/adaptive_depth/run.py",
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        evaluations="layer evaluations per sample: one = every part of one layer on one state (a splitting method's "
        "nfe / parts) + nfe_dense; batch-joint solves count every call for every sample",
        margin=MARGIN,
        saving=SAVING,
        rule=RULE,
        models={name: models[name] for name in SUBJECTS if name in models},
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    plot(record["models"], RESULTS / "adaptive_depth_cpu.png")


def report(summary: dict) -> None:
    print(f"\n{summary['model']}: {'point':36s} {'evals':>7s} {'accuracy (%)':>15s} {'ms':>8s}")
    for point in sorted(summary["points"], key=lambda p: p["evaluations_mean"]):
        perplexity = f" ppl {point['perplexity_mean']:.3f}" if "perplexity_mean" in point else ""
        print(f"  {point['name']:36s} {point['evaluations_mean']:7.2f} {point['accuracy_mean']:7.2f} ± "
              f"{point['accuracy_sd']:.2f} {1e3 * point['seconds_mean']:8.1f}{perplexity}")  # fmt: skip
    for name, test in summary["tests"].items():
        print(f"  {name:36s} d = {test['mean_difference']:+.2f}, 2SE = {test['two_se']:.2f}: {test['verdict']}")
    print(f"  verdict (solvers): {summary['verdict_solvers']}; all methods: {summary['verdict_all_methods']}")


def plot(models: dict[str, dict], path: Path) -> None:
    styles = {
        "discrete": ("k*", 14),
        "fixed grid (layer-aligned)": ("x", 9),
        "fixed grid (fewer steps)": ("o", 7),
        "drop last layers": ("s", 7),
        "dopri5 (batch-joint)": ("D", 7),
        "dopri5 (per sample)": ("v", 8),
        "early exit (confident)": ("^", 8),
        "early exit (stops changing)": ("<", 8),
        "early exit (event)": ("P", 8),
    }
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.8), squeeze=False)
    for ax, (name, summary) in zip(axes[0], models.items()):
        points = summary["points"]
        for family, (style, size) in styles.items():
            members = [p for p in points if p["family"] == family]
            if members:
                x, y = [p["evaluations_mean"] for p in members], [p["accuracy_mean"] for p in members]
                sd = [p["accuracy_sd"] for p in members]
                ax.errorbar(x, y, yerr=sd, fmt=style, ms=size, capsize=2, label=family)
        front, best = [], -math.inf
        for p in sorted(points, key=lambda p: (p["evaluations_mean"], -p["accuracy_mean"])):
            if p["accuracy_mean"] > best:
                front.append(p)
                best = p["accuracy_mean"]
        ax.plot([p["evaluations_mean"] for p in front], [p["accuracy_mean"] for p in front], "-", color="gray", lw=1,
                zorder=0, label="Pareto front")  # fmt: skip
        ax.axvline(summary["layers"], color="gray", ls=":", lw=1)
        ax.set(xscale="log", xlabel="layer evaluations per sample", title=f"{name} ({len(summary['seeds'])} seeds)",
               ylabel="accuracy (%, mean ± sd)" if ax is axes[0][0] else None)  # fmt: skip
        ax.grid(alpha=0.3, which="both")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
