"""torchode's test suite, ported to ``neuralode_tf.solve``: fixed steps, single steps, step-size control, gradients.

Ported from the tests/ folder of torchode (github.com/martenlienen/torchode), rewritten as a user of
:func:`neuralode_tf.solve` would check the same properties (no code taken; see ``test_torchode_suite.py`` for
the rest of the port, with ``test_torchode_suite_inputs.py``):

* ``fixed_step_controller_test``: fixed steps on the sine problem against its exact solution, against torchode's
  ``FixedStepController`` run in the test, and the step counts of the grid (spec: each stretch between requested
  times split into ``ceil(length / step)`` equal steps). torchode's fixed steps of dopri5/tsit5 have no
  equivalent (``step_size=`` is refused for adaptive methods), and neither do fixed steps with per-sample spans.
* ``single_step_methods_test``: one step evaluates the field at the method's nodes (torchode's tableau) with the
  states the method prescribes, and returns the method's update.
* ``step_size_controllers_test``: torchode calls its controllers directly; through ``solve`` what shows is a zero
  error (a zero field) giving finite, growing steps, a zero state giving finite gradients, and a rejected first
  step keeping the start value. Controller coefficients, ``dt_min`` and ``dt_max`` are not exposed here.
* ``adjoint_test`` (gradient half): ``gradient="adjoint"`` (torchode's ``BacksolveAdjoint``) and ``"backprop"``
  against exact gradients of ``y0 exp(A t)`` through :func:`torch.linalg.matrix_exp`, with shared and per-sample
  spans, on torchode and torchdiffeq; backprop through a fixed grid under ``gradcheck``; the adjoint on a fixed
  grid. ``JointBacksolveAdjoint`` has no equivalent.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from neuralode_tf import solve
from neuralode_tf.numerics import SolveError, SolverConfigError
from tests.peers.torchode_problems import (
    MATRIX,
    ROWS,
    TORCHODE_STEPPERS,
    LinearDynamics,
    Relaxation,
    linear_exact,
    sine_field,
    sine_solution,
    torchode_reference,
)

F64 = torch.float64
SAME = 1e-12  # the same computation done twice: equal up to rounding


def tensor(values: object, device: torch.device) -> Tensor:
    return torch.tensor(values, dtype=F64, device=device)


def recording(calls: list[tuple[Tensor, Tensor]]) -> Callable[[Tensor, Tensor], Tensor]:
    """The field ``dy/dt = y``, keeping each ``(t, y)`` it is called with."""

    def field(t: Tensor, y: Tensor) -> Tensor:
        calls.append((t.detach().clone(), y.detach().clone()))
        return y

    return field


# --- fixed_step_controller_test ---------------------------------------------------------------------------

FIXED_RUNS = [("builtin", False), ("torchdiffeq", False), ("torchode", False), ("torchode", True)]
# (times, grid settings, steps by the spec's rule: each stretch between requested times in ceil(length/step))
GRIDS = [
    ([0.0, 1.0], dict(steps=10), 10),
    ([0.0, 0.3, 1.0], dict(steps=3), 1 + 3),  # step 1/3: 0.3 -> 1 step, 0.7 -> 3 steps
    ([0.0, 0.3, 1.0], dict(step_size=0.25), 2 + 3),
    ([0.0, 1.77, 3.0], dict(step_size=0.1), 18 + 13),
]


@pytest.mark.parametrize(("times", "grid", "expected"), GRIDS)
@pytest.mark.parametrize(("backend", "per_sample"), FIXED_RUNS)
def test_fixed_step_counts(
    device: torch.device, backend: str, per_sample: bool, times: list[float], grid: dict, expected: int
) -> None:
    """euler evaluates the field once per step, at its start: those times are the grid's left ends, equal steps
    in each stretch, to 1e-11 (a backend may nudge nodes: by an ulp to take a left limit, or torchode's by
    stretching its steps 1e-12 relative so that summed rounding never adds a sliver step)."""
    calls: list[tuple[Tensor, Tensor]] = []
    kwargs = dict(per_sample=per_sample) if backend == "torchode" else {}
    sol = solve(
        recording(calls),
        torch.ones(2, 1, dtype=F64, device=device),
        times,
        method="euler",
        backend=backend,
        **kwargs,
        **grid,
    )
    assert sol.stats.n_accepted == expected
    starts = torch.stack([t.reshape(-1)[0] for t, _ in calls]).cpu()
    step = grid.get("step_size", (times[-1] - times[0]) / grid.get("steps", 1))
    left_ends = []
    for a, b in zip(times[:-1], times[1:]):
        n = math.ceil((b - a) / step - 1e-9)
        left_ends += [a + (b - a) * i / n for i in range(n)]
    assert starts.shape == (expected,)
    assert (starts - torch.tensor(left_ends, dtype=F64)).abs().max().item() <= 1e-11


@pytest.mark.parametrize(("method", "order"), [("euler", 1), ("heun", 2)])
def test_fixed_steps_on_the_sine_problem(device: torch.device, method: str, order: int) -> None:
    """torchode solves the sine problem with fixed steps per sample; here each sample alone (per-sample spans take
    adaptive methods only). heun meets torchode's relative 1e-2 at its steps 0.01 and 0.005 (measured 4e-3), and
    halving the step divides the error by 2^order (ratio within 15%)."""
    for row, step in (([0.1, 0.7, 2.0], 0.01), ([0.5, 1.2, 4.0], 0.005)):
        times = tensor(row, device)
        exact = sine_solution(times)

        def error(h: float, times: Tensor = times, exact: Tensor = exact) -> float:
            sol = solve(sine_field, exact[:1].reshape(1, 1), times, method=method, step_size=h, backend="torchode")
            return ((sol.ys[:, 0, 0] - exact) / exact).abs().max().item()

        coarse, fine = error(step), error(step / 2)
        if method == "heun":
            assert coarse <= 1e-2
        assert abs(coarse / fine / 2**order - 1) <= 0.15
    per_sample_spans = tensor([[0.1, 0.7, 2.0], [0.5, 1.2, 4.0]], device)
    with pytest.raises(SolverConfigError, match="adaptive"):
        solve(
            sine_field,
            sine_solution(per_sample_spans[:, :1]),
            per_sample_spans,
            method=method,
            step_size=0.01,
            backend="torchode",
            per_sample=True,
        )


@pytest.mark.parametrize("method", ["dopri5", "tsit5"])
def test_fixed_steps_of_adaptive_methods_are_refused(device: torch.device, method: str) -> None:
    with pytest.raises(SolverConfigError):
        solve(
            sine_field,
            torch.ones(1, 1, dtype=F64, device=device),
            [0.5, 1.0],
            method=method,
            step_size=0.01,
            backend="torchode",
        )


# --- single_step_methods_test ------------------------------------------------------------------------------


@pytest.mark.parametrize(("backend", "per_sample"), FIXED_RUNS)
@pytest.mark.parametrize("method", ["euler", "heun"])
def test_one_fixed_step_evaluates_the_method_nodes(
    device: torch.device, method: str, backend: str, per_sample: bool
) -> None:
    """One step of length h = 0.5 from t0 = 0.25 on ``y' = y``: euler calls f(t0, y0) and gives ``y0 + h f0``;
    heun also calls f(t0 + h, y0 + h f0) and gives ``y0 + h (f0 + f1) / 2`` (compared to 1e-12)."""
    calls: list[tuple[Tensor, Tensor]] = []
    y0 = tensor([[1.0], [2.0]], device)
    kwargs = dict(per_sample=per_sample) if backend == "torchode" else {}
    sol = solve(recording(calls), y0, [0.25, 0.75], method=method, steps=1, backend=backend, **kwargs)
    h = 0.5
    nodes = [(0.25, y0)] + ([(0.75, y0 + h * y0)] if method == "heun" else [])
    assert len(calls) == len(nodes)
    for (t, y), (t_want, y_want) in zip(calls, nodes):
        assert (t - t_want).abs().max().item() <= SAME and (y - y_want).abs().max().item() <= SAME
    update = y0 + h * y0 if method == "euler" else y0 + h * (y0 + (y0 + h * y0)) / 2
    assert (sol.y1 - update).abs().max().item() <= SAME


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("method", ["dopri5", "tsit5"])
def test_one_adaptive_step_evaluates_the_tableau_nodes(device: torch.device, method: str, per_sample: bool) -> None:
    """A first step as long as the span, with tolerances that accept it: the field is called at ``t0 + c_i h`` for
    torchode's tableau ``c``, and the step equals the one torchode takes itself."""
    calls: list[tuple[Tensor, Tensor]] = []
    y0 = tensor([[1.0], [2.0]], device)
    sol = solve(
        recording(calls),
        y0,
        [0.25, 0.75],
        method=method,
        dt0=0.5,
        rtol=1e3,
        atol=1e3,
        backend="torchode",
        per_sample=per_sample,
    )
    assert sol.stats.n_accepted == 1 and sol.stats.n_rejected == 0
    c = TORCHODE_STEPPERS[method].TABLEAU.c.to(device=device, dtype=F64)
    times = torch.stack([t.reshape(-1)[0] for t, _ in calls])
    assert times.shape == c.shape and (times - (0.25 + 0.5 * c)).abs().max().item() <= SAME
    span = tensor([0.25, 0.75], device)
    t_eval = span.expand(2, -1) if per_sample else span
    theirs = torchode_reference(recording([]), y0, t_eval, method, joint=not per_sample, rtol=1e3, atol=1e3, dt0=0.5)
    assert (sol.y1.reshape(-1) - theirs.ys[..., -1, :].reshape(-1)).abs().max().item() <= SAME


