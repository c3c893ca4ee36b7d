"""torchode's test suite, ported to ``neuralode_tf.solve(..., backend="torchode")``: solutions, per-sample steps.

Ported from the tests/ folder of torchode (github.com/martenlienen/torchode), read for what each test checks
and rewritten as a user moving from torchode would write it against :func:`neuralode_tf.solve` (no code taken).
torchode's tests drive its internals (stub step methods, stub controllers, mocks); here the same property is
checked through the front door, on problems with exact solutions (``torchode_problems.py``) and against
torchode's own API run in the test. ``test_torchode_suite_inputs.py`` and
``test_torchode_suite_steps.py`` port the rest.

What maps where:

* ``interface_test``: the sine problem with per-sample spans against its exact solution and ``to.solve_ivp``.
* ``adjoint_test`` (forward half): values at the requested times (``test_accuracy_*``), samples stepping
  independently (``test_per_sample_*``), several outputs inside one step (``test_many_output_times_*``), spans
  without intermediate outputs (``test_end_only_spans``), ``max_steps`` (``test_max_steps_*``), a failing sample
  (``test_nan_*``), evaluations only inside the span (``test_field_is_only_evaluated_inside_each_span``), time
  inversion (``test_reversing_time_*``). Solving backwards in time, or two samples in opposite directions, has no
  equivalent: ``t`` must increase, which ``test_decreasing_times_are_refused`` pins.
* ``interpolation_test``: torchode tests its interpolants alone; here their output (``test_many_output_times_*``,
  ``test_a_quartic_is_reproduced_between_steps``).
* ``dtype_stability_test``, ``extra_args_test``, ``torch_script_test`` and the state shapes torchode does not take
  (0-dim, 1-D): ``test_torchode_suite_inputs.py``.

Tolerances are stated at each check: ``<= 1e-12`` where the same arithmetic runs twice (same algorithm, same
steps), otherwise a bound from the method's order or tolerances with the measured error noted.
"""

from __future__ import annotations

import pytest
import torch
import torchode as to
from torch import Tensor

from neuralode_tf import solve
from neuralode_tf.numerics import (
    InvalidTimesError,
    MaxStepsExceededError,
    NonFiniteStateError,
)
from tests.peers.torchode_problems import (
    Relaxation,
    oscillator,
    oscillator_exact,
    per_row,
    quartic,
    quartic_field,
    sine_field,
    sine_solution,
    torchode_reference,
)

F64 = torch.float64
ADAPTIVE = ["dopri5", "tsit5"]
SAME = 1e-12  # the same computation done twice: equal up to rounding


def tensor(values: object, device: torch.device, dtype: torch.dtype = F64) -> Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def worst_relative(got: Tensor, want: Tensor) -> float:
    return ((got - want) / want).abs().max().item()


# --- interface_test -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ADAPTIVE)
def test_sine_with_per_sample_spans_matches_exact_and_solve_ivp(device: torch.device, method: str) -> None:
    times = tensor([[0.1, 0.15, 1.0], [1.0, 1.9, 2.0]], device)
    y0 = sine_solution(times[:, :1])
    sol = solve(sine_field, y0, times, method=method, backend="torchode", per_sample=True)
    assert sol.ys.shape == (3, 2, 1)
    assert torch.equal(sol.ts.to(device), times)
    # torchode's own bound here; measured 4e-7 (dopri5), 1e-6 (tsit5) at our defaults (rtol 1e-6, atol 1e-8).
    assert worst_relative(sol.ys[..., 0], sine_solution(times).T) <= 1e-5
    controller = to.IntegralController(atol=1e-8, rtol=1e-6)
    theirs = to.solve_ivp(sine_field, y0, times, method=method, controller=controller)
    assert (theirs.ys.transpose(0, 1) - sol.ys).abs().max().item() <= SAME


# --- accuracy on their problem, every torchode method -----------------------------------------------------

