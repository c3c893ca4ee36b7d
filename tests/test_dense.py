"""Dense output (``solve(..., dense=True)``, ``ContinuousDepth.trajectory``) and many output times: the
interpolant's fitted order, exact nodes at no cost, gradients against analytic ones, and torchdiffeq's
output times interpolated at no extra evaluations wherever that keeps the method's accuracy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torchdiffeq
import torchode as to

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import KineticEnergy, SplitField, WeightSharedField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import InvalidTimesError, SolverConfigError

from ._problems import Decay
from ._reference import max_abs

A = torch.tensor([[-0.1, 1.0], [-1.0, -0.1]], dtype=torch.float64)
"""A damped rotation: ``y(t) = exp(t A) y0`` exactly."""


def _exact(y0: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.linalg.matrix_exp(x * A.to(y0.device)) @ y0 for x in t])


def _linear(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return y @ A.to(y.device).T


@pytest.mark.parametrize(
    "method, backend, order",
    [
        ("euler", "builtin", 1),
        ("midpoint", "builtin", 2),
        ("heun", "builtin", 2),
        ("rk4", "builtin", 4),
        ("rk4_38", "torchdiffeq", 4),
        ("heun3", "torchdiffeq", 3),
    ],
)
def test_dense_output_has_order_min_p_4(method, backend, order, device):
    """Between the grid points the Hermite interpolant is as accurate as the method, up to fourth order: the fitted
    order of the worst error at off-grid times is ``min(p, 4)``."""
    y0 = torch.tensor([1.0, 0.5], dtype=torch.float64, device=device)
    query = torch.tensor([0.13, 0.77, 1.41, 2.05, 2.93], dtype=torch.float64)
    exact = _exact(y0, query)
    steps, errors = [8, 16, 32, 64], []
    for n in steps:
        solution = solve(_linear, y0, [0.0, 3.0], method=method, steps=n, backend=backend, dense=True)
        errors.append(max_abs(solution.evaluate(query), exact))
    fitted = -np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(fitted - order) <= 0.3, (fitted, errors)


@pytest.mark.parametrize("kwargs", [dict(method="rk4", steps=6), dict(method="dopri5", backend="torchdiffeq")])
def test_nodes_are_exact_and_cost_nothing_and_outputs_are_unchanged(kwargs, device):
    """At a node the dense output is the solver's own state (no evaluation); the outputs equal a solve without
    ``dense`` bit for bit."""
    y0 = torch.tensor([1.0, 0.5], dtype=torch.float64, device=device)
    plain = solve(_linear, y0, [0.0, 3.0], **kwargs)
    solution = solve(_linear, y0, [0.0, 3.0], dense=True, **kwargs)
    assert max_abs(solution.ys, plain.ys) == 0.0 and solution.stats.nfe == plain.stats.nfe
    assert max_abs(solution.evaluate(3.0), plain.y1) == 0.0
    assert max_abs(solution.evaluate([0.0, 3.0]), plain.ys) == 0.0
    assert solution.stats.nfe_dense == 0
    solution.evaluate(1.3)
    assert solution.stats.nfe_dense == 2
    solution.evaluate(1.31)  # the same step: its slopes are cached
    assert solution.stats.nfe_dense == 2


@pytest.mark.parametrize("kwargs", [dict(method="rk4", steps=200), dict(method="dopri5", rtol=1e-10, atol=1e-12)])
def test_dense_output_gradients_match_the_analytic_ones(kwargs, device):
    """``y(t) = exp(-a t)``: ``dy/da = -t y`` and ``dy/dt = -a y`` at off-node times, through the interpolant. On
    torchdiffeq the nodes are taken at their fixed times (its step-size control is differentiated; without that
    correction the gradient was 0.3% off)."""
    field = Decay(2.0, device)
    t = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    solution = solve(field, torch.tensor(1.0, dtype=torch.float64, device=device), [0.0, 2.0], dense=True, **kwargs)
    y = solution.evaluate(t)
    d_rate, d_t = torch.autograd.grad(y, (field.rate, t))
    exact = math.exp(-1.4)
    assert abs(float(y.detach()) - exact) <= 1e-8
    assert abs(float(d_rate) + 0.7 * exact) <= 1e-5 * exact
    assert abs(float(d_t) + 2.0 * exact) <= 1e-5 * exact


def test_dense_output_refuses_what_it_cannot_do(device):
    y0 = torch.ones(2, dtype=torch.float64, device=device)
    cases = [
        (dict(method="dopri5", backend="torchode"), r"dense=True is not offered for method 'dopri5' on 'torchode'"),
        (dict(method="dopri8"), r"not offered for method 'dopri8' on 'torchdiffeq'.*torchdiffeq: .*dopri5"),
        (dict(method="dopri5", gradient="adjoint"), r"gradient='adjoint' does not keep"),
        (dict(method="rk4", steps=4, gradient="checkpoint"), r"gradient='checkpoint' does not keep"),
        (dict(method="rk4", steps=4, compile=True), r"compile=False"),
        (dict(method="rk4", steps=4, dense=1), r"dense must be True or False"),
    ]
    for kwargs, match in cases:
        with pytest.raises(SolverConfigError, match=match):
            solve(_linear, y0, [0.0, 1.0], **{"dense": True, **kwargs})
    with pytest.raises(SolverConfigError, match=r"pass dense=True"):
        solve(_linear, y0, [0.0, 1.0], method="rk4", steps=4).evaluate(0.5)
    with pytest.raises(InvalidTimesError, match=r"defined on \[0, 1\]"):
        solve(_linear, y0, [0.0, 1.0], method="rk4", steps=4, dense=True).evaluate(1.5)


def _pendulum(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.stack([y[1], -torch.sin(y[0])])


@pytest.mark.cpu_only("compares with torchdiffeq's own step_t runs; tensor device plays no part")
def test_output_times_are_interpolated_where_it_keeps_the_accuracy():
    """torchdiffeq's interpolant costs dopri5, fehlberg2 and adaptive_heun at most a factor 2 of accuracy against
    stepping onto every output time (the library's choice: interpolate, no extra evaluations), but bosh3 and
    dopri8 10 times and more (the library's choice: step onto them). Pendulum over [0, 10], 41 outputs,
    rtol = atol = 1e-8 (1e-6 for the low-order fehlberg2 and adaptive_heun), reference dopri8 at 1e-13."""
    y0 = torch.tensor([1.0, 0.0], dtype=torch.float64)
    ts = torch.linspace(0, 10, 41, dtype=torch.float64)
    reference = torchdiffeq.odeint(_pendulum, y0, ts, method="dopri8", rtol=1e-13, atol=1e-13, options={"step_t": ts})
    tolerances = {"dopri5": 1e-8, "fehlberg2": 1e-6, "adaptive_heun": 1e-6, "bosh3": 1e-8, "dopri8": 1e-8}
    for method, tol in tolerances.items():
        ours = solve(_pendulum, y0, ts, method=method, rtol=tol, atol=tol, max_steps=100_000)
        stepped = torchdiffeq.odeint(_pendulum, y0, ts, method=method, rtol=tol, atol=tol, options={"step_t": ts})
        interpolated = torchdiffeq.odeint(_pendulum, y0, ts, method=method, rtol=tol, atol=tol)
        ratio = max_abs(interpolated, reference) / max_abs(stepped, reference)
        if method in ("bosh3", "dopri8"):
            assert ratio > 10 and max_abs(ours.ys, stepped) <= 1e-12, (method, ratio)
        else:
            assert ratio <= 2 and max_abs(ours.ys, interpolated) <= 1e-12, (method, ratio)


@pytest.mark.cpu_only("counts evaluations of the peers' own solves, run in the test")
def test_200_output_times_cost_what_the_peers_pay():
    """200 output times with dopri5: the evaluations of two output times, as torchdiffeq and torchode count them
    (a step was once forced onto every output time: 1202 evaluations against torchdiffeq's 164)."""
    y0 = torch.tensor([1.0, 0.0], dtype=torch.float64)
    ts = torch.linspace(0, 10, 200, dtype=torch.float64)
    counted = {"torchdiffeq": 0, "torchode": 0}

    def counting(name):
        def f(t, y):
            counted[name] += 1
            return _pendulum(t, y) if y.ndim == 1 else torch.stack([y[:, 1], -torch.sin(y[:, 0])], dim=1)

        return f

    torchdiffeq.odeint(counting("torchdiffeq"), y0, ts, method="dopri5", rtol=1e-6, atol=1e-8)
    term = to.ODETerm(counting("torchode"))
    solver = to.AutoDiffAdjoint(to.Dopri5(term=term), to.IntegralController(atol=1e-8, rtol=1e-6, term=term))
    solver.solve(to.InitialValueProblem(y0[None], t_start=ts[:1], t_end=ts[-1:], t_eval=ts[None]))
    ours = {name: solve(_pendulum, y0, ts, method="dopri5", backend=name).stats.nfe for name in counted}
    two = solve(_pendulum, y0, ts[[0, -1]], method="dopri5", backend="torchdiffeq").stats.nfe
    assert ours["torchdiffeq"] == counted["torchdiffeq"] == two
    assert ours["torchode"] == counted["torchode"]
    assert max(ours.values()) < 2 * min(ours.values())


def test_continuous_depth_trajectory_reads_any_depth_of_its_own_solve(device):
    """``trajectory(x, t)`` is the forward's solve: its last state is ``forward(x)``, integer depths of a
    3-layer stack solved with whole steps are the states a solve to that depth gives (no extra evaluation),
    and depths between steps come from the dense output."""
    torch.manual_seed(0)
    layers = [SplitField(AttentionBranch(8, 2), MLPBranch(8)).double().to(device) for _ in range(3)]
    stack = ContinuousDepth(WeightSharedField(layers, depth=3), t1=3.0, method="rk4", steps=6)
    x = torch.randn(2, 4, 8, dtype=torch.float64, device=device)
    states = stack.trajectory(x, [0.0, 1.0, 2.0, 3.0])
    assert stack.stats.nfe_dense == 0
    assert max_abs(states[-1], stack(x)) == 0.0 and max_abs(states[0], x) == 0.0
    for depth in (1, 2):
        alone = solve(stack.field, x, [0.0, float(depth)], method="rk4", steps=2 * depth).y1
        assert max_abs(states[depth], alone) <= 1e-12
    fine = solve(stack.field, x, [0.0, 1.25], method="rk4", steps=80).y1
    assert max_abs(stack.trajectory(x, torch.tensor([1.25], dtype=torch.float64))[0], fine) <= 1e-3
    energy = ContinuousDepth(KineticEnergy(layers[0], transport_cost=1.0), t1=1.0, method="rk4", steps=4)
    tokens = energy.trajectory(x, [0.5, 1.0])
    assert tokens.shape == (2, *x.shape) and max_abs(tokens[-1], energy(x)) == 0.0


def test_a_continuous_depth_refuses_settings_its_forward_could_not_honour(device):
    """``dense`` and ``event`` would change nothing a forward returns: refused, naming what does it instead."""
    field = SplitField(AttentionBranch(8, 2), MLPBranch(8)).double().to(device)
    with pytest.raises(TypeError, match=r"'dense' is not a ContinuousDepth setting.*trajectory\(x, t\)"):
        ContinuousDepth(field, method="rk4", steps=2, dense=True)
    with pytest.raises(TypeError, match=r"'event' is not a ContinuousDepth setting.*event="):
        ContinuousDepth(field, method="rk4", steps=2).set_solve_options(event=lambda t, y: y.sum())
