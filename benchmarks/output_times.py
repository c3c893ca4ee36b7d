"""Many output times: the field evaluations of one dopri5 solve asked for 200 times, ours against the peers'.

A transformer layer's field (attention and MLP branches, d = 32, 2 x 8 tokens, float64) is solved over
``[0, 4]`` with dopri5 at ``rtol = 1e-6, atol = 1e-8``, asked for its state at 200 evenly spaced times, by
``neuralode_tf.solve`` on the torchdiffeq and torchode backends and by ``torchdiffeq.odeint`` and torchode's own
``AutoDiffAdjoint`` on the same field; and at 2 times by ``solve``, the cost of the solve alone, and with a step
forced onto every output time (``options={"step_t": t}``, what ``solve`` once did by default). Evaluations are
counted, not timed, so no timing noise enters them (the floating-point steps of another torch build could change
them by a step; ``tests/test_side_by_side.py`` recomputes the claim in its run). ``python -m benchmarks.output_times``
prints them and writes ``benchmarks/results/output_times_<device>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torchdiffeq
import torchode as to

from neuralode_tf import solve
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch

RESULTS = Path(__file__).parent / "results"
TOLERANCES = dict(rtol=1e-6, atol=1e-8)


def count_evaluations(device: str = "cpu", n_times: int = 200) -> dict[str, int]:
    """Field evaluations of each solve (module docstring), by name."""
    torch.manual_seed(0)
    field = SplitField(AttentionBranch(32, 4), MLPBranch(32)).double().to(device)
    x = torch.randn(2, 8, 32, dtype=torch.float64, device=device)
    times = torch.linspace(0.0, 4.0, n_times, dtype=torch.float64, device=device)
    counts = {"torchdiffeq": 0, "torchode": 0}

    def counted(name: str, shape: torch.Size):
        def f(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            counts[name] += 1
            return field(t.reshape(()), y.reshape(shape)).reshape(y.shape)

        return f

    with torch.no_grad():
        torchdiffeq.odeint(counted("torchdiffeq", x.shape), x, times, method="dopri5", **TOLERANCES)
        term = to.ODETerm(counted("torchode", x.shape))
        controller = to.IntegralController(term=term, **TOLERANCES)
        problem = to.InitialValueProblem(x.reshape(1, -1), t_start=times[:1], t_end=times[-1:], t_eval=times[None])
        to.AutoDiffAdjoint(to.Dopri5(term=term), controller).solve(problem)
        ours = {
            f"solve on {backend}": solve(field, x, times, method="dopri5", backend=backend, **TOLERANCES).stats.nfe
            for backend in ("torchdiffeq", "torchode")
        }
        alone = solve(field, x, times[[0, -1]], method="dopri5", backend="torchdiffeq", **TOLERANCES).stats.nfe
        stepped = solve(field, x, times, method="dopri5", options={"step_t": times}, **TOLERANCES).stats.nfe
    return {**ours, **counts, "solve, 2 times": alone, "solve, a step onto each time": stepped}


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    counts = count_evaluations(device)
    for name, n in counts.items():
        print(f"{name:>24}: {n} evaluations")
    out = RESULTS / f"output_times_{device}.json"
    out.write_text(json.dumps({"n_times": 200, "evaluations": counts}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
