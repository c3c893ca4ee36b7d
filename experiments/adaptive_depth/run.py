"""Adaptive depth on a trained ``vit_digits``: test accuracy against field evaluations per sample.

Run from the repository root (2 CPU threads, about 2 minutes)::

    OMP_NUM_THREADS=2 .venv/bin/python experiments/adaptive_depth/run.py

For seeds 0, 1, 2 it trains the ``vit_digits`` preset (defaults), then on the test split measures, per method, the
accuracy and the field evaluations per sample. One field evaluation is one layer (the parallel block's attention and
MLP branches on the same state); a batch-joint solve evaluates every sample at every call, so its evaluations per
sample are ``stats.nfe + stats.nfe_dense``. Per-sample methods (per-sample dopri5, early exit) solve one sample at a
time and report the mean of their per-sample counts. Writes ``benchmarks/results/adaptive_depth_cpu.json`` and
``benchmarks/results/adaptive_depth_cpu.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import matplotlib
import torch

from neuralode_tf import set_solve_options
from neuralode_tf.dynamics import depth_readout
from neuralode_tf.numerics import solve
from neuralode_tf.train import TrainConfig, load_run, train

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
DEPTH = 4
TOLERANCES = (1e-1, 1e-2, 1e-3, 1e-4)
PER_SAMPLE_TOLERANCES = (1e-1, 1e-2)
THRESHOLDS = (0.9, 0.99, 0.999)
MARGIN = 0.5  # accuracy points
SOLVER_FAMILIES = (
    "fixed grid (layer-aligned)",
    "fixed grid (fewer steps)",
    "dopri5 (batch-joint)",
    "dopri5 (per sample)",
)


def accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    return 100.0 * (logits.argmax(-1) == target).double().mean().item()


def readout(model, x: torch.Tensor) -> torch.Tensor:
    """The model's head on the state ``x`` (final LayerNorm, class token, linear head)."""
    return model.forward_head(model.norm(x))


class Unaligned(torch.nn.Module):
    """The field ``f(t, x)`` of a stack without its ``jump_times``: a solver's grid ignores the layer boundaries."""

    def __init__(self, field: torch.nn.Module):
        super().__init__()
        self.inner = field

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.inner(t, x)


