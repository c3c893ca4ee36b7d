"""Terminal events, gradients with respect to the time span, and per-sample time spans, against analytic answers,
finite differences and the peers' own (torchdiffeq's ``odeint_event`` and ``t`` gradients, torchode alone per
sample).
"""

from __future__ import annotations

import math

import pytest
import torch
import torchdiffeq

from neuralode_tf import solve
from neuralode_tf.numerics import InvalidTimesError, SolverConfigError

from ._problems import Decay
from ._reference import max_abs

EVENT_SOLVERS = [
    dict(method="rk4", steps=500),
    dict(method="dopri5", rtol=1e-10, atol=1e-12),
    dict(method="dopri5", backend="torchdiffeq", rtol=1e-10, atol=1e-12),
]


@pytest.mark.parametrize("kwargs", EVENT_SOLVERS)
def test_an_event_stops_at_the_analytic_time_with_the_analytic_gradients(kwargs, device):
    """``y = exp(-a t)`` crosses ``c`` at ``t_e = ln(1/c) / a``: ``dt_e/da = -t_e / a`` and ``dt_e/dc = -1/(a c)``
    (the threshold is a parameter of the event function); the state there is ``c``, whatever ``a`` and ``c``."""
    field = Decay(2.0, device)
    threshold = torch.tensor(0.5, dtype=torch.float64, device=device, requires_grad=True)
    y0 = torch.tensor(1.0, dtype=torch.float64, device=device)
    solution = solve(field, y0, [0.0, 5.0], event=lambda t, y: y - threshold, **kwargs)
    t_e = math.log(2.0) / 2.0
    assert abs(float(solution.event_t.detach()) - t_e) <= 1e-7
    assert float(solution.ts[-1]) == float(solution.event_t.detach())
    assert abs(float(solution.y1.detach()) - 0.5) <= 1e-7
    d_rate, d_threshold = torch.autograd.grad(solution.event_t, (field.rate, threshold))
    assert abs(float(d_rate) + t_e / 2.0) <= 1e-5 * t_e
    assert abs(float(d_threshold) + 1.0 / (2.0 * 0.5)) <= 1e-5
    d_state = torch.autograd.grad(solve(field, y0, [0.0, 5.0], event=lambda t, y: y - 0.5, **kwargs).y1, field.rate)[0]
    assert abs(float(d_state)) <= 1e-6


