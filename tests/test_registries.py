"""Tests generated from the backend registry, and of the registry as an extension point.

Every registered (backend, method) pair solves a small linear ODE to its expected accuracy, and every
(backend, gradient method) pair gives the gradients of backprop through the exact solution: a backend registered
in ``neuralode_tf/numerics/backends/`` is tested by these without a line here. :func:`solve`'s docstring lists
the built-in methods per backend, checked against the registry. A toy backend registered in this module shows
that a backend is one :class:`Backend` and one :func:`register_backend` call.
"""

from __future__ import annotations

import dataclasses
import math
import pydoc
import re
import typing
from pathlib import Path

import pytest
import torch
from torch import nn

from neuralode_tf import solve
from neuralode_tf.numerics import (
    BACKENDS,
    FIXED_GRID_METHODS,
    GRADIENTS,
    SPLITTING_SCHEMES,
    TABLEAUS,
    Backend,
    ButcherTableau,
    NonFiniteStateError,
    SolverConfigError,
    SplittingScheme,
    get_backend,
    methods,
    register_backend,
    register_splitting_scheme,
    register_tableau,
    unregister_backend,
)
from neuralode_tf.numerics.backends import builtin
from neuralode_tf.numerics.fixed_grid import rk_step
from tests._problems import backward_grads, skip_torchode_backprop_on_xla

TIMES = [0.0, 0.5, 1.0]
ORDER = {
    **{name: tableau.order for name, tableau in TABLEAUS.items()},
    "lie_trotter": 1,
    "strang": 1,  # with the default Euler sub-step
    "heun3": 3,
    "explicit_adams": 2,  # the Adams methods start with lower orders
    "implicit_adams": 2,
    "fixed_adams": 2,
}
"""Orders of the fixed-grid methods; a method missing here is held to first order."""
STEPS = {"explicit_adams": 8}
"""Steps of the fixed-grid methods over ``TIMES``, 32 where not given. torchdiffeq's explicit_adams (0.2.5) loses
accuracy as its steps shrink, with torchdiffeq's own grid too: 2e-3 at 8 steps, 0.7 at 32, 1e3 at 128 here."""
LOW_ORDER_ADAPTIVE = {"fehlberg2", "adaptive_heun", "bosh3"}
"""Adaptive methods whose error estimate is loose: their global error may exceed 100 times the tolerance."""


class _Part(nn.Module):
    def __init__(self, a: list[list[float]]):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a, dtype=torch.float64))

    def forward(self, t, y):
        return y @ self.a.T


class _Linear(nn.Module):
    """``dy/dt = (A_1 + A_2) y`` on each row of ``y``, a split field of two linear parts (so the splitting
    methods apply) with the exact solution ``y0 exp((A_1 + A_2) t)^T``."""

    def __init__(self):
        super().__init__()
        self.parts = nn.ModuleList([_Part([[-0.5, 1.0], [-1.0, -0.5]]), _Part([[-0.2, 0.3], [0.0, -0.4]])])

    def forward(self, t, y):
        return sum(part(t, y) for part in self.parts)

    def exact(self, y0: torch.Tensor, times: list[float]) -> torch.Tensor:
        a = sum(part.a for part in self.parts)
        return torch.stack([y0 @ torch.linalg.matrix_exp(a * s).T for s in times])


def _problem(device: torch.device) -> tuple[_Linear, torch.Tensor]:
    y0 = torch.tensor([[1.0, 0.0], [0.5, -2.0], [0.0, 0.3]], dtype=torch.float64)
    return _Linear().to(device), y0.to(device)


def _settings(backend: Backend, method: str) -> dict:
    """Fine enough for ``method`` to reach its accuracy bound on ``_Linear``."""
    if method in backend.fixed_grid:
        return dict(method=method, steps=STEPS.get(method, 32))
    return dict(method=method, rtol=1e-8, atol=1e-8)


def _bound(backend: Backend, method: str) -> float:
    if method in backend.fixed_grid:
        return 2 * (1 / STEPS.get(method, 32)) ** ORDER.get(method, 1)
    return 1e-5 if method in LOW_ORDER_ADAPTIVE else 1e-6


