"""Fitted convergence orders of every fixed-grid and splitting method on a random transformer field.

Error at t=1 against a float64 dopri5 reference at rtol=atol=1e-10; the order is the slope of a
least-squares fit of log(error) against log(step size) and must be within 0.3 of theory. The cases come
from the tableau registry: a tableau added to ``TABLEAUS`` is checked against its ``order`` here, as a
Runge-Kutta method and as the sub-step of both splittings.
"""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf import solve
from neuralode_tf.numerics import SPLITTING_SCHEMES, TABLEAUS, methods
from tests._problems import tokens, transformer_field

LOW = [4, 8, 16, 32, 64]
HIGH = [2, 4, 8, 16]
"""Step counts: high orders reach the reference's accuracy with fewer steps."""


def _steps(order: int) -> list[int]:
    return HIGH if order >= 4 else LOW


CASES = [
    # method, substep, theoretical order, step counts: every registered tableau, alone and as the sub-step of
    # every registered splitting scheme (Lie-Trotter is first order whatever the sub-step; Strang second order
    # with a sub-step of order 2 or more)
    *[(name, None, tableau.order, _steps(tableau.order)) for name, tableau in TABLEAUS.items()],
    *[
        (scheme.name, name, min(scheme.order, tableau.order), LOW)
        for scheme in SPLITTING_SCHEMES.values()
        for name, tableau in TABLEAUS.items()
    ],
]


@pytest.fixture(scope="module")
def _references() -> dict:
    return {}


@pytest.fixture
def problem(device, _references):
    """The field, tokens and reference solution on ``device``; the reference is solved once per module."""
    torch.manual_seed(0)
    field, x = transformer_field(device=device), tokens(device=device)
    if "y1" not in _references:
        _references["y1"] = solve(field, x, [0.0, 1.0], method="dopri5", rtol=1e-10, atol=1e-10).y1
    return field, x, _references["y1"]


def fitted_order(step_sizes: list[float], errors: list[float]) -> float:
    xs, ys = [math.log(h) for h in step_sizes], [math.log(e) for e in errors]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)


@pytest.mark.parametrize("method, substep, order, steps", CASES, ids=[f"{m}-{s}" for m, s, _, _ in CASES])
def test_convergence_order(problem, method, substep, order, steps):
    field, x, reference = problem
    errors = []
    for n in steps:
        y1 = solve(field, x, [0.0, 1.0], method=method, steps=n, substep=substep).y1
        errors.append((y1 - reference).abs().max().item())
    fitted = fitted_order([1.0 / n for n in steps], errors)
    assert abs(fitted - order) <= 0.3, f"{method}/{substep}: fitted order {fitted:.2f}, expected {order}"


@pytest.mark.parametrize("method", [name for name in TABLEAUS if name in methods("torchdiffeq")])
def test_torchdiffeq_fixed_grid_orders(problem, method):
    """The same fit through torchdiffeq's fixed-grid methods of the built-in tableaus' names (its rk4 is the 3/8
    rule, also fourth order)."""
    field, x, reference = problem
    order = TABLEAUS[method].order
    errors = [
        (solve(field, x, [0.0, 1.0], method=method, steps=n, backend="torchdiffeq").y1 - reference).abs().max().item()
        for n in _steps(order)
    ]
    fitted = fitted_order([1.0 / n for n in _steps(order)], errors)
    assert abs(fitted - order) <= 0.3, f"torchdiffeq {method}: fitted order {fitted:.2f}, expected {order}"