# method -> (settings, bound on the relative error): adaptive at rtol = atol = 1e-8 (measured <= 1e-8); heun
# with torchode's fixed-step bound 1e-2 at step 0.01 (measured 2e-4); euler, first order, at step 0.002 (measured
# 5e-3).
ACCURACY = {
    "euler": (dict(step_size=0.002), 2e-2),
    "heun": (dict(step_size=0.01), 1e-2),
    "dopri5": (dict(rtol=1e-8, atol=1e-8), 1e-6),
    "tsit5": (dict(rtol=1e-8, atol=1e-8), 1e-6),
}


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("method", list(ACCURACY))
def test_accuracy_on_the_sine_problem(device: torch.device, method: str, per_sample: bool) -> None:
    times = tensor([0.5, 0.8, 1.2, 2.0], device)
    c = tensor([[0.0], [1.5], [-2.0]], device)  # three solutions of the same ODE
    settings, bound = ACCURACY[method]
    sol = solve(
        sine_field,
        sine_solution(times[0], c),
        times,
        method=method,
        backend="torchode",
        per_sample=per_sample,
        **settings,
    )
    assert worst_relative(sol.ys, sine_solution(times[:, None, None], c)) <= bound


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("method", ["euler", "heun", *ADAPTIVE])
def test_same_numbers_as_torchode_itself(device: torch.device, method: str, per_sample: bool) -> None:
    """A grid of dyadic steps (exact in binary) for the fixed methods, so both take the very same steps."""
    times = tensor([0.5, 0.75, 1.25, 2.0], device)
    c = tensor([[0.0], [1.5], [-2.0]], device)
    y0 = sine_solution(times[0], c)
    fixed = method in ("euler", "heun")
    settings = dict(step_size=2.0**-6) if fixed else dict(rtol=1e-7, atol=1e-9)
    ours = solve(sine_field, y0, times, method=method, backend="torchode", per_sample=per_sample, **settings)
    kwargs = dict(dt0=2.0**-6) if fixed else dict(rtol=1e-7, atol=1e-9)
    t_eval = times.expand(3, -1) if per_sample else times
    theirs = torchode_reference(sine_field, y0, t_eval, method, joint=not per_sample, **kwargs)
    want = theirs.ys.transpose(0, 1) if per_sample else theirs.ys[0].reshape(len(times), 3, 1)
    assert (ours.ys - want).abs().max().item() <= SAME
    assert ours.stats.n_accepted == int(theirs.stats["n_accepted"].max())


# --- adjoint_test, forward half: samples step independently ---------------------------------------------


@pytest.mark.parametrize("method", ADAPTIVE)
def test_per_sample_steps_follow_each_samples_difficulty(device: torch.device, method: str) -> None:
    field = Relaxation(tensor([1.0, 40.0, 4.0], device))
    y0 = tensor([[1.0], [0.0], [-1.0]], device)
    times = [0.0, 0.7, 2.0]
    tol = dict(rtol=1e-6, atol=1e-8)
    alone = [
        solve(Relaxation(field.rates[b]), y0[b : b + 1], times, method=method, backend="torchode", **tol)
        for b in range(3)
    ]
    counts = [run.stats.n_accepted for run in alone]
    assert counts[1] > 2 * counts[0]  # the stiff sample is the hard one (sanity of the problem)
    batch = solve(field, y0, times, method=method, backend="torchode", per_sample=True, **tol)
    for b in range(3):
        assert (batch.ys[:, b] - alone[b].ys[:, 0]).abs().max().item() <= SAME
    assert batch.stats.n_accepted == max(counts)  # stats report the slowest sample
    theirs = torchode_reference(field, y0, tensor(times, device).expand(3, -1), method, **tol)
    assert theirs.stats["n_accepted"].tolist() == counts
    # Without per_sample the batch is one system: the easy sample takes the joint steps, far more than alone.
    joint = solve(field, y0, times, method=method, backend="torchode", **tol)
    assert joint.stats.n_accepted > 2 * counts[0]
    exact = field.exact(y0, tensor([0.0] * 3, device), tensor(times, device).expand(3, -1))
    for run in (batch, joint):  # rtol 1e-6: the error stays within 1e-5 (measured 7e-7)
        assert (run.ys - exact).abs().max().item() <= 1e-5