def test_an_event_stops_the_solve_early_and_matches_torchdiffeqs_odeint_event(device):
    """A harmonic oscillator's first zero of the position, ``pi / (2 w)``: the same as ``odeint_event``, with
    the same gradient in ``w``, and fewer steps than the whole span takes."""
    w = torch.tensor(1.3, dtype=torch.float64, device=device, requires_grad=True)

    def oscillator(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.stack([w * y[1], -w * y[0]])

    y0 = torch.tensor([1.0, 0.0], dtype=torch.float64, device=device)
    ours = solve(oscillator, y0, [0.0, 20.0], method="dopri5", rtol=1e-10, atol=1e-12, event=lambda t, y: y[0])
    whole = solve(oscillator, y0, [0.0, 20.0], method="dopri5", rtol=1e-10, atol=1e-12)
    t0 = torch.tensor(0.0, dtype=torch.float64, device=device)
    theirs, _ = torchdiffeq.odeint_event(
        oscillator, y0, t0, event_fn=lambda t, y: y[0], method="dopri5", rtol=1e-10, atol=1e-12
    )
    assert abs(float(ours.event_t.detach()) - math.pi / 2.6) <= 1e-8
    assert abs(float(ours.event_t.detach()) - float(theirs.detach())) <= 1e-8
    ours_grad = torch.autograd.grad(ours.event_t, w)[0]
    theirs_grad = torch.autograd.grad(theirs, w)[0]
    assert abs(float(ours_grad) + math.pi / (2 * 1.3**2)) <= 1e-6
    assert abs(float(ours_grad) - float(theirs_grad)) <= 1e-6
    assert ours.stats.nfe < whole.stats.nfe / 4


def test_an_event_on_a_tuple_state_and_an_event_that_never_happens(device):
    """A tuple state's event reads any part; with no sign change ``event_t`` is ``None`` and the state is at
    ``t_max``."""
    field = lambda t, y: (-y[0], torch.ones_like(y[1]))  # noqa: E731
    y0 = (torch.ones(3, dtype=torch.float64, device=device), torch.zeros((), dtype=torch.float64, device=device))
    solution = solve(field, y0, [0.0, 4.0], method="rk4", steps=400, event=lambda t, y: y[1] - 1.5)
    assert abs(float(solution.event_t) - 1.5) <= 1e-12
    assert max_abs(solution.y1[0], torch.full((3,), math.exp(-1.5), dtype=torch.float64)) <= 1e-9
    never = solve(field, y0, [0.0, 1.0], method="rk4", steps=40, event=lambda t, y: y[1] - 1.5)
    plain = solve(field, y0, [0.0, 1.0], method="rk4", steps=40)
    assert never.event_t is None and max_abs(never.y1[0], plain.y1[0]) == 0.0


def test_events_refuse_what_they_cannot_do(device):
    y0 = torch.ones(2, dtype=torch.float64, device=device)
    event = lambda t, y: y[0] - 0.5  # noqa: E731
    with pytest.raises(InvalidTimesError, match=r"with event=, t is the span \[t0, t_max\]"):
        solve(lambda t, y: -y, y0, [0.0, 1.0, 2.0], method="rk4", steps=4, event=event)
    with pytest.raises(InvalidTimesError, match=r"the event function is 0 at t\[0\]"):
        solve(lambda t, y: -y, y0, [0.0, 1.0], method="rk4", steps=4, event=lambda t, y: y[0] - 1.0)
    with pytest.raises(SolverConfigError, match=r"event= is not offered for method 'dopri5' on 'torchode'"):
        solve(lambda t, y: -y, y0, [0.0, 1.0], method="dopri5", backend="torchode", event=event)
    with pytest.raises(SolverConfigError, match=r"event must be a callable"):
        solve(lambda t, y: -y, y0, [0.0, 1.0], method="rk4", steps=4, event=0.5)


TIME_GRADIENT_SOLVERS = [
    dict(method="rk4", steps=100),
    dict(method="rk4", steps=100, gradient="checkpoint"),
    dict(method="dopri5", backend="torchdiffeq", rtol=1e-10, atol=1e-12),
    dict(method="dopri5", backend="torchdiffeq", gradient="adjoint", rtol=1e-10, atol=1e-12),
    dict(method="dopri5", backend="torchode", rtol=1e-10, atol=1e-12),
    dict(method="dopri5", backend="torchode", gradient="adjoint", rtol=1e-10, atol=1e-12),
]


@pytest.mark.parametrize("kwargs", TIME_GRADIENT_SOLVERS)
def test_gradients_with_respect_to_the_time_span(kwargs, device):
    """``y(t1) = exp(-a (t1 - t0))``: ``dy/dt1 = -a y``, ``dy/dt0 = a y``, the output at ``t0`` does not move
    with ``t0``, and the parameters' gradient is unchanged; also against central finite differences of a
    time-dependent field, and against torchdiffeq's own ``t`` gradients."""
    field = Decay(2.0, device)
    t = torch.tensor([0.2, 0.7, 1.0], dtype=torch.float64, device=device, requires_grad=True)
    y0 = torch.tensor([1.0, 3.0], dtype=torch.float64, device=device)
    solution = solve(field, y0, t, **kwargs)
    grad_t, grad_rate = torch.autograd.grad(solution.y1.sum(), (t, field.rate), retain_graph=True)
    total = 4.0 * math.exp(-1.6)
    assert abs(float(grad_t[0]) - 2.0 * total) <= 1e-6
    assert abs(float(grad_t[1])) <= 1e-12
    assert abs(float(grad_t[2]) + 2.0 * total) <= 1e-6
    assert abs(float(grad_rate) + 0.8 * total) <= 1e-6
    assert float(torch.autograd.grad(solution.ys[0].sum(), t)[0].abs().max()) <= 1e-12

    def forced(time: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(3 * time) * y + torch.cos(time)

    def end(t0: float, t1: float) -> float:
        span = torch.tensor([t0, t1], dtype=torch.float64, device=device)
        return float(solve(forced, y0, span, **kwargs).y1.sum())

    span = torch.tensor([0.1, 0.9], dtype=torch.float64, device=device, requires_grad=True)
    ours = torch.autograd.grad(solve(forced, y0, span, **kwargs).y1.sum(), span)[0]
    theirs = torch.autograd.grad(torchdiffeq.odeint(forced, y0, span, rtol=1e-10, atol=1e-12)[-1].sum(), span)[0]
    h = 1e-5
    differences = [(end(0.1 + h, 0.9) - end(0.1 - h, 0.9)) / (2 * h), (end(0.1, 0.9 + h) - end(0.1, 0.9 - h)) / (2 * h)]
    assert max_abs(ours, torch.tensor(differences, dtype=torch.float64, device=device)) <= 1e-5
    assert max_abs(ours, theirs) <= 1e-5


def test_per_sample_time_spans_equal_each_sample_solved_alone(device):
    """A 2-D ``t`` gives each sample its own times on torchode: each row of the result equals that sample solved
    by itself with its own times."""
    field = lambda t, y: -y * t[:, None] if t.ndim else -y * t  # noqa: E731
    y0 = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]], dtype=torch.float64, device=device)
    t = torch.tensor([[0.0, 0.5, 1.0], [1.0, 2.0, 3.0], [-1.0, 0.0, 0.25]], dtype=torch.float64, device=device)
    kwargs = dict(method="dopri5", backend="torchode", per_sample=True, rtol=1e-9, atol=1e-10)
    solution = solve(field, y0, t, **kwargs)
    assert solution.ys.shape == (3, 3, 2) and solution.ts.shape == (3, 3)
    for b in range(3):
        exact = y0[b] * torch.exp(-(t[b] ** 2 - t[b, 0] ** 2) / 2)[:, None]
        alone = solve(field, y0[b : b + 1], t[b : b + 1], **kwargs).ys[:, 0]
        assert max_abs(solution.ys[:, b], exact) <= 1e-7
        assert max_abs(solution.ys[:, b], alone) <= 1e-12


