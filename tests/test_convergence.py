"""Fitted convergence orders of every fixed-grid and splitting method on a random transformer field.

Error at t=1 against a float64 dopri5 reference at rtol=atol=1e-10; the order is the slope of a
least-squares fit of log(error) against log(step size) and must be within 0.3 of theory.
"""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf import solve
from tests._problems import tokens, transformer_field

LOW = [4, 8, 16, 32, 64]
CASES = [
    # method, substep, theoretical order, step counts
    ("euler", None, 1, LOW),
    ("midpoint", None, 2, LOW),
    ("heun", None, 2, LOW),
    ("rk4", None, 4, [2, 4, 8, 16]),
    ("rk4_38", None, 4, [2, 4, 8, 16]),
    ("lie_trotter", "euler", 1, LOW),
    ("lie_trotter", "midpoint", 1, LOW),
    ("lie_trotter", "rk4", 1, LOW),
    ("strang", "euler", 1, LOW),
    ("strang", "midpoint", 2, LOW),
    ("strang", "rk4", 2, LOW),
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


def test_torchdiffeq_fixed_grid_orders(problem):
    """The same fit through torchdiffeq's fixed-grid methods (its rk4 is the 3/8 rule)."""
    field, x, reference = problem
    for method, order, steps in [("euler", 1, LOW), ("midpoint", 2, LOW), ("rk4", 4, [2, 4, 8, 16])]:
        errors = [
            (solve(field, x, [0.0, 1.0], method=method, steps=n, backend="torchdiffeq").y1 - reference)
            .abs()
            .max()
            .item()
            for n in steps
        ]
        assert abs(fitted_order([1.0 / n for n in steps], errors) - order) <= 0.3
