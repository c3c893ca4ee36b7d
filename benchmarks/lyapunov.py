"""The cost of Lyapunov exponents: ``lyapunov_spectrum`` for ``k`` exponents over the forward solve, against ``k + 1``.

A transformer layer's field (attention and MLP branches, ``SplitField``, float32, eval) on ``batch x tokens x d``
states is solved over depth ``[0, 4]`` with rk4 (2 steps per unit of depth): the forward solve of ``x`` alone (eager,
and with ``solve(..., compile=True)``), and :func:`neuralode_tf.dynamics.lyapunov.lyapunov_spectrum` with
``k = 1, 2, 4, 8`` tangent vectors on the same grid (re-orthonormalised after every step: its default), eager and with
``compile=True`` (the joint field ``(x, V) -> (f(x), J V)`` under ``torch.compile``). All run without gradients. The
claim is ``time(k exponents) <= (k + 1) x time(eager forward solve)``: each evaluation of the joint field is one
forward pass of the field with ``k`` tangents pushed through it (forward-mode AD, vectorised over the tangents), so
its arithmetic is about ``k + 1`` forward passes (``k + 2`` with the weights' zero tangents); compiled exponents are
also given over the compiled forward solve.

Times are paired ratios (``benchmarks/harness.py``): the median over rounds of ``time(lyapunov, k) / time(forward)``
within a round, the order shuffled in each round, after two warm-up calls (which compile).
``OMP_NUM_THREADS=1 python -m benchmarks.lyapunov`` prints them and writes ``benchmarks/results/lyapunov_<device>.json``
(the thread count is recorded in it). At these sizes a CPU spends most of a field evaluation on per-operation
overhead, which eager forward-mode AD multiplies (functorch's wrappers around every operation): that is what the
eager rows measure, and what compilation removes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.harness import rounds
from neuralode_tf import solve
from neuralode_tf.dynamics.lyapunov import lyapunov_spectrum
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch

RESULTS = Path(__file__).parent / "results"
SPAN, STEPS = (0.0, 4.0), 8
KS = (1, 2, 4, 8)
MODES = {"eager": False, "compiled": True}
SIZES = ({"dim": 32, "tokens": 8, "batch": 1}, {"dim": 64, "tokens": 16, "batch": 4})


def measure(dim: int, tokens: int, batch: int, repeats: int, device: str = "cpu") -> dict[str, object]:
    """Paired ratios and median times (module docstring) for one state size."""
    torch.manual_seed(0)
    field = SplitField(AttentionBranch(dim, 4), MLPBranch(dim)).to(device).eval()
    x = torch.randn(batch, tokens, dim, device=device)

    def forward(compile: bool) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                solve(field, x, list(SPAN), method="rk4", steps=STEPS, compile=compile)

        return run

    def exponents(k: int, compile: bool) -> Callable[[], None]:
        def run() -> None:
            lyapunov_spectrum(field, x, *SPAN, k=k, method="rk4", steps=STEPS, compile=compile)

        return run

    steps: dict[str, Callable[[], None]] = {"forward": forward(False), "forward compiled": forward(True)}
    for mode, compile in MODES.items():
        steps.update({f"{mode} k={k}": exponents(k, compile) for k in KS})
    times = rounds(steps, repeats=repeats, warmup=2)  # the warm-up compiles

    def ratio(name: str, baseline: str) -> float:
        return statistics.median(a / b for a, b in zip(times[name], times[baseline]))

    ratios = {mode: {f"k={k}": ratio(f"{mode} k={k}", "forward") for k in KS} for mode in MODES}
    return {
        "size": {"dim": dim, "tokens": tokens, "batch": batch, "n": dim * tokens * batch},
        "ratio": ratios,
        "met": {mode: {f"k={k}": row[f"k={k}"] <= k + 1 for k in KS} for mode, row in ratios.items()},
        "compiled over compiled forward": {f"k={k}": ratio(f"compiled k={k}", "forward compiled") for k in KS},
        "seconds": {name: statistics.median(values) for name, values in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = [measure(**size, repeats=args.repeats, device=device) for size in SIZES]
    for row in rows:
        size, ratios = row["size"], row["ratio"]
        print(f"d={size['dim']} tokens={size['tokens']} batch={size['batch']} (n={size['n']}):")  # type: ignore[index]
        for mode in MODES:
            for k in KS:
                value = ratios[mode][f"k={k}"]  # type: ignore[index]
                verdict = "met" if value <= k + 1 else "NOT met"
                print(f"  {mode:>8} k={k}: {value:5.2f}x the eager forward solve (bound {k + 1}x: {verdict})")
    out = RESULTS / f"lyapunov_{device}.json"
    record = {
        "what": "time(lyapunov_spectrum, k) / time(eager forward solve), rk4, 8 steps over [0, 4], no gradients",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "repeats": args.repeats,
        "rows": rows,
    }
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