# --- step_size_controllers_test --------------------------------------------------------------------------


@pytest.mark.parametrize("per_sample", [False, True])
def test_zero_error_gives_finite_growing_steps(device: torch.device, per_sample: bool) -> None:
    """A zero field has zero error estimates: the steps must stay finite and grow, so [0, 100] takes few."""
    y0 = tensor([[1.0], [-2.0]], device)
    sol = solve(
        lambda t, y: torch.zeros_like(y),
        y0,
        [0.0, 1.0, 100.0],
        method="dopri5",
        backend="torchode",
        per_sample=per_sample,
    )
    assert torch.equal(sol.ys, y0.expand(3, 2, 1))
    assert sol.stats.n_accepted <= 20  # measured 9


@pytest.mark.parametrize("adjoint", ["backprop", "adjoint"])
@pytest.mark.parametrize("per_sample", [False, True])
def test_zero_state_gives_finite_gradients(device: torch.device, per_sample: bool, adjoint: str) -> None:
    """A state that is exactly 0 has a zero error norm (sqrt(0) has no derivative): the gradient of ``y(1)`` in
    ``y0`` for ``y' = -0.7 y`` is still finite and near ``exp(-0.7)``. A zero state has zero error estimates, so
    the forward solve takes a few long steps, and backprop differentiates those: within 1e-4 (measured 2e-5; the
    adjoint, which controls its own error, 2e-7)."""
    field = LinearDynamics(-0.7 * torch.eye(3, dtype=F64, device=device))
    y0 = torch.zeros(2, 3, dtype=F64, device=device, requires_grad=True)
    sol = solve(field, y0, [0.0, 1.0], method="dopri5", backend="torchode", per_sample=per_sample, gradient=adjoint)
    sol.y1.sum().backward()
    assert y0.grad is not None and torch.isfinite(y0.grad).all()
    assert (y0.grad - math.exp(-0.7)).abs().max().item() <= 1e-4


