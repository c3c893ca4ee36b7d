"""Every bad input gets an exception whose message says what is wrong and what is valid."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from neuralode_tf import solve
from neuralode_tf.fields import SplitField, as_field
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import (
    FieldOutputError,
    InvalidFieldError,
    InvalidStateError,
    InvalidTimesError,
    MaxStepsExceededError,
    NonFiniteStateError,
    SolveError,
    SolverConfigError,
    StepSizeUnderflowError,
)
from neuralode_tf.numerics._field_checks import check_field_matches_state


class Linear(nn.Module):
    """dy/dt = rate * y."""

    def __init__(self, rate: float = -1.0):
        super().__init__()
        self.rate = nn.Parameter(torch.tensor(rate))

    def forward(self, t, y):
        return self.rate * y


class SumOfTwo(nn.Module):
    """dy/dt = a(y) + b(y), whose layers may have different dtypes."""

    def __init__(self, a: nn.Module, b: nn.Module):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, t, y):
        return self.a(y) + self.b(y)


class Blowup(nn.Module):
    """dy/dt = y², which reaches infinity at t = 1/y0."""

    def forward(self, t, y):
        return y * y


class Chattering(nn.Module):
    """Alternates between +1e12 and -1e12 at every evaluation: no step size satisfies the error
    control until the step no longer advances t."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, t, y):
        self.calls += 1
        return torch.full_like(y, 1e12 * (-1) ** self.calls)


class Wrong(nn.Module):
    def __init__(self, change):
        super().__init__()
        self.change = change

    def forward(self, t, y):
        return self.change(y)


def _y0(device) -> torch.Tensor:
    return torch.ones(2, 3, device=device)


@pytest.mark.parametrize(
    "t, match",
    [
        ([0.0, 1.0, 1.0], r"strictly increasing, but t\[2\]=1.0 follows t\[1\]=1.0"),
        ([1.0, 0.0], r"strictly increasing"),
        ([0.0, math.nan], "finite"),
        ([0.0, math.inf], "finite"),
        ([0.0], "at least two"),
        (torch.zeros(2, 2, 2), "1-D"),
        (torch.zeros(2, 2), "sample 0 of the per-sample times t: t must be strictly increasing"),
        (["a", "b"], "1-D sequence of numbers"),
        ("01", "1-D sequence of numbers, got str"),
        (torch.tensor([0.0, 1.0], dtype=torch.complex64), "t must be real, got dtype torch.complex64"),
        ([0.0, 1e39], r"t from 0 to 1e\+39 overflows y0's dtype torch.float32"),
    ],
)
def test_bad_times(t, match, device):
    t = t.to(device) if isinstance(t, torch.Tensor) else t
    with pytest.raises(InvalidTimesError, match=match):
        solve(Linear().to(device), _y0(device), t, method="euler", steps=1)


@pytest.mark.parametrize(
    "y0, match",
    [
        ([1.0, 2.0], "tensor or a non-empty tuple"),
        ((), "tensor or a non-empty tuple"),
        (torch.ones(3, dtype=torch.long), "floating point"),
        (torch.ones(3, dtype=torch.complex64), "y0 must be floating point"),
    ],
)
def test_bad_state(y0, match, device):
    y0 = y0.to(device) if isinstance(y0, torch.Tensor) else y0
    with pytest.raises(InvalidStateError, match=match):
        solve(Linear().to(device), y0, [0.0, 1.0], method="euler", steps=1)


@pytest.mark.parametrize("backend", ["builtin", "torchdiffeq", "torchode"])
@pytest.mark.parametrize(
    "change, match",
    [
        (lambda y: y[..., :2], r"returned \(2, 2\) torch.float32 on {device}, but the state is \(2, 3\)"),
        (lambda y: y.double(), "torch.float64"),
        (lambda y: (y, y), "returned \\(\\(2, 3\\)"),
    ],
)
def test_field_output_mismatch(backend, change, match, device):
    y0 = _y0(device)
    match = match.replace("{device}", re.escape(str(y0.device)))  # the message names the device: cpu, xla:0, cuda:0
    with pytest.raises(FieldOutputError, match=match):
        solve(Wrong(change), y0, [0.0, 1.0], method="euler", steps=2, backend=backend)