def measure_seed(seed: int, workdir: Path, per_sample: bool, early_exit: bool) -> dict[str, dict]:
    """Train ``vit_digits`` with ``seed`` and measure every point; ``{point name: {accuracy, evaluations, ...}}``."""
    out = workdir / f"seed{seed}"
    result = train(TrainConfig("vit_digits", seed=seed, progress=False, out_dir=str(out)))
    _, task = load_run(out)
    model = task.model.eval()
    rows = torch.arange(len(task.test))
    inputs, target = task.batch(task.test, rows, torch.device("cpu"))
    images = inputs["images"]
    field = model.encoder.field
    points: dict[str, dict] = {}

    def joint(name: str, family: str, settings: dict, **options) -> None:
        set_solve_options(model, **options)
        with torch.no_grad():
            logits = model(images)
        stats = model.encoder.stats
        points[name] = dict(
            family=family, settings=settings, accuracy=accuracy(logits, target), evaluations=stats.nfe + stats.nfe_dense
        )

    # the discrete model: the preset's own solve (Euler, unit steps on [0, 4])
    default = dict(model.encoder.solve_options)
    joint("discrete (euler, 4 unit steps)", "discrete", default, **default)
    assert points["discrete (euler, 4 unit steps)"]["evaluations"] == DEPTH
    assert abs(points["discrete (euler, 4 unit steps)"]["accuracy"] - 100 * result["test_accuracy"]) < 1e-6

    # fixed grids through set_solve_options: the preset's field declares its layer boundaries (jump_times), so every
    # grid is refined onto them and "fewer steps" still evaluates all 4 layers (recorded to show it)
    for steps in (1, 2, 3):
        joint(
            f"euler, {steps} step{'s' * (steps > 1)} (layer-aligned)",
            "fixed grid (layer-aligned)",
            dict(method="euler", steps=steps),
            method="euler",
            steps=steps,
        )
    joint(
        "midpoint, 1 step (layer-aligned)",
        "fixed grid (layer-aligned)",
        dict(method="midpoint", steps=1),
        method="midpoint",
        steps=1,
    )
    discrete = points["discrete (euler, 4 unit steps)"]
    for steps in (1, 2, 3):
        aligned = points[f"euler, {steps} step{'s' * (steps > 1)} (layer-aligned)"]
        assert aligned["evaluations"] == DEPTH and aligned["accuracy"] == discrete["accuracy"]
    assert points["midpoint, 1 step (layer-aligned)"]["evaluations"] == 2 * DEPTH

    # adaptive dopri5, batch-joint (one error norm over the whole batch)
    for tol in TOLERANCES:
        joint(
            f"dopri5 joint, tol {tol:g}",
            "dopri5 (batch-joint)",
            dict(method="dopri5", rtol=tol, atol=tol),
            method="dopri5",
            rtol=tol,
            atol=tol,
        )
    set_solve_options(model, **default)

    # dropping the last layers: solve [0, k] with the discrete model's steps, then the head
    with torch.no_grad():
        x0 = model.tokens(images)
        lens = depth_readout(model, [1.0, 2.0, 3.0], images)
        for k in (1, 2, 3):
            solution = solve(field, x0, [0.0, float(k)], method="euler", step_size=1.0)
            logits = readout(model, solution.y1)
            assert solution.stats.nfe == k and torch.allclose(logits, lens.logits[k - 1], atol=1e-5)
            points[f"drop last {DEPTH - k} (depth {k})"] = dict(
                family="drop last layers",
                settings=dict(depth=k),
                accuracy=accuracy(logits, target),
                evaluations=solution.stats.nfe,
            )

        # fixed grids with fewer steps than layers: the same field without its jump_times, so a step of length
        # 4 / steps uses the layer of its start and skips the others
        free = Unaligned(field)
        for method, steps in (("euler", 1), ("euler", 2), ("euler", 3), ("midpoint", 1), ("rk4", 1)):
            solution = solve(free, x0, [0.0, float(DEPTH)], method=method, steps=steps)
            points[f"{method}, {steps} step{'s' * (steps > 1)}"] = dict(
                family="fixed grid (fewer steps)",
                settings=dict(method=method, steps=steps, jump_times=False),
                accuracy=accuracy(readout(model, solution.y1), target),
                evaluations=solution.stats.nfe + solution.stats.nfe_dense,
            )

        # early exit at layer boundaries: the readout after each layer, exit at the first confident one
        layer_logits = torch.cat([lens.logits, lens.final_logits[None]])  # (4, B, classes)
        confidence = layer_logits.softmax(-1).amax(-1)  # (4, B)
        for threshold in THRESHOLDS:
            confident = confidence >= threshold
            confident[-1] = True
            exit_layer = confident.double().argmax(0)  # first confident layer (0-based)
            chosen = layer_logits[exit_layer, torch.arange(len(target))]
            points[f"exit at layer, p >= {threshold:g}"] = dict(
                family="early exit (layer readouts)",
                settings=dict(threshold=threshold),
                accuracy=accuracy(chosen, target),
                evaluations=(exit_layer + 1).double().mean().item(),
            )

    if per_sample:  # dopri5 on one sample at a time: each sample takes its own steps
        for tol in PER_SAMPLE_TOLERANCES:
            correct, evaluations = 0, 0
            with torch.no_grad():
                for i in range(len(target)):
                    solution = solve(field, x0[i : i + 1], [0.0, float(DEPTH)], method="dopri5", rtol=tol, atol=tol)
                    correct += int(readout(model, solution.y1).argmax(-1).item() == target[i].item())
                    evaluations += solution.stats.nfe + solution.stats.nfe_dense
            points[f"dopri5 per sample, tol {tol:g}"] = dict(
                family="dopri5 (per sample)",
                settings=dict(method="dopri5", rtol=tol, atol=tol),
                accuracy=100.0 * correct / len(target),
                evaluations=evaluations / len(target),
            )

    if early_exit:  # an event in depth on each sample's Euler solve: stop when max softmax crosses the threshold
        for threshold in THRESHOLDS:

            def event(t, x, threshold=threshold):
                return readout(model, x).softmax(-1).amax() - threshold

            correct, evaluations, depths = 0, 0, []
            with torch.no_grad():
                for i in range(len(target)):
                    solution = solve(
                        field, x0[i : i + 1], [0.0, float(DEPTH)], method="euler", step_size=1.0, event=event
                    )
                    correct += int(readout(model, solution.y1).argmax(-1).item() == target[i].item())
                    evaluations += solution.stats.nfe + solution.stats.nfe_dense
                    depths.append(DEPTH if solution.event_t is None else float(solution.event_t))
            points[f"event exit, p >= {threshold:g}"] = dict(
                family="early exit (event)",
                settings=dict(threshold=threshold, method="euler", step_size=1.0),
                accuracy=100.0 * correct / len(target),
                evaluations=evaluations / len(target),
                mean_exit_depth=sum(depths) / len(depths),
            )
    return points