METHOD_CASES = [(b, m) for b in BACKENDS for m in methods(b)]
GRADIENT_CASES = [(b, g) for b in BACKENDS for g in get_backend(b).gradients]


@pytest.mark.cpu_only("registry bookkeeping; no tensors")
def test_the_cases_are_every_registered_method_and_gradient_method():
    """What the extending guide promises a new backend: its methods and gradient methods are tested from here."""
    import neuralode_tf.numerics.backends as package

    modules = {p.stem for p in Path(package.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert modules <= set(BACKENDS), f"backend modules that register nothing: {modules - set(BACKENDS)}"
    assert [(b, m) for b in BACKENDS for m in get_backend(b).methods] == METHOD_CASES
    assert {b for b, _ in GRADIENT_CASES} == set(BACKENDS) and {g for _, g in GRADIENT_CASES} <= set(GRADIENTS)


@pytest.mark.parametrize("backend, method", METHOD_CASES)
def test_every_backend_method_solves_a_linear_ode(backend, method, device):
    field, y0 = _problem(device)
    settings = _settings(get_backend(backend), method)
    with torch.no_grad():  # scipy_solver runs outside autograd
        solution = solve(field, y0, TIMES, backend=backend, **settings)
        error = (solution.ys - field.exact(y0, TIMES)).abs().max().item()
    assert solution.stats.backend == backend
    assert error <= _bound(get_backend(backend), method), f"{backend} {method}: error {error:.2e}"


def _accurate(backend: Backend) -> dict:
    """The backend's first adaptive method (differentiable) at tight tolerances, else its highest-order fixed grid."""
    adaptive = [m for m in backend.methods if m not in backend.fixed_grid | backend.outside_autograd]
    if adaptive:
        return dict(method=adaptive[0], rtol=1e-10, atol=1e-10)
    fixed = [m for m in backend.methods if m in backend.fixed_grid]
    return dict(method=max(fixed, key=lambda m: ORDER.get(m, 1)), steps=64)


def _gradients(field: _Linear, y0: torch.Tensor, solution) -> tuple[torch.Tensor, ...]:
    weights = torch.linspace(-1.0, 1.0, y0.numel(), dtype=y0.dtype, device=y0.device).reshape(y0.shape)
    return backward_grads((solution(field, y0)[1:] * weights).sum(), [y0, *field.parameters()])


@pytest.mark.parametrize("backend, gradient", GRADIENT_CASES)
def test_every_backend_gradient_method_matches_backprop_through_the_exact_solution(backend, gradient, device):
    settings = dict(_accurate(get_backend(backend)), backend=backend, gradient=gradient)
    skip_torchode_backprop_on_xla(device, settings)
    field, y0 = _problem(device)
    y0.requires_grad_()
    reference = _gradients(field, y0, lambda f, y: f.exact(y, TIMES))
    got = _gradients(field, y0, lambda f, y: solve(f, y, TIMES, **settings).ys)
    for g, r in zip(got, reference):
        rel = ((g - r).norm() / r.norm()).item()
        assert rel <= 1e-5, f"{backend} {gradient} ({settings['method']}): relative gradient error {rel:.2e}"


def _method_lists(doc: str) -> dict[str, list[tuple[str, list[str]]]]:
    """From solve's docstring: for each backend bullet, its ``;``-separated groups as (label, method names)."""
    section = doc[doc.index("        method:") : doc.index("        step_size:")]
    bullets = re.findall(r'\* ``"(\w+)"``:(.*?)(?=\n\s*\* ``"|\Z)', section, flags=re.DOTALL)
    return {
        backend: [(group.split("``")[0].strip(), re.findall(r'``"(\w+)"``', group)) for group in body.split(";")]
        for backend, body in bullets
    }


@pytest.mark.cpu_only("reads solve's docstring and the registry; no tensors")
def test_solve_docstring_lists_exactly_the_built_in_methods_per_backend():
    """Every name the docstring lists is a method of that backend, fixed-grid or adaptive as it says, and every
    method of each built-in backend is listed: the docstring cannot go stale."""
    listed = _method_lists(solve.__doc__)
    assert sorted(listed) == sorted(BACKENDS)
    for name, groups in listed.items():
        backend = get_backend(name)
        names = [m for _, ms in groups for m in ms]
        assert sorted(names) == sorted(backend.methods), name
        adaptive = [m for label, ms in groups if label.startswith("adaptive") for m in ms]
        assert sorted(adaptive) == sorted(set(backend.methods) - backend.fixed_grid), name
    shown = pydoc.render_doc(solve, renderer=pydoc.plaintext)
    assert "neuralode_tf.numerics.methods(backend)" in shown and '"strang"' in shown


@pytest.mark.cpu_only("reads solve's signature and the registry; no tensors")
def test_solve_signature_literals_match_the_registry():
    hints = typing.get_type_hints(solve)
    for name in ("gradient", "adjoint"):  # adjoint: the deprecated old name
        literal, none = typing.get_args(hints[name])
        assert typing.get_args(literal) == GRADIENTS and none is type(None)
    assert typing.get_args(hints["backend"]) == ("auto", *BACKENDS)


# The toy backend: forward Euler over the built-in grid, written as an outside module would write one.


def _toy_solve(field, y0, times, settings, stats):
    ys, y = [y0], y0
    for a, b in zip(times[:-1], times[1:]):
        n = max(1, math.ceil((b - a) / settings.step_size - 1e-9))
        grid = [a + (b - a) * k / n for k in range(n)] + [b]
        for t, t_next in zip(grid[:-1], grid[1:]):
            y = rk_step(field, t, t_next - t, y, TABLEAUS["euler"])
            stats.nfe += 1
            stats.n_accepted += 1
        ys.append(y)
    return ys


TOY = Backend(
    name="toy", methods=("toy_euler",), fixed_grid=frozenset({"toy_euler"}), gradients=("backprop",), solve=_toy_solve
)


@pytest.fixture
def toy():
    register_backend(TOY)
    try:
        yield TOY
    finally:
        unregister_backend("toy")


def test_a_registered_backend_solves_and_is_listed(toy, device):
    assert BACKENDS[-1] == "toy" and methods("toy") == ("toy_euler",) and get_backend("toy").gradients == ("backprop",)
    assert "toy_euler" in FIXED_GRID_METHODS
    field, y0 = _problem(device)
    y0.requires_grad_()
    auto = solve(field, y0, TIMES, method="toy_euler", steps=8)
    named = solve(field, y0, TIMES, method="toy_euler", steps=8, backend="toy")
    builtin = solve(field, y0, TIMES, method="euler", steps=8)
    assert auto.stats.backend == named.stats.backend == "toy"
    assert torch.equal(named.ys, builtin.ys) and named.stats.nfe == builtin.stats.nfe == 8
    grads = torch.autograd.grad(named.y1.sum(), [y0, *field.parameters()])
    reference = torch.autograd.grad(builtin.y1.sum(), [y0, *field.parameters()])
    assert all(torch.equal(g, r) for g, r in zip(grads, reference))


def test_auto_picks_by_declared_priority_not_by_registration_order(device):
    """A backend registered last but of a lower priority than the built-in one (0) is tried first for a method both
    offer; one of the default priority (100) comes after torchode (20)."""
    field, y0 = _problem(device)
    first = dataclasses.replace(TOY, name="first", methods=("euler",), fixed_grid=frozenset({"euler"}), priority=-1)
    register_backend(first)
    try:
        assert BACKENDS[0] == "first" and solve(field, y0, TIMES, method="euler", steps=8).stats.backend == "first"
    finally:
        unregister_backend("first")
    register_backend(TOY)
    try:
        assert list(BACKENDS) == ["builtin", "torchdiffeq", "torchode", "toy"]
        assert solve(field, y0, TIMES, method="euler", steps=8).stats.backend == "builtin"
    finally:
        unregister_backend("toy")


def test_a_registered_backend_refuses_what_it_does_not_declare(toy, device):
    field, y0 = _problem(device)
    with pytest.raises(SolverConfigError, match=r"no backend supports method='euler', backend='toy'.*toy: methods"):
        solve(field, y0, TIMES, method="euler", steps=2, backend="toy")
    with pytest.raises(SolverConfigError, match=r"no backend supports .*gradient='checkpoint'"):
        solve(field, y0, TIMES, method="toy_euler", steps=2, gradient="checkpoint")
    with pytest.raises(SolverConfigError, match="has no error control, so rtol would be ignored"):
        solve(field, y0, TIMES, method="toy_euler", steps=2, rtol=1e-3)
    with pytest.raises(SolverConfigError, match="compile=True applies to the built-in"):
        solve(field, y0, TIMES, method="toy_euler", steps=2, compile=True)
    with pytest.raises(SolverConfigError, match="options are passed to torchdiffeq, but this solve runs on 'toy'"):
        solve(field, y0, TIMES, method="toy_euler", steps=2, options={"first_step": 0.1})


def test_the_chosen_backend_checks_what_only_it_knows(device):
    """``Backend.check`` has its say once the backend is chosen, for that backend alone; ``substep`` reaches only the
    methods a backend declares to take one."""
    calls = []

    def check(field, method, substep):
        calls.append((method, substep))
        if substep == "bad":
            raise SolverConfigError(f"toy refuses substep={substep!r}")

    field, y0 = _problem(device)
    with pytest.raises(SolverConfigError, match=r"splitting methods 'lie_trotter', 'strang', not 'euler'"):
        solve(field, y0, TIMES, method="euler", steps=2, substep="rk4")  # before the toy declares substeps
    register_backend(dataclasses.replace(TOY, substep=frozenset({"toy_euler"}), check=check))
    try:
        solve(field, y0, TIMES, method="toy_euler", steps=2, substep="good")
        solve(field, y0, TIMES, method="euler", steps=2)  # the built-in backend's: the toy's check is not asked
        with pytest.raises(SolverConfigError, match="toy refuses substep='bad'"):
            solve(field, y0, TIMES, method="toy_euler", steps=2, substep="bad")
        with pytest.raises(SolverConfigError, match=r"methods 'lie_trotter', 'strang', 'toy_euler', not 'rk4'"):
            solve(field, y0, TIMES, method="rk4", steps=2, substep="euler")
    finally:
        unregister_backend("toy")
    assert calls == [("toy_euler", "good"), ("toy_euler", "bad")]
    with pytest.raises(ValueError, match=r"substep \['n'\] are not among \['m'\]"):
        Backend(name="x", methods=("m",), fixed_grid=frozenset(), gradients=("backprop",), solve=_toy_solve,
                substep=frozenset({"n"}))  # fmt: skip


def test_nan_in_a_registered_backend_is_located_by_a_replay(toy, device):
    """dy/dt = y² from 1 with Euler h = 0.5 overflows float32 at the 10th step, as on the built-in backend."""
    y0 = torch.ones(1, device=device)
    with pytest.raises(NonFiniteStateError, match=r"at t=4\.5, step 10 \(evaluation 10\)"):
        solve(lambda t, y: y * y, y0, [0.0, 10.0], method="toy_euler", step_size=0.5)


def test_an_unregistered_backend_is_gone(device):
    register_backend(TOY)
    unregister_backend("toy")
    assert "toy" not in BACKENDS and "toy_euler" not in FIXED_GRID_METHODS
    field, y0 = _problem(device)
    with pytest.raises(SolverConfigError, match=r"unknown backend 'toy'; valid: 'auto', 'builtin'"):
        solve(field, y0, TIMES, method="euler", steps=2, backend="toy")
    with pytest.raises(SolverConfigError, match=r"unknown method 'toy_euler'"):
        solve(field, y0, TIMES, method="toy_euler", steps=2)


@pytest.mark.cpu_only("registry bookkeeping; no tensors")
def test_register_refuses_a_taken_name_and_inconsistent_backends(toy):
    with pytest.raises(ValueError, match="registered already"):
        register_backend(TOY)
    with pytest.raises(ValueError, match="other than '' and 'auto'"):
        Backend(name="auto", methods=("m",), fixed_grid=frozenset(), gradients=("backprop",), solve=_toy_solve)
    with pytest.raises(ValueError, match=r"fixed_grid \['n'\] are not among \['m'\]"):
        Backend(name="x", methods=("m",), fixed_grid=frozenset({"n"}), gradients=("backprop",), solve=_toy_solve)
    with pytest.raises(ValueError, match=r"gradients \['reverse'\] are not among"):
        Backend(name="x", methods=("m",), fixed_grid=frozenset(), gradients=("reverse",), solve=_toy_solve)


RALSTON = ButcherTableau("ralston", a=((), (2 / 3,)), b=(1 / 4, 3 / 4), c=(0.0, 2 / 3), order=2)
"""Ralston's second-order method (1962): a tableau that is not built in."""

REVERSED = SplittingScheme("lie_trotter_reversed", lambda n: [(i, 0.0, 1.0) for i in reversed(range(n))], order=1)
"""Lie-Trotter with the parts in the other order: a splitting scheme that is not built in."""


@pytest.fixture
def extended():
    """RALSTON and REVERSED registered for one test, the built-in backend restored after it."""
    tableaus, schemes = dict(TABLEAUS), dict(SPLITTING_SCHEMES)
    register_tableau(RALSTON)
    register_splitting_scheme(REVERSED)
    try:
        yield
    finally:
        TABLEAUS.clear(), TABLEAUS.update(tableaus)
        SPLITTING_SCHEMES.clear(), SPLITTING_SCHEMES.update(schemes)
        register_backend(builtin._backend(), replace=True)


def _fitted_order(device, **settings) -> float:
    field, y0 = _problem(device)
    steps = [8, 16, 32]
    with torch.no_grad():
        errors = [
            (solve(field, y0, [0.0, 1.0], steps=n, **settings).y1 - field.exact(y0, [1.0])[0]).abs().max()
            for n in steps
        ]
    return -math.log(errors[-1].item() / errors[0].item()) / math.log(steps[-1] / steps[0])


def test_a_registered_tableau_is_a_method_and_a_substep_of_its_order(extended, device):
    assert "ralston" in methods("builtin") and "ralston" in FIXED_GRID_METHODS
    assert abs(_fitted_order(device, method="ralston") - RALSTON.order) <= 0.2
    assert abs(_fitted_order(device, method="strang", substep="ralston") - min(2, RALSTON.order)) <= 0.2


def test_a_registered_splitting_scheme_steps_the_parts_in_its_order(extended, device):
    field, y0 = _problem(device)
    assert "lie_trotter_reversed" in methods("builtin")
    swapped = _Linear().to(device)
    swapped.parts = nn.ModuleList(reversed(list(field.parts)))
    with torch.no_grad():
        reversed_ys = solve(field, y0, TIMES, method="lie_trotter_reversed", steps=4, substep="rk4").ys
        reference = solve(swapped, y0, TIMES, method="lie_trotter", steps=4, substep="rk4").ys
    assert torch.equal(reversed_ys, reference)
    assert abs(_fitted_order(device, method="lie_trotter_reversed", substep="rk4") - REVERSED.order) <= 0.2


@pytest.mark.cpu_only("registry bookkeeping; no tensors")
def test_registering_refuses_a_taken_name_and_a_scheme_that_skips_a_part(extended):
    with pytest.raises(ValueError, match="has a method named 'rk4' already"):
        register_tableau(ButcherTableau("rk4", a=((),), b=(1.0,), c=(0.0,), order=1))
    with pytest.raises(ValueError, match="has a method named 'strang' already"):
        register_splitting_scheme(SplittingScheme("strang", REVERSED.sub_steps, order=1))
    with pytest.raises(ValueError, match="with 2 parts the sub-steps cover"):
        register_splitting_scheme(SplittingScheme("first_only", lambda n: [(0, 0.0, 1.0)], order=1))