def test_field_output_mismatch_in_a_tuple_state(device):
    field = Wrong(lambda y: (y[0], y[1][:1]))
    with pytest.raises(FieldOutputError, match="same structure"):
        solve(field, (_y0(device), torch.ones(2, device=device)), [0.0, 1.0], method="rk4", steps=1)


def test_split_part_output_mismatch_names_the_part(device):
    field = SplitField(MLPBranch(3), Wrong(lambda y: y[..., :1])).to(device)
    with pytest.raises(FieldOutputError, match="part 1 of the split field"):
        solve(field, _y0(device), [0.0, 1.0], method="lie_trotter", steps=1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="rk5", steps=1), r"unknown method 'rk5'; valid: .*'dopri5'.*'euler'"),
        (dict(method="euler", steps=1, backend="jax"), r"unknown backend 'jax'; valid: 'auto', 'builtin'"),
        (
            dict(method="euler", steps=1, gradient="reverse"),
            r"unknown gradient='reverse'; valid: 'backprop', 'checkpoint', 'adjoint'",
        ),
        (
            dict(method="dopri5", gradient="checkpoint"),
            r"no backend supports .*Valid combinations: builtin: .*gradient 'backprop', 'checkpoint'",
        ),
        (dict(method="tsit5", backend="torchdiffeq"), r"no backend supports method='tsit5', backend='torchdiffeq'"),
        (dict(method="lie_trotter", steps=1, gradient="adjoint"), "no backend supports"),
        (dict(method="dopri5", seminorm=True), r"seminorm=True \(torchdiffeq with gradient='adjoint' only\)"),
        (dict(method="dopri5", per_sample=True, backend="torchdiffeq"), r"per_sample=True \(torchode only\)"),
        (dict(method="euler"), "needs exactly one of step_size= or steps="),
        (dict(method="euler", steps=2, step_size=0.5), "needs exactly one of"),
        (dict(method="euler", steps=0), "positive integer"),
        (dict(method="euler", step_size=-1.0), "positive finite"),
        (dict(method="dopri5", steps=3), "adaptive: it takes rtol/atol"),
        (dict(method="euler", steps=1, substep="rk4"), "substep applies to the splitting methods"),
        (dict(method="strang", steps=1, substep="rk9"), r"unknown substep 'rk9'; valid: 'euler'"),
        (dict(method="euler", step_size=math.nan), "step_size must be a positive finite number, got nan"),
        (dict(method="dopri5", backend="torchdiffeq", rtol=-1e-3), r"^rtol must be a finite number >= 0, got -0.001"),
        (dict(method="dopri5", backend="torchode", rtol=-1e-3), r"^rtol must be a finite number >= 0, got -0.001"),
        (dict(method="dopri5", backend="torchdiffeq", atol=-1e-6), r"^atol must be a finite number > 0, got -1e-06"),
        (dict(method="dopri5", backend="torchode", atol=-1e-6), r"^atol must be a finite number > 0, got -1e-06"),
        (dict(method="dopri5", rtol=0.0, atol=0.0), r"^atol must be a finite number > 0, got 0.0: .*divides by atol"),
        (dict(method="dopri5", rtol=math.nan), "^rtol must be a finite number >= 0, got nan"),
        (dict(method="dopri5", rtol=torch.tensor(1e-3)), "^rtol must be a finite number >= 0, got tensor"),
        (dict(method="rk4", steps=2, rtol=1e-3), "fixed-grid 'rk4' has no error control, so rtol would be ignored"),
        (dict(method="heun", steps=2, backend="torchode", atol=1e-3), "so atol would be ignored"),
        (dict(method="euler", steps=2, rtol=1e-3, atol=1e-3), "so rtol and atol would be ignored"),
        (dict(method="dopri5", backend="torchdiffeq", dt0=0.0), r"^dt0 must be a positive finite number, got 0.0"),
        (dict(method="dopri5", backend="torchode", dt0=-0.1), r"^dt0 must be a positive finite number, got -0.1"),
        (dict(method="rk4", steps=2, dt0=0.1), r"^dt0 is the first step of an adaptive Runge-Kutta method, not"),
        (dict(method="dopri5", options={"first_step": -0.1}), r"^options\['first_step'\] must be a positive finite"),
        (dict(method="dopri5", dt0=0.1, options={"first_step": 0.1}), r"^dt0 and options\['first_step'\] both"),
        (dict(method="dopri5", backend="torchode", options={"first_step": 0.1}), "solve runs on 'torchode'"),
        (dict(method="dopri5", options=[("first_step", 0.1)]), "^options must be a dict of torchdiffeq options"),
        (dict(method="rk4_38", steps=2, backend="torchdiffeq", options={"step_size": 0.1}), r"options \['step_size'\]"),
        (dict(method="dopri5", max_steps=0), "^max_steps must be a positive integer, got 0"),
        (dict(method="dopri5", max_steps=True), "^max_steps must be a positive integer, got True"),
        (dict(method="dopri5", seminorm="yes"), "^seminorm must be True or False, got 'yes'"),
        (dict(method="dopri5", per_sample=1), "^per_sample must be True or False, got 1"),
        (dict(method="scipy_solver"), "'scipy_solver' runs outside autograd, so gradient='backprop' would give no"),
    ],
)
def test_bad_configuration(kwargs, match, device):
    field = SplitField(MLPBranch(3)).to(device)
    with pytest.raises(SolverConfigError, match=match):
        solve(field, _y0(device), [0.0, 1.0], **kwargs)