def two_se_verdict(differences: list[float], margin: float) -> dict:
    """Whether ``difference > -margin`` (the point is within ``margin`` of the discrete model), by the two-standard-
    error rule on the per-seed differences: agree if ``mean + margin > 2 SE``, disagree if ``mean + margin < -2 SE``."""
    mean = statistics.fmean(differences)
    se = statistics.stdev(differences) / math.sqrt(len(differences)) if len(differences) > 1 else math.nan
    excess = mean + margin
    verdict = "agree" if excess > 2 * se else "disagree" if excess < -2 * se else "inconclusive"
    return dict(mean_difference=mean, standard_error=se, two_se=2 * se, verdict=verdict)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--no-per-sample", action="store_true", help="skip per-sample dopri5")
    parser.add_argument("--no-early-exit", action="store_true", help="skip the event-based early exit")
    args = parser.parse_args()
    start = time.perf_counter()
    per_seed = {}
    with tempfile.TemporaryDirectory() as workdir:
        for seed in args.seeds:
            began = time.perf_counter()
            per_seed[seed] = measure_seed(seed, Path(workdir), not args.no_per_sample, not args.no_early_exit)
            print(f"seed {seed}: {time.perf_counter() - began:.0f} s", flush=True)

    discrete = "discrete (euler, 4 unit steps)"
    names = list(per_seed[args.seeds[0]])
    points = []
    for name in names:
        accs = [per_seed[s][name]["accuracy"] for s in args.seeds]
        evals = [per_seed[s][name]["evaluations"] for s in args.seeds]
        first = per_seed[args.seeds[0]][name]
        point = dict(
            name=name,
            family=first["family"],
            settings=first["settings"],
            accuracy_mean=statistics.fmean(accs),
            accuracy_sd=statistics.stdev(accs) if len(accs) > 1 else 0.0,
            accuracy_per_seed=accs,
            evaluations_mean=statistics.fmean(evals),
            evaluations_per_seed=evals,
        )
        if "mean_exit_depth" in first:
            point["mean_exit_depth"] = statistics.fmean(per_seed[s][name]["mean_exit_depth"] for s in args.seeds)
        points.append(point)

    # the question: does any method reach the discrete accuracy within MARGIN points with fewer evaluations than layers?
    tests = {}
    for point in points:
        if point["name"] == discrete or point["evaluations_mean"] >= DEPTH:
            continue
        differences = [per_seed[s][point["name"]]["accuracy"] - per_seed[s][discrete]["accuracy"] for s in args.seeds]
        tests[point["name"]] = dict(
            family=point["family"],
            evaluations_mean=point["evaluations_mean"],
            differences=differences,
            **two_se_verdict(differences, MARGIN),
        )
    solvers = {n: t for n, t in tests.items() if t["family"] in SOLVER_FAMILIES}

    def overall(group: dict) -> str:
        verdicts = [t["verdict"] for t in group.values()]
        if not verdicts:
            return "no candidate (none uses fewer evaluations than layers)"
        return "agree" if "agree" in verdicts else "disagree" if set(verdicts) == {"disagree"} else "inconclusive"

    elapsed = time.perf_counter() - start
    record = dict(
        date=datetime.date.today().isoformat(),
        command=" ".join(["OMP_NUM_THREADS=2 .venv/bin/python experiments/adaptive_depth/run.py", *sys.argv[1:]]),
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        seeds=args.seeds,
        preset="vit_digits",
        evaluations="field evaluations per sample: one evaluation = one layer (attention + MLP branches); "
        "stats.nfe + stats.nfe_dense",
        question=f"does any solver reach the discrete model's accuracy within {MARGIN} points with fewer evaluations "
        f"than it has layers ({DEPTH})?",
        rule="per-seed difference d = acc(point) - acc(discrete) in points; agree if mean(d) + 0.5 > 2 SE, "
        "disagree if mean(d) + 0.5 < -2 SE, else inconclusive; SE = sd(d) / sqrt(seeds)",
        verdict_solvers=overall(solvers),
        verdict_all_methods=overall(tests),
        tests=tests,
        points=points,
        runtime_s=round(elapsed, 1),
        skipped=[
            *(["per-sample dopri5"] if args.no_per_sample else []),
            *(["event early exit"] if args.no_early_exit else []),
        ],
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "adaptive_depth_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    plot(points, RESULTS / "adaptive_depth_cpu.png")

    print(f"{'point':36s} {'evals':>7s} {'accuracy (%)':>14s}")
    for point in sorted(points, key=lambda p: p["evaluations_mean"]):
        print(
            f"{point['name']:36s} {point['evaluations_mean']:7.2f} "
            f"{point['accuracy_mean']:7.2f} ± {point['accuracy_sd']:.2f}"
        )
    for name, test in tests.items():
        print(f"{name:36s} d = {test['mean_difference']:+.2f}, 2SE = {test['two_se']:.2f}: {test['verdict']}")
    print(
        f"verdict (solvers): {record['verdict_solvers']}; all methods: {record['verdict_all_methods']}; {elapsed:.0f} s"
    )


def plot(points: list[dict], path: Path) -> None:
    styles = {
        "discrete": ("k*", 14),
        "fixed grid (layer-aligned)": ("x", 9),
        "fixed grid (fewer steps)": ("o", 7),
        "drop last layers": ("s", 7),
        "dopri5 (batch-joint)": ("D", 7),
        "dopri5 (per sample)": ("v", 8),
        "early exit (layer readouts)": ("^", 8),
        "early exit (event)": ("P", 8),
    }
    fig, ax = plt.subplots(figsize=(8, 5))
    for family, (style, size) in styles.items():
        members = [p for p in points if p["family"] == family]
        if members:
            ax.errorbar(
                [p["evaluations_mean"] for p in members],
                [p["accuracy_mean"] for p in members],
                yerr=[p["accuracy_sd"] for p in members],
                fmt=style,
                ms=size,
                capsize=2,
                label=family,
            )
    front, best = [], -math.inf
    for p in sorted(points, key=lambda p: (p["evaluations_mean"], -p["accuracy_mean"])):
        if p["accuracy_mean"] > best:
            front.append(p)
            best = p["accuracy_mean"]
    ax.plot(
        [p["evaluations_mean"] for p in front],
        [p["accuracy_mean"] for p in front],
        "-",
        color="gray",
        lw=1,
        zorder=0,
        label="Pareto front",
    )
    ax.axvline(DEPTH, color="gray", ls=":", lw=1)
    ax.set(
        xscale="log",
        xlabel="field evaluations per sample (layers)",
        ylabel="test accuracy (%, mean ± sd, 3 seeds)",
        title="vit_digits: accuracy against depth evaluations",
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
