"""RNODE's claim on a trained ``vit_digits``: do kinetic-energy and Jacobian costs cut an adaptive solver's evaluations?

Run from the repository root (2 CPU threads; about 20 minutes)::

    OMP_NUM_THREADS=2 .venv/bin/python experiments/regularity/run.py

Finlay et al. (ICML 2020, "How to train your neural ODE") add ``λ_K ∫ ||f||² dt + λ_J ∫ ||∂f/∂x||_F² dt`` to the
loss and report that the trained ODEs need far fewer evaluations of an adaptive solver at the same tolerance, at
comparable accuracy. Here, for seeds 0, 1, 2, ``vit_digits`` (4 parallel blocks, preset defaults otherwise) is
trained as an ODE, with 4 classical RK4 steps on ``[0, 4]`` (``model.method=rk4``: 16 evaluations, close to the
flow), with no cost, the kinetic energy (``model.transport_cost``), the Jacobian cost (``model.jacobian_cost``) or
both. On the test split (359 images) each trained field, without its costs, is then solved by dopri5 at
``rtol = atol = tol`` (batch-joint, torchdiffeq): evaluations (``stats.nfe``) and accuracy per tolerance, and the
mean kinetic energy and Jacobian norm along the RK4 solve (the costs' integrands, measured with weight 0 and 8
probes). Writes ``benchmarks/results/regularity_cpu.json`` and ``benchmarks/results/regularity_cpu.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path

import matplotlib
import torch

from neuralode_tf import set_solve_options, solve
from neuralode_tf.fields import JacobianFrobenius, KineticEnergy
from neuralode_tf.protocols import Augmented
from neuralode_tf.train import TrainConfig, load_run, train

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
KINETIC, JACOBIAN = 0.1, 0.05  # λ_K (transport_cost: λ/2 · mean e(T)) and λ_J (λ_J · mean j(T))
COSTS = {
    "none": {},
    "kinetic": {"transport_cost": KINETIC},
    "jacobian": {"jacobian_cost": JACOBIAN},
    "both": {"transport_cost": KINETIC, "jacobian_cost": JACOBIAN},
}
TRAINING = {"method": "rk4"}  # unit steps on [0, 4]
TOLERANCES = (1e-2, 1e-3, 1e-4)
PROBES = 8


def bare(field: torch.nn.Module) -> torch.nn.Module:
    """The field without its cost augmentations."""
    while isinstance(field, (KineticEnergy, JacobianFrobenius)):
        field = field.field
    assert not isinstance(field, Augmented)
    return field


def measure(cost: str, seed: int, workdir: Path) -> dict:
    out = workdir / f"{cost}_seed{seed}"
    began = time.perf_counter()
    config = TrainConfig("vit_digits", seed=seed, progress=False, out_dir=str(out), model={**TRAINING, **COSTS[cost]})
    result = train(config)
    train_seconds = time.perf_counter() - began
    _, task = load_run(out)
    model = task.model.eval()
    inputs, target = task.batch(task.test, torch.arange(len(task.test)), torch.device("cpu"))
    encoder, field = model.encoder, bare(model.encoder.field)
    trained = dict(encoder.solve_options)
    x0 = model.tokens(inputs["images"])
    # the costs' integrands along the trained solve: (1/n d) ∫ ||f||² dt and (1/n d) ∫ ||∂f/∂x||_F² dt, per sample
    generator = torch.Generator().manual_seed(seed)
    costs = JacobianFrobenius(KineticEnergy(field, 0.0), 0.0, probes=PROBES, generator=generator)
    *_, energy, jacobian = solve(costs, costs.initial_state(x0), [encoder.t0, encoder.t1], **trained).y1
    encoder.field = field  # solve the bare field from here on
    row = dict(
        cost=cost,
        seed=seed,
        train_seconds=train_seconds,
        trained_accuracy=100 * result["test_accuracy"],
        kinetic_energy=energy.mean().item(),
        jacobian_norm=jacobian.mean().item(),
    )
    with torch.no_grad():
        for tol in TOLERANCES:
            set_solve_options(model, method="dopri5", rtol=tol, atol=tol, backend="torchdiffeq")
            logits = model(**inputs)
            row[f"nfe_{tol:g}"] = encoder.stats.nfe
            row[f"accuracy_{tol:g}"] = 100 * (logits.argmax(-1) == target).double().mean().item()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    start, rows = time.perf_counter(), []
    with tempfile.TemporaryDirectory() as workdir:
        for seed in args.seeds:
            for cost in COSTS:
                rows.append(measure(cost, seed, Path(workdir)))
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}),
                      flush=True)  # fmt: skip
    summary = {}
    for cost in COSTS:
        mine = [r for r in rows if r["cost"] == cost]
        summary[cost] = {
            key: dict(mean=statistics.fmean(r[key] for r in mine), sd=statistics.stdev(r[key] for r in mine))
            for key in mine[0]
            if key not in ("cost", "seed") and len(mine) > 1
        }
    record = dict(
        date=datetime.date.today().isoformat(),
        command=f"OMP_NUM_THREADS={torch.get_num_threads()} .venv/bin/python experiments/regularity/run.py",
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        preset="vit_digits",
        training=dict(TRAINING, note="unit steps on [0, 4]: 4 RK4 steps, 16 field evaluations per forward"),
        costs=COSTS,
        tolerances=list(TOLERANCES),
        evaluation="test split (359 images), the bare field solved by dopri5 (torchdiffeq) at rtol = atol = tol, "
        "batch-joint; nfe = stats.nfe",
        rows=rows,
        summary=summary,
        runtime_s=round(time.perf_counter() - start, 1),
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "regularity_cpu.json").write_text(json.dumps(record, indent=2) + "\n")
    plot(rows, RESULTS / "regularity_cpu.png")


def plot(rows: list[dict], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, cost in enumerate(COSTS):
        mine = [r for r in rows if r["cost"] == cost]
        nfe = [statistics.fmean(r[f"nfe_{tol:g}"] for r in mine) for tol in TOLERANCES]
        acc = [statistics.fmean(r[f"accuracy_{tol:g}"] for r in mine) for tol in TOLERANCES]
        left.plot(TOLERANCES, nfe, "o-", label=cost)
        right.plot(nfe, acc, "o-", label=cost)
        for r in mine:
            left.plot(TOLERANCES, [r[f"nfe_{tol:g}"] for tol in TOLERANCES], ".", color=f"C{i}", alpha=0.4)
    left.set(xscale="log", xlabel="dopri5 tolerance (rtol = atol)", ylabel="field evaluations (mean of seeds)",
             title="vit_digits trained with 4 RK4 steps")  # fmt: skip
    right.set(xlabel="field evaluations", ylabel="test accuracy under dopri5 (%)", title="accuracy against cost")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