def test_tolerances_finer_than_the_dtype_resolves(device):
    """float16's range cannot hold the squared error ratio 1 / rtol² at rtol = 1e-6: refused by name, not NaN."""
    y0 = torch.ones(2, 3, dtype=torch.float16, device=device)
    with pytest.raises(SolverConfigError, match=r"^rtol=1e-06 is finer than y0's dtype torch.float16 can resolve"):
        solve(Linear().to(device).half(), y0, [0.0, 1.0], method="dopri5")
    solve(Linear().to(device).half(), y0, [0.0, 1.0], method="dopri5", rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("branch", [MLPBranch(3), AttentionBranch(3, 1)], ids=["mlp", "attention"])
def test_solve_refuses_a_residual_branch_and_points_to_as_field(branch, device):
    """A branch's forward(x) is refused with a message saying what a field is and how to make one; as_field(branch)
    and a plain function f(t, y) solve."""
    branch, y0 = branch.to(device), _y0(device)[:, None]
    with pytest.raises(InvalidFieldError, match=r"^field must be callable as field\(t, y\) -> dy/dt, .*as_field"):
        solve(branch, y0, [0.0, 1.0], method="euler", steps=1)
    assert issubclass(InvalidFieldError, TypeError)
    solve(as_field(branch), y0, [0.0, 1.0], method="euler", steps=1)
    solve(lambda t, y: -y, y0, [0.0, 1.0], method="euler", steps=1)
    with pytest.raises(InvalidFieldError, match="^field must be callable .*got int"):
        solve(3, y0, [0.0, 1.0], method="euler", steps=1)


@pytest.mark.parametrize("backend, method", [("builtin", "rk4"), ("torchdiffeq", "dopri5"), ("torchode", "dopri5")])
def test_a_state_of_another_dtype_than_the_field_names_both(backend, method, device):
    """A float64 state through a float32 layer fails inside the field; the error names both dtypes."""
    field = Wrong(nn.LayerNorm(3)).to(device)
    kwargs = dict(steps=2) if method == "rk4" else {}
    with pytest.raises(InvalidStateError, match=r"^y0 has dtype torch.float64 but the field's .* dtype torch.float32"):
        solve(field, _y0(device).double(), [0.0, 1.0], method=method, backend=backend, **kwargs)


def test_a_field_of_mixed_dtypes_takes_a_state_of_any_of_them(device):
    """The state must share a dtype with one floating parameter or buffer, wherever it is in the field: a float64
    state through a field whose first layer is float32 and second float64 passes the check; a float16 state is
    refused with both dtypes named."""
    field = SumOfTwo(nn.Linear(3, 3), nn.Linear(3, 3).double()).to(device)
    assert check_field_matches_state(field, _y0(device).double()) is None
    with pytest.raises(InvalidStateError, match=r"^y0 has dtype torch.float16 but .* torch.float32, torch.float64\."):
        check_field_matches_state(field, _y0(device).half())


def test_a_method_field_is_checked_once_per_function_and_a_branch_still_refused(device):
    """check_field remembers functions seen to take (t, y), never a branch's forward(x)."""
    y0 = _y0(device)[:, None]
    for _ in range(2):
        solve(Linear().to(device), _y0(device), [0.0, 1.0], method="euler", steps=1)
        with pytest.raises(InvalidFieldError, match=r"^field must be callable as field\(t, y\)"):
            solve(MLPBranch(3).to(device), y0, [0.0, 1.0], method="euler", steps=1)


@pytest.mark.parametrize("backend", ["torchdiffeq", "torchode"])
def test_what_the_external_backends_need_of_the_state(backend, device):
    """One dtype across a tuple state, at least one element, and a batch dimension for torchode's per_sample=True."""
    mixed = (_y0(device), torch.ones(2, dtype=torch.float64, device=device))
    with pytest.raises(InvalidStateError, match=f"^the tensors of y0 must share one dtype on the {backend} backend"):
        solve(lambda t, y: y, mixed, [0.0, 1.0], method="dopri5", backend=backend)
    with pytest.raises(InvalidStateError, match=rf"^y0 has no elements \(shapes \[\(0, 3\)\]\); {backend} needs one"):
        solve(lambda t, y: y, torch.ones(0, 3, device=device), [0.0, 1.0], method="dopri5", backend=backend)
    with pytest.raises(InvalidStateError, match=r"^per_sample=True steps each sample along dim 0 of y0"):
        solve(lambda t, y: y, torch.ones((), device=device), [0.0, 1.0], method="dopri5", per_sample=True)


@pytest.mark.parametrize("method", ["lie_trotter", "strang"])
def test_splitting_needs_parts(method, device):
    with pytest.raises(SolverConfigError, match="has no non-empty `parts`"):
        solve(Linear().to(device), _y0(device), [0.0, 1.0], method=method, steps=1)
    with pytest.raises(SolverConfigError, match="Autonomous has no non-empty `parts`"):
        solve(as_field(MLPBranch(3)).to(device), _y0(device), [0.0, 1.0], method=method, steps=1)


@pytest.mark.parametrize("adjoint", ["backprop", "adjoint"])
@pytest.mark.parametrize("backend, method", [("torchdiffeq", "dopri5"), ("torchode", "dopri5"), ("torchode", "tsit5")])
def test_max_steps(backend, method, adjoint, device):
    with pytest.raises(MaxStepsExceededError, match=r"max_steps=5.* after \d+ evaluations"):
        field, y0 = Linear().to(device), _y0(device)
        settings = dict(method=method, backend=backend, gradient=adjoint, max_steps=5, rtol=1e-9, atol=1e-9)
        solve(field, y0, [0.0, 10.0], **settings)


@pytest.mark.parametrize("backend", ["torchdiffeq", "torchode"])
def test_step_size_underflow_or_blowup_is_reported(backend, device):
    """dy/dt = y² from y0=1 blows up at t=1: the adaptive solve either underflows its step or
    produces Inf; either way the error says when."""
    y0 = torch.ones(1, 1, dtype=torch.float64, device=device)
    with pytest.raises((StepSizeUnderflowError, NonFiniteStateError, MaxStepsExceededError), match=r"t=0\.99|t=1"):
        solve(Blowup(), y0, [0.0, 2.0], method="dopri5", backend=backend)


def test_step_size_underflow_gives_time_and_evaluations(device):
    y0 = torch.zeros(1, dtype=torch.float64, device=device)
    with pytest.raises(StepSizeUnderflowError, match=r"underflowed at t=1 after \d+ evaluations"):
        solve(Chattering(), y0, [1.0, 2.0], method="dopri5", rtol=1e-9, atol=1e-9)


def test_nan_in_fixed_grid_solve_names_time_and_step(device):
    # dy/dt = y² from y0 = 1 with Euler h = 0.5 goes 1, 1.5, 2.6, 6.0, 24, 316, 5e4, 1.2e9, 8e17,
    # 3e35, Inf in float32: the 10th step overflows.
    with pytest.raises(NonFiniteStateError, match=r"at t=4\.5, step 10 \(evaluation 10\)"):
        solve(Blowup(), torch.ones(1, device=device), [0.0, 10.0], method="euler", step_size=0.5)


def test_nan_in_split_solve_counts_part_evaluations(device):
    field = SplitField(Blowup(), Linear(rate=0.0)).to(device)
    with pytest.raises(NonFiniteStateError, match=r"step 10 \(evaluation 19\)"):
        solve(field, torch.ones(1, device=device), [0.0, 10.0], method="lie_trotter", step_size=0.5)


def test_a_finite_solution_whose_sum_overflows_is_not_an_error(device):
    """The finiteness check sums the solution (NaN and Inf propagate) and re-checks entry by entry
    when the sum overflows: large but finite states pass."""
    y0 = torch.full((4,), 3e38, device=device)  # float32: the sum of the entries overflows to Inf
    solution = solve(Linear(rate=0.0).to(device), y0, [0.0, 1.0], method="euler", steps=1)
    assert torch.equal(solution.y1, y0)
    state = (y0, torch.ones(2, device=device))
    augmented = solve(lambda t, y: (y[0] * 0, y[1] * 0), state, [0.0, 1.0], method="euler", steps=1)
    assert torch.equal(augmented.y1[0], y0)


def test_nan_in_initial_state(device):
    y0 = torch.tensor([1.0, math.nan], device=device)
    with pytest.raises(NonFiniteStateError, match="initial state y0 contains NaN"):
        solve(Linear().to(device), y0, [0.0, 1.0], method="rk4", steps=2)


def test_nan_from_the_field_in_adaptive_solve(device):
    class NaNAfterHalf(nn.Module):
        def forward(self, t, y):
            return y * torch.where(t > 0.5, math.nan, 1.0)

    # On the CPU the NaN error ratio turns dt into NaN at step 3 and the solve stops. On XLA,
    # torch.min(x, nan) is x, so torchdiffeq's step control never yields a NaN dt and the solve runs
    # on (rejecting every step) to max_steps, then the replay locates the NaN: max_steps=50 keeps that
    # short (the default 10_000 took 4 minutes on XLA's CPU backend) and changes nothing on the CPU.
    y0 = torch.ones(2, dtype=torch.float64, device=device)
    with pytest.raises(NonFiniteStateError, match=r"in the field's output at t=0\.5"):
        solve(NaNAfterHalf(), y0, [0.0, 1.0], method="dopri5", max_steps=50)


def test_errors_are_also_builtin_exception_types(device):
    assert issubclass(InvalidTimesError, ValueError) and issubclass(SolverConfigError, ValueError)
    assert issubclass(MaxStepsExceededError, RuntimeError) and issubclass(NonFiniteStateError, SolveError)
    with pytest.raises(ValueError, match="strictly increasing"):  # raised on the device, caught as ValueError
        solve(Linear().to(device), _y0(device), [1.0, 0.0], method="euler", steps=1)