@pytest.mark.parametrize("per_sample", [False, True])
def test_a_rejected_first_step_keeps_the_start_value(device: torch.device, per_sample: bool) -> None:
    """A first step as long as the span is rejected on this stiff problem; the value at t0 stays y0 exactly and
    the rest is as accurate as the tolerances (rtol 1e-6: within 1e-5, measured 7e-7)."""
    field = Relaxation(tensor([1.0, 30.0], device))
    y0 = tensor([[1.0], [1.0]], device)
    times = tensor([0.0, 0.5, 2.0], device)
    sol = solve(field, y0, times, method="dopri5", backend="torchode", per_sample=per_sample, dt0=2.0)
    assert sol.stats.n_rejected > 0
    assert torch.equal(sol.ys[0], y0)
    exact = field.exact(y0, times[:1].expand(2), times.expand(2, -1))
    assert (sol.ys - exact).abs().max().item() <= 1e-5


# --- adjoint_test: gradients ------------------------------------------------------------------------------


def exact_gradients(device: torch.device, elapsed: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """d/dy0 and d/dA of ``sum(weights * y0 exp(A s))`` over the elapsed times ``s`` (per sample if 2-D)."""
    y0 = tensor(ROWS, device).requires_grad_()
    matrix = tensor(MATRIX, device).requires_grad_()
    if elapsed.dim() == 1:
        ys = linear_exact(y0, matrix, elapsed)
    else:
        ys = torch.stack([linear_exact(y0[b], matrix, elapsed[b]) for b in range(len(elapsed))], dim=1)
    return torch.autograd.grad((ys * weights).sum(), (y0, matrix))  # type: ignore[return-value]


GRADIENT_RUNS = [("torchode", m, p) for m in ("dopri5", "tsit5") for p in (False, True)] + [
    ("torchdiffeq", "dopri5", False)
]


@pytest.mark.parametrize("adjoint", ["backprop", "adjoint"])
@pytest.mark.parametrize(("backend", "method", "per_sample"), GRADIENT_RUNS)
def test_gradients_match_the_matrix_exponential(
    device: torch.device, backend: str, method: str, per_sample: bool, adjoint: str
) -> None:
    """rtol = atol = 1e-10: gradients within 1e-8 of the largest exact one (measured <= 5e-10)."""
    times = tensor([0.0, 0.8, 2.0], device)
    weights = torch.randn(3, 2, 3, dtype=F64).to(device)
    field = LinearDynamics(tensor(MATRIX, device))
    y0 = tensor(ROWS, device).requires_grad_()
    kwargs = dict(per_sample=per_sample) if backend == "torchode" else {}
    sol = solve(field, y0, times, method=method, backend=backend, gradient=adjoint, rtol=1e-10, atol=1e-10, **kwargs)
    (sol.ys * weights).sum().backward()
    for got, want in zip((y0.grad, field.A.grad), exact_gradients(device, times, weights)):
        assert got is not None and (got - want).abs().max().item() <= 1e-8 * want.abs().max().item()


@pytest.mark.parametrize("adjoint", ["backprop", "adjoint"])
def test_gradients_with_per_sample_spans(device: torch.device, adjoint: str) -> None:
    """Spans (0, 1.5) and (1, 3) with outputs inside: each sample's gradient is that of its own span."""
    times = tensor([[0.0, 0.9, 1.5], [1.0, 2.2, 3.0]], device)
    weights = torch.randn(3, 2, 3, dtype=F64).to(device)
    field = LinearDynamics(tensor(MATRIX, device))
    y0 = tensor(ROWS, device).requires_grad_()
    sol = solve(
        field, y0, times, method="tsit5", backend="torchode", per_sample=True, gradient=adjoint, rtol=1e-10, atol=1e-10
    )
    (sol.ys * weights).sum().backward()
    for got, want in zip((y0.grad, field.A.grad), exact_gradients(device, times - times[:, :1], weights)):
        assert got is not None and (got - want).abs().max().item() <= 1e-8 * want.abs().max().item()


@pytest.mark.parametrize("per_sample", [False, True])
def test_backprop_through_fixed_steps_passes_gradcheck(device: torch.device, per_sample: bool) -> None:
    """Fixed heun steps are a smooth map of y0 and A, and backprop differentiates exactly that map."""

    def ys(y0: Tensor, matrix: Tensor) -> Tensor:
        return solve(
            lambda t, y: y @ matrix,
            y0,
            [0.0, 0.7, 1.5],
            method="heun",
            steps=12,
            backend="torchode",
            per_sample=per_sample,
        ).ys

    inputs = (tensor(ROWS, device).requires_grad_(), tensor(MATRIX, device).requires_grad_())
    assert torch.autograd.gradcheck(ys, inputs)


@pytest.mark.parametrize("per_sample", [False, True])
def test_adjoint_on_fixed_steps(device: torch.device, per_sample: bool) -> None:
    """torchode's backsolve with a fixed-step controller: the adjoint over fixed heun steps (h <= 0.01) is as close
    to the exact gradient as backprop through them: within 2e-4 of the largest exact gradient (both measured 4e-5;
    second order, so a step of 0.02 would be about 4 times further)."""
    times = tensor([0.0, 0.8, 2.0], device)
    weights = torch.randn(3, 2, 3, dtype=F64).to(device)
    grads = {}
    for adjoint in ("backprop", "adjoint"):
        field = LinearDynamics(tensor(MATRIX, device))
        y0 = tensor(ROWS, device).requires_grad_()
        sol = solve(
            field, y0, times, method="heun", step_size=0.01, backend="torchode", per_sample=per_sample, gradient=adjoint
        )
        (sol.ys * weights).sum().backward()
        grads[adjoint] = (y0.grad, field.A.grad)
    exact = exact_gradients(device, times, weights)
    for adjoint in grads:
        for got, want in zip(grads[adjoint], exact):
            assert got is not None and (got - want).abs().max().item() <= 2e-4 * want.abs().max().item()


def test_adjoint_with_torch_mm_works_or_is_refused_clearly(device: torch.device) -> None:
    """Spec item 7: a field written with ``torch.mm`` (2-D only) under torchode's per-sample backsolve, which runs
    the field one sample at a time under vmap: right gradients, or a SolveError that says why."""

    class MatrixProduct(LinearDynamics):
        def forward(self, t: Tensor, y: Tensor) -> Tensor:
            return torch.mm(y, self.A)

    times = tensor([0.0, 0.8, 2.0], device)
    weights = torch.randn(3, 2, 3, dtype=F64).to(device)
    field = MatrixProduct(tensor(MATRIX, device))
    y0 = tensor(ROWS, device).requires_grad_()
    try:
        sol = solve(
            field,
            y0,
            times,
            method="dopri5",
            backend="torchode",
            per_sample=True,
            gradient="adjoint",
            rtol=1e-10,
            atol=1e-10,
        )
        (sol.ys * weights).sum().backward()
    except SolveError as err:
        assert "vmap" in str(err) and "per_sample=False" in str(err)
        return
    for got, want in zip((y0.grad, field.A.grad), exact_gradients(device, times, weights)):
        assert got is not None and (got - want).abs().max().item() <= 1e-8 * want.abs().max().item()