@pytest.mark.parametrize("method", ADAPTIVE)
def test_per_sample_spans_equal_solving_each_sample_alone(device: torch.device, method: str) -> None:
    field = Relaxation(tensor([2.0, 30.0, 0.5], device))
    y0 = tensor([[1.0], [0.0], [-1.0]], device)
    times = tensor([[0.0, 0.15, 1.0], [1.0, 1.9, 2.0], [0.5, 2.5, 6.0]], device)
    tol = dict(rtol=1e-8, atol=1e-10)
    batch = solve(field, y0, times, method=method, backend="torchode", per_sample=True, **tol)
    assert batch.ys.shape == (3, 3, 1)
    for b in range(3):
        alone = solve(Relaxation(field.rates[b]), y0[b : b + 1], times[b], method=method, backend="torchode", **tol)
        assert (batch.ys[:, b] - alone.ys[:, 0]).abs().max().item() <= SAME
    # rtol 1e-8: within 1e-6 of the exact solution (measured 6e-9)
    assert (batch.ys - field.exact(y0, times[:, 0], times)).abs().max().item() <= 1e-6


def test_field_is_only_evaluated_inside_each_span(device: torch.device) -> None:
    seen: list[Tensor] = []
    inner = Relaxation(tensor([1.0, 25.0, 3.0], device))

    def field(t: Tensor, y: Tensor) -> Tensor:
        seen.append(t.detach().clone())
        return inner(t, y)

    times = tensor([[0.1, 1.0], [1.0, 2.0], [0.3, 5.0]], device)
    solve(
        field,
        torch.zeros(3, 1, dtype=F64, device=device),
        times,
        method="dopri5",
        backend="torchode",
        per_sample=True,
        dt0=0.9,
    )
    ts = torch.stack(seen)  # (evaluations, batch)
    assert ts.shape[1] == 3
    assert (ts >= times[:, 0]).all() and (ts <= times[:, -1]).all()


def test_end_only_spans(device: torch.device) -> None:
    """Only a start and an end per sample: a constant field, which every Runge-Kutta method solves exactly."""
    y0 = tensor([[0.0], [1.0], [2.0]], device)
    times = tensor([[0.0, 10.0], [5.0, 9.0], [2.0, 4.5]], device)
    sol = solve(lambda t, y: torch.ones_like(y), y0, times, method="dopri5", backend="torchode", per_sample=True)
    assert (sol.y1 - (y0 + (times[:, 1] - times[:, 0])[:, None])).abs().max().item() <= SAME


def test_reversing_time_with_a_negated_field(device: torch.device) -> None:
    """torchode integrates backwards when t decreases; here t increases, and ``s = -t`` with the field
    ``-f(-s, y)`` runs the solution backwards. At rtol = atol = 1e-10 the round trip is within 1e-8 (measured 2e-10)."""

    def f(t: Tensor, y: Tensor) -> Tensor:
        return -y * torch.sin(per_row(t, y)) + 0.3 * y**2

    y0 = tensor([[1.0], [0.4]], device)
    tol = dict(rtol=1e-10, atol=1e-10)
    ahead = solve(f, y0, [0.3, 1.0, 2.0], method="tsit5", backend="torchode", **tol)
    back = solve(lambda s, y: -f(-s, y), ahead.y1, [-2.0, -1.0, -0.3], method="tsit5", backend="torchode", **tol)
    assert (back.ys.flip(0) - ahead.ys).abs().max().item() <= 1e-8


def test_decreasing_times_are_refused(device: torch.device) -> None:
    y0 = torch.ones(2, 1, dtype=F64, device=device)
    with pytest.raises(InvalidTimesError, match="increasing"):
        solve(lambda t, y: -y, y0, [1.0, 0.0], method="dopri5", backend="torchode")
    opposite = tensor([[0.0, 3.0], [2.0, -8.0]], device)  # two samples in opposite directions
    with pytest.raises(InvalidTimesError, match="sample 1"):
        solve(lambda t, y: -y, y0, opposite, method="dopri5", backend="torchode", per_sample=True)


# --- adjoint_test: max_steps and failed samples -----------------------------------------------------------


