"""Property tests of ``solve`` over its arguments: it solves and matches the exact solution, or it says which
argument is wrong.

The problem is the linear, time-dependent ``dy/dt = (λ + μ cos t) y`` on every entry of the state, whose exact
solution ``y0 · exp(λ (t - t0) + μ (sin t - sin t0))`` is known for any times, shapes and states, as is its
gradient with respect to ``y0``. Hypothesis draws the times, the state (0-dim, 1-D, batched, tuples; float32,
float64, integer, complex; with or without an all-zero first sample), the field's dtype, backend × method ×
gradient method, steps or step size, tolerances, ``dt0``, ``options``, ``per_sample``, ``seminorm`` and
``max_steps``. :func:`complaints` states the contract: which arguments of a case are wrong and which error
names each. A case with none must solve and match the exact solution (and its gradient), within a bound of the
method's order and step, or of its tolerances; a case with some must raise one of those errors, with a message
that names the argument.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from torch import nn

from neuralode_tf import solve
from neuralode_tf.numerics import (
    BACKENDS,
    FIXED_GRID_METHODS,
    GRADIENTS,
    InvalidFieldError,
    InvalidStateError,
    InvalidTimesError,
    SolveError,
    SolverConfigError,
    get_backend,
    methods,
)
from tests._problems import backward_grads, skip_torchode_backprop_on_xla, torchode_backprop_on_xla

LAMBDA, MU = -0.5, 0.8
SPLITTING = ("lie_trotter", "strang")
ORDER = {"euler": 1, "midpoint": 2, "heun": 2, "heun3": 3, "rk4": 4, "rk4_38": 4}
"""Convergence order of the fixed-grid methods; the Adams methods (which start with lower orders) count as 2."""
LOW_ORDER_ADAPTIVE = {"fehlberg2", "adaptive_heun", "bosh3"}
"""Adaptive methods whose error estimate is loose: their global error may exceed 100 times the tolerance."""
OUTSIDE_AUTOGRAD = frozenset().union(*(get_backend(b).outside_autograd for b in BACKENDS))
"""Methods that run outside autograd, on the backend that offers them (torchdiffeq's scipy_solver)."""
TOLERANCED_FIXED_GRID = frozenset().union(*(get_backend(b).toleranced for b in BACKENDS))
"""Fixed-grid methods that take rtol and atol (torchdiffeq's implicit_adams and fixed_adams)."""


class Rate(nn.Module):
    """``dy/dt = (λ + μ cos t) y``, through a matmul so that a state of another dtype fails as in a real layer."""

    def __init__(self, dtype: torch.dtype, device: torch.device):
        super().__init__()
        self.coefficients = nn.Parameter(torch.tensor([LAMBDA, MU], dtype=dtype, device=device))

    def forward(self, t: torch.Tensor, y: Any) -> Any:
        t = torch.as_tensor(t, dtype=self.coefficients.dtype, device=self.coefficients.device)
        rate = self.coefficients[0] + self.coefficients[1] * torch.cos(t)  # (), (1,) or per-sample (batch,)
        rate = rate.reshape(()) if rate.numel() == 1 else rate
        return tuple(self._times(rate, x) for x in y) if isinstance(y, tuple) else self._times(rate, y)

    @staticmethod
    def _times(rate: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        rate = rate.reshape(rate.shape + (1,) * (x.ndim - rate.ndim))
        return torch.matmul(x[..., None, None], rate[..., None, None])[..., 0, 0]


@dataclass
class Case:
    """One call of ``solve``: ``field_kind`` is ``"module"``, ``"function"`` (a plain ``f(t, y)``) or ``"branch"``
    (``forward(x)``)."""

    field_kind: str
    field_dtype: torch.dtype
    shapes: list[tuple[int, ...]]
    tuple_state: bool
    dtype: torch.dtype
    zero_first_sample: bool
    requires_grad: bool
    t: list[float]
    t_as_tensor: bool
    kwargs: dict[str, Any]


def _batched(shapes: list[tuple[int, ...]]) -> bool:
    """Whether a state of these shapes has a batch dimension: dim 0 of every tensor, of one size."""
    return all(len(s) >= 1 for s in shapes) and len({s[0] for s in shapes}) == 1


def _pick(draw: st.DrawFn, corrupt: bool, good: list, bad: list) -> Any:
    """A good value, or with ``corrupt`` sometimes a bad one."""
    if corrupt and bad and draw(st.integers(0, 5)) == 5:
        return draw(st.sampled_from(bad))
    return draw(st.sampled_from(good))


@st.composite
def cases(draw: st.DrawFn, corrupt: bool) -> Case:
    """Arguments of ``solve``: all valid, or with ``corrupt`` each argument sometimes wrong."""
    backend = draw(st.sampled_from(BACKENDS))
    own = [m for m in methods(backend) if m not in SPLITTING]
    foreign = ["rk5", *SPLITTING, *sorted({m for b in BACKENDS for m in methods(b)} - set(methods(backend)))]
    method = _pick(draw, corrupt, own, foreign)
    others = [g for g in GRADIENTS if g not in get_backend(backend).gradients]
    good = ["adjoint"] if method in OUTSIDE_AUTOGRAD else list(get_backend(backend).gradients)  # backprop: no gradient
    gradient = _pick(draw, corrupt, good, [*others, "reverse", "backprop"])
    fixed, kw = method in FIXED_GRID_METHODS, {}
    t0 = draw(st.floats(-2.0, 2.0))
    increments = draw(st.lists(st.floats(0.05, 0.5), min_size=1, max_size=3))
    t = [t0 + sum(increments[:i]) for i in range(len(increments) + 1)]
    t = _pick(draw, corrupt, [t], [t[:1], t[::-1], [t[0], t[0]], [t[0], math.nan], [t[0], math.inf]])
    shapes = draw(st.lists(st.sampled_from([(), (3,), (2, 2), (2, 1, 3), (1, 2)]), min_size=1, max_size=2))
    dtype = _pick(draw, corrupt, [torch.float32, torch.float64], [torch.int64, torch.complex64])
    floating = dtype.is_floating_point
    field_kind = _pick(draw, corrupt, ["module", "function"], ["branch"])
    field_dtype = dtype if floating else torch.float32
    if field_kind == "module":  # solve cannot see into a function: it gets the state's dtype
        field_dtype = _pick(draw, corrupt, [field_dtype], [torch.float64 if dtype == torch.float32 else torch.float32])
    per_sample_ok = backend == "torchode" and _batched(shapes)
    kw["per_sample"] = _pick(draw, corrupt, [False, *([True] if per_sample_ok else [])], [True, None])
    seminorm_ok = backend == "torchdiffeq" and gradient == "adjoint"
    kw["seminorm"] = _pick(draw, corrupt, [False, *([True] if seminorm_ok else [])], [True])
    if fixed:
        good = [{"steps": draw(st.integers(1, 6))}, {"step_size": draw(st.floats(0.1, 0.6))}]
        bad = [{}, {"steps": 2, "step_size": 0.5}, {"steps": 0}, {"steps": 2.0}, {"step_size": -0.1}]
        kw.update(_pick(draw, corrupt, good, [*bad, {"step_size": math.nan}, {"step_size": math.inf}]))
    else:
        kw.update(_pick(draw, corrupt, [{}], [{"steps": 3}, {"step_size": 0.2}]))
    if not fixed or method in TOLERANCED_FIXED_GRID:
        rtol, atol = draw(st.sampled_from([None, 1e-4, 1e-6, 0.0])), draw(st.sampled_from([None, 1e-4, 1e-6]))
        bad = [(-1e-3, atol), (rtol, -1e-6), (math.nan, atol), (rtol, math.inf), (rtol, 0.0), (0.0, 0.0)]
        kw["rtol"], kw["atol"] = _pick(draw, corrupt, [(rtol, atol)], bad)
    else:
        kw["rtol"], kw["atol"] = _pick(draw, corrupt, [(None, None)], [(1e-3, None), (None, 1e-3)])
    takes_dt0 = method in get_backend(backend).takes_dt0
    kw["dt0"] = _pick(draw, corrupt, [None, 0.05, 0.2] if takes_dt0 else [None], [0.0, -0.1, math.nan, 0.1])
    first_step = [{"first_step": 0.05}] if takes_dt0 and kw["dt0"] is None else []
    good = [None, {}, *first_step] if backend == "torchdiffeq" else [None]
    kw["options"] = _pick(draw, corrupt, good, [{"first_step": -0.1}, {"first_step": 0.1}, {"step_size": 0.1}, [1]])
    kw["max_steps"] = _pick(draw, corrupt, [10_000], [0, -3, True, 2.5])
    return Case(
        field_kind,
        field_dtype,
        shapes,
        tuple_state=len(shapes) > 1 or draw(st.booleans()),
        dtype=dtype,
        zero_first_sample=draw(st.booleans()),
        requires_grad=floating and draw(st.booleans()),
        t=t,
        t_as_tensor=draw(st.booleans()),
        kwargs=dict(kw, backend=backend, method=method, gradient=gradient),
    )


def complaints(case: Case) -> list[tuple[type[SolveError], str]]:
    """The contract: for each wrong argument of ``case``, the error it raises and a pattern naming the argument."""
    kw, out = case.kwargs, []
    backend, method, gradient = kw["backend"], kw["method"], kw["gradient"]
    t = case.t
    if case.field_kind == "branch":
        out.append((InvalidFieldError, r"^field must be callable as field\(t, y\)"))
    if not case.dtype.is_floating_point:
        out.append((InvalidStateError, r"^y0 must be floating point"))
    elif case.field_kind == "module" and case.field_dtype != case.dtype:
        out.append((InvalidStateError, rf"^y0 has dtype {case.dtype} but the field's parameters have dtype"))
    if len(t) < 2 or not all(math.isfinite(x) for x in t) or any(b <= a for a, b in zip(t, t[1:])):
        out.append((InvalidTimesError, r"^t (must|needs)"))
    if kw["max_steps"] is True or not isinstance(kw["max_steps"], int) or kw["max_steps"] < 1:
        out.append((SolverConfigError, r"^max_steps must be a positive integer"))
    if method not in methods(backend) or method in SPLITTING or gradient not in get_backend(backend).gradients:
        out.append((SolverConfigError, r"method|gradient"))
    if method in OUTSIDE_AUTOGRAD and gradient == "backprop" and (case.field_kind == "module" or case.requires_grad):
        out.append((SolverConfigError, r"gradient='backprop' would give no gradient"))
    if kw["seminorm"] and not (backend == "torchdiffeq" and gradient == "adjoint"):
        out.append((SolverConfigError, r"seminorm=True"))
    if kw["per_sample"] and not (backend == "torchode" and _batched(case.shapes)):
        out.append((SolveError, r"per_sample=True"))
    if kw["per_sample"] is None:
        out.append((SolverConfigError, r"^per_sample must be True or False"))
    fixed = method in FIXED_GRID_METHODS
    steps, step_size = kw.get("steps"), kw.get("step_size")
    if fixed != (steps is not None or step_size is not None) or (steps is not None and step_size is not None):
        out.append((SolverConfigError, r"step_size= or steps=|not step_size or steps"))
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        out.append((SolverConfigError, r"^steps must be a positive integer"))
    if step_size is not None and not (math.isfinite(step_size) and step_size > 0):
        out.append((SolverConfigError, r"^step_size must be a positive finite number"))
    rtol, atol = kw["rtol"], kw["atol"]
    if fixed and method not in TOLERANCED_FIXED_GRID and (rtol is not None or atol is not None):
        out.append((SolverConfigError, r"has no error control, so (rtol|atol)"))
    if rtol is not None and not (math.isfinite(rtol) and rtol >= 0):
        out.append((SolverConfigError, r"^rtol must be a finite number >= 0"))
    if atol is not None and not (math.isfinite(atol) and atol > 0):
        out.append((SolverConfigError, r"^atol must be a finite number > 0"))
    options = kw["options"]
    if options is not None and not isinstance(options, dict):
        out.append((SolverConfigError, r"^options must be a dict"))
    elif options and backend != "torchdiffeq":
        out.append((SolverConfigError, r"^options are passed to torchdiffeq"))
    elif options and "step_size" in options:
        out.append((SolverConfigError, r"^options \['step_size'\] are set by solve"))
    takes_dt0 = method in get_backend(backend).takes_dt0
    first = options.get("first_step") if isinstance(options, dict) else None
    for name, value in (("dt0", kw["dt0"]), (r"options\['first_step'\]", first)):
        if value is not None and not (takes_dt0 and math.isfinite(value) and value > 0):
            out.append((SolverConfigError, rf"^{name} (is the first step|must be a positive)"))
    if kw["dt0"] is not None and first is not None:
        out.append((SolverConfigError, r"^dt0 and options\['first_step'\]"))
    return out


def _build(case: Case, device: torch.device) -> tuple[Any, Any, Any]:
    """The field, ``y0`` and ``t`` of ``case`` on ``device``."""
    rate = Rate(case.field_dtype, device)
    field = {"module": rate, "function": lambda t, y: rate(t, y), "branch": nn.Identity()}[case.field_kind]
    generator = torch.Generator().manual_seed(len(case.t) + 7 * len(case.shapes))
    tensors = [torch.randn(s, generator=generator).mul(2) for s in case.shapes]
    if case.zero_first_sample:  # exact zeros: 0 / 0 in a relative error norm, sqrt(0) in its gradient
        tensors = [x.index_fill(0, torch.tensor(0), 0.0) if x.ndim else torch.zeros(()) for x in tensors]
    tensors = [x.to(device=device, dtype=case.dtype).requires_grad_(case.requires_grad) for x in tensors]
    y0 = tuple(tensors) if case.tuple_state else tensors[0]
    t = torch.tensor(case.t, dtype=torch.float64, device=device) if case.t_as_tensor else case.t
    return field, y0, t


def _bound(case: Case, scale: float) -> float:
    """Largest acceptable error for solutions of size ``scale``: from the step and order, or the tolerances."""
    kw, span = case.kwargs, case.t[-1] - case.t[0]
    rtol = 1e-6 if kw["rtol"] is None else kw["rtol"]
    atol = 1e-8 if kw["atol"] is None else kw["atol"]
    from_tolerances = (rtol + atol / scale) * (1 + span)
    if kw["method"] in FIXED_GRID_METHODS:
        h = kw["step_size"] if "step_size" in kw else span / kw["steps"]
        bound = 3 * (1.3 * h) ** ORDER.get(kw["method"], 2) * (1 + span)
        bound += 100 * from_tolerances if kw["method"] in TOLERANCED_FIXED_GRID else 0.0
    else:
        bound = (1000 if kw["method"] in LOW_ORDER_ADAPTIVE else 100) * from_tolerances
    return scale * (bound + 1000 * torch.finfo(case.dtype).eps)


def _check(case: Case, device: torch.device) -> None:
    """Run ``case``: the error the contract names, or the exact solution and gradient."""
    expected = complaints(case)
    field, y0, t = _build(case, device)
    try:
        solution = solve(field, y0, t, **case.kwargs)
    except SolveError as err:
        event(f"refused: {type(err).__name__}")
        assert expected, f"valid arguments were refused: {type(err).__name__}: {err}"
        named = [p for kind, p in expected if isinstance(err, kind) and re.search(p, str(err))]
        assert named, f"{type(err).__name__}: {err!r} names none of {expected}"
        return
    assert not expected, f"solve accepted arguments the contract refuses: {expected}"
    event(f"solved on {case.kwargs['backend']}")
    growth = [LAMBDA * (s - case.t[0]) + MU * (math.sin(s) - math.sin(case.t[0])) for s in case.t]
    factors = torch.tensor(growth, dtype=torch.float64, device=device).exp()
    ys = solution.ys if case.tuple_state else (solution.ys,)
    for y, x0 in zip(ys, y0 if case.tuple_state else (y0,)):
        assert y.dtype == x0.dtype and y.shape == (len(case.t), *x0.shape)
        exact = factors.reshape(-1, *[1] * x0.ndim) * x0.detach().double()
        scale = exact.abs().max().item() + 1e-3
        assert (y.double() - exact).abs().max().item() <= _bound(case, scale)
    if case.requires_grad and not torchode_backprop_on_xla(device, case.kwargs):  # gradients XLA cannot take
        leaves = list(y0) if case.tuple_state else [y0]
        grads = backward_grads(sum(y[-1].sum() for y in ys), leaves)
        final = factors[-1].item()
        # Backprop through an adaptive solve differentiates the steps chosen for the solution, which on an all-zero
        # sample need not resolve the gradient; adjoints and fixed grids do. Finite, always.
        kw = case.kwargs
        resolved = not case.zero_first_sample or kw["gradient"] == "adjoint" or kw["method"] in FIXED_GRID_METHODS
        for grad in grads:
            error = (grad.double() - final).abs().max().item()
            assert math.isfinite(error) and (not resolved or error <= _bound(case, final))


@given(case=cases(corrupt=False))
def test_valid_arguments_solve_to_the_exact_solution(case: Case, device: torch.device) -> None:
    """Every valid combination of times, state, backend, method, gradient method, steps and tolerances solves,
    and matches the exact solution and gradient within a bound of the method's order or tolerances."""
    assert complaints(case) == []
    _check(case, device)


@given(case=cases(corrupt=True))
def test_any_arguments_solve_or_name_what_is_wrong(case: Case, device: torch.device) -> None:
    """Arguments drawn from valid and invalid values: ``solve`` either matches the exact solution, or raises
    the documented error of a wrong argument, naming it: never an error from inside a backend."""
    _check(case, device)


# Regressions the properties found, pinned.


@pytest.mark.parametrize("backend, method", [("builtin", "rk4"), ("torchdiffeq", "dopri5"), ("torchode", "dopri5")])
def test_zero_dim_float32_state_on_every_backend(backend: str, method: str, device: torch.device) -> None:
    """A 0-dim state is one sample on every backend and keeps its shape and dtype: torchode's matrix needed a
    reshape, and torchdiffeq's float64 0-dim times promoted it to float64 inside the solve."""
    y0 = torch.tensor(2.0, device=device)
    steps = dict(steps=16) if method == "rk4" else {}
    solution = solve(Rate(torch.float32, device), y0, [0.0, 1.0], method=method, backend=backend, **steps)
    exact = 2.0 * math.exp(LAMBDA + MU * math.sin(1.0))
    assert solution.y1.shape == () and solution.y1.dtype == torch.float32
    assert abs(solution.y1.item() - exact) <= 1e-5


@pytest.mark.parametrize("per_sample", [True, False])
def test_all_zero_samples_get_finite_gradients_on_torchode(per_sample: bool, device: torch.device) -> None:
    """Backprop through torchode's adaptive solve gave NaN gradients, to y0 and the parameters, when a sample's
    state was exactly zero (the derivative of its error norm sqrt(0)); a zero-padded sample poisoned the batch."""
    skip_torchode_backprop_on_xla(device, dict(method="dopri5", backend="torchode"))
    field = Rate(torch.float64, device)
    y0 = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float64, device=device, requires_grad=True)
    y1 = solve(field, y0, [0.0, 1.0], method="dopri5", backend="torchode", per_sample=per_sample).y1
    grads = torch.autograd.grad(y1.sum(), [y0, field.coefficients])
    assert all(bool(torch.isfinite(g).all()) for g in grads)
    exact = math.exp(LAMBDA + MU * math.sin(1.0))
    assert (grads[0][1] - exact).abs().max().item() <= 1e-4