def test_per_sample_time_spans_refuse_what_they_cannot_do(device):
    y0 = torch.ones(2, 3, dtype=torch.float64, device=device)
    t = torch.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=torch.float64, device=device)
    cases = [
        (dict(method="dopri5"), SolverConfigError, r"backend='torchode' with per_sample=True"),
        (dict(method="dopri5", backend="torchode"), SolverConfigError, r"with per_sample=True"),
        (dict(method="euler", steps=4, backend="torchode", per_sample=True), SolverConfigError, r"an adaptive method"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            solve(lambda t, y: -y, y0, t, **kwargs)
    with pytest.raises(SolverConfigError, match=r"no dense output, event or gradient with respect to t"):
        solve(lambda t, y: -y, y0, t.requires_grad_(), method="dopri5", backend="torchode", per_sample=True)
    with pytest.raises(InvalidTimesError, match=r"3 rows for 2 samples"):
        solve(
            lambda t, y: -y,
            y0,
            torch.zeros(3, 2).cumsum(1) + torch.arange(2.0),
            method="dopri5",
            backend="torchode",
            per_sample=True,
        )
    with pytest.raises(InvalidTimesError, match=r"sample 1 of the per-sample times t: t must be strictly increasing"):
        solve(
            lambda t, y: -y,
            y0,
            torch.tensor([[0.0, 1.0], [1.0, 1.0]]),
            method="dopri5",
            backend="torchode",
            per_sample=True,
        )