@pytest.mark.parametrize("max_steps", [20, 2000])
@pytest.mark.parametrize("per_sample", [False, True])
def test_max_steps_agrees_with_torchode(device: torch.device, per_sample: bool, max_steps: int) -> None:
    """One stiff sample (rate 200) needs about 200 dopri5 steps over [0, 3]: 20 are too few, 2000 enough."""
    field = Relaxation(tensor([1.0, 200.0], device))
    y0 = torch.zeros(2, 1, dtype=F64, device=device)
    span = tensor([0.0, 3.0], device)
    t_eval = span.expand(2, -1) if per_sample else span
    theirs = torchode_reference(field, y0, t_eval, "dopri5", joint=not per_sample, max_steps=max_steps)
    exceeded = bool((theirs.status == to.Status.REACHED_MAX_STEPS.value).any())
    assert exceeded == (max_steps == 20)

    def run() -> int:
        sol = solve(
            field, y0, [0.0, 3.0], method="dopri5", backend="torchode", per_sample=per_sample, max_steps=max_steps
        )
        return sol.stats.n_accepted

    if exceeded:
        with pytest.raises(MaxStepsExceededError, match=f"max_steps={max_steps}"):
            run()
    else:
        assert run() <= max_steps


def test_max_steps_on_torchdiffeq_names_max_steps(device: torch.device) -> None:
    field = Relaxation(tensor([1.0, 200.0], device))
    with pytest.raises(MaxStepsExceededError, match="max_steps=20"):
        solve(
            field,
            torch.zeros(2, 1, dtype=F64, device=device),
            [0.0, 3.0],
            method="dopri5",
            backend="torchdiffeq",
            max_steps=20,
        )


@pytest.mark.parametrize("per_sample", [False, True])
def test_nan_in_one_sample_stops_the_solve(device: torch.device, per_sample: bool) -> None:
    poisoned = tensor([[0.0], [1.0]], device)

    def field(t: Tensor, y: Tensor) -> Tensor:
        nan_after_half = torch.where(per_row(t, y) > 0.5, float("nan"), 0.0)
        return -y + poisoned * nan_after_half

    with pytest.raises(NonFiniteStateError):
        solve(
            field,
            torch.ones(2, 1, dtype=F64, device=device),
            [0.0, 1.0],
            method="dopri5",
            backend="torchode",
            per_sample=per_sample,
        )


# --- interpolation_test: outputs between steps -------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "method", "per_sample"),
    [("torchode", m, p) for m in ADAPTIVE for p in (False, True)] + [("torchdiffeq", "dopri5", False)],
)
def test_many_output_times_are_interpolated(device: torch.device, backend: str, method: str, per_sample: bool) -> None:
    """201 output times, far fewer steps: the outputs come from the interpolant, accurate like the steps
    (rtol = atol = 1e-9: within 1e-7 of the exact solution, measured 1e-8)."""
    w = tensor([1.0, 3.0], device)
    times = torch.linspace(0.0, 2.0, 201, dtype=F64, device=device)
    y0 = tensor([[1.0, 0.0], [1.0, 0.0]], device)
    sol = solve(oscillator(w), y0, times, method=method, backend=backend, per_sample=per_sample, rtol=1e-9, atol=1e-9)
    assert sol.stats.n_accepted < 120
    assert (sol.ys - oscillator_exact(w, times)).abs().max().item() <= 1e-7


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("method", ADAPTIVE)
def test_a_quartic_is_reproduced_between_steps(device: torch.device, method: str, per_sample: bool) -> None:
    """``y' = p'(t)``, ``p`` of degree 4: a few long steps, and both the steps (5th order) and the 4th-order
    interpolants are exact for it, so 41 outputs are ``p`` up to rounding (1e-10; measured 1e-12)."""
    times = torch.linspace(1.0, 2.5, 41, dtype=F64, device=device)
    y0 = quartic(times[0]).expand(2, 1).clone()
    sol = solve(
        quartic_field, y0, times, method=method, backend="torchode", per_sample=per_sample, rtol=1e-3, atol=1e-3
    )
    assert sol.stats.n_accepted <= 6
    assert (sol.ys - quartic(times)[:, None, None]).abs().max().item() <= 1e-10
