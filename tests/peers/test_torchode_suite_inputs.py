"""torchode's test suite, ported to ``neuralode_tf.solve``: what goes in (dtypes, state shapes, extra arguments).

Ported from the tests/ folder of torchode (github.com/martenlienen/torchode), rewritten as a user of
:func:`neuralode_tf.solve` would check the same properties (no code taken; ``test_torchode_suite.py`` and
``test_torchode_suite_steps.py`` hold the rest of the port):

* ``dtype_stability_test``: torchode keeps the dtypes of time and data apart and checks the field sees each in
  its own. Here the spec is that the field gets ``t`` in the state's dtype whatever the dtype of the ``t`` passed
  (``Solution.ts`` is float64), and the states keep their dtype: ``test_field_sees_time_in_the_state_dtype``, on
  every backend.
* ``extra_args_test``: torchode passes ``args=`` to the field; here extra arguments live on the field, as module
  attributes or in a closure (``test_extra_*``), and the same object reaches every call.
* ``torch_script_test``: compiling the solver has no equivalent on the torchode backend: ``compile=True`` is
  refused with a ``SolverConfigError``.
* State shapes torchode does not take (it takes ``(batch, features)``): a 0-dim state on every backend, and a 1-D
  state, which is one coupled vector by default and independent scalars with ``per_sample=True``.

Tolerances are stated at each check: ``<= 1e-12`` where the same arithmetic runs twice, otherwise a bound from
the method's order or tolerances with the measured error noted.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from neuralode_tf import solve
from neuralode_tf.numerics import InvalidStateError, SolveError, SolverConfigError
from tests.peers.torchode_problems import per_row, torchode_reference

F64 = torch.float64
ADAPTIVE = ["dopri5", "tsit5"]
SAME = 1e-12  # the same computation done twice: equal up to rounding


def tensor(values: object, device: torch.device, dtype: torch.dtype = F64) -> Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


# --- dtype_stability_test --------------------------------------------------------------------------------

DTYPE_RUNS = [
    ("torchode", "dopri5", {}),
    ("torchode", "tsit5", dict(per_sample=True)),
    ("torchode", "heun", dict(steps=5)),
    ("torchode", "euler", dict(steps=5, per_sample=True)),
    ("torchdiffeq", "dopri5", {}),
    ("builtin", "rk4", dict(steps=5)),
]


@pytest.mark.parametrize(("state_dtype", "time_dtype"), [(torch.float32, F64), (F64, torch.float32)])
@pytest.mark.parametrize(("backend", "method", "settings"), DTYPE_RUNS)
def test_field_sees_time_in_the_state_dtype(
    device: torch.device, backend: str, method: str, settings: dict, state_dtype: torch.dtype, time_dtype: torch.dtype
) -> None:
    seen: set[tuple[torch.dtype, torch.dtype, tuple[int, ...]]] = set()

    def field(t: Tensor, y: Tensor) -> Tensor:
        seen.add((t.dtype, y.dtype, tuple(t.shape)))
        return -y * (1 + per_row(t, y))

    y0 = tensor([[0.33, 1.2, -0.4]], device, state_dtype)
    times = tensor([0.0, 1.77, 3.0], device, time_dtype)
    tol = {} if "steps" in settings else dict(rtol=1e-5, atol=1e-6)
    sol = solve(field, y0, times, method=method, backend=backend, **tol, **settings)
    assert sol.stats.n_accepted > 3  # enough steps for dtypes to get mixed up
    assert sol.ys.dtype == state_dtype
    t_shape = (1,) if settings.get("per_sample") else ()
    assert seen == {(state_dtype, state_dtype, t_shape)}


# --- shapes torchode does not take: 0-dim and 1-D states -----------------------------------------------

# (backend, method, settings, bound for the scalar decay, bound for the coupled oscillator): the adaptive
# methods at rtol = atol = 1e-9 (measured <= 3e-9), heun at h = 0.01 (measured 2e-5 and 3e-4), euler at
# h = 1e-3 (measured 2e-4 and 6e-3), rk4 at h = 0.02 (measured 6e-9 and 9e-8).
SHAPE_RUNS = [
    ("torchode", "dopri5", dict(rtol=1e-9, atol=1e-9), 1e-8, 1e-7),
    ("torchode", "tsit5", dict(rtol=1e-9, atol=1e-9), 1e-8, 1e-7),
    ("torchode", "heun", dict(steps=200), 1e-4, 1e-3),
    ("torchode", "euler", dict(steps=2000), 1e-3, 2e-2),
    ("torchdiffeq", "dopri5", dict(rtol=1e-9, atol=1e-9), 1e-8, 1e-7),
    ("builtin", "rk4", dict(steps=100), 1e-7, 5e-7),
]


@pytest.mark.parametrize(("backend", "method", "settings", "bound", "_"), SHAPE_RUNS)
def test_zero_dim_state(
    device: torch.device, backend: str, method: str, settings: dict, bound: float, _: float
) -> None:
    shapes: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()

    def field(t: Tensor, y: Tensor) -> Tensor:
        shapes.add((tuple(t.shape), tuple(y.shape)))
        return -y * (1 + t)

    times = tensor([0.0, 0.5, 2.0], device)
    sol = solve(field, tensor(2.0, device), times, method=method, backend=backend, **settings)
    assert sol.ys.shape == (3,) and shapes == {((), ())}
    assert (sol.ys - 2.0 * torch.exp(-times - times**2 / 2)).abs().max().item() <= bound


def test_zero_dim_state_refuses_per_sample(device: torch.device) -> None:
    with pytest.raises(InvalidStateError, match="per_sample"):
        solve(lambda t, y: -y, tensor(2.0, device), [0.0, 1.0], method="dopri5", backend="torchode", per_sample=True)


@pytest.mark.parametrize(("backend", "method", "settings", "_", "bound"), SHAPE_RUNS)
def test_vector_state_is_one_coupled_system(
    device: torch.device, backend: str, method: str, settings: dict, _: float, bound: float
) -> None:
    """A state of shape (n,) is one vector by default: ``dy/dt = A y`` couples its entries."""
    a = tensor([[0.0, 1.0], [-4.0, -0.1]], device)
    y0 = tensor([1.0, 0.0], device)
    times = tensor([0.0, 0.5, 2.0], device)
    sol = solve(lambda t, y: a @ y, y0, times, method=method, backend=backend, **settings)
    exact = torch.stack([torch.linalg.matrix_exp(a * s) @ y0 for s in times])
    assert (sol.ys - exact).abs().max().item() <= bound
    if backend == "torchode" and method in ADAPTIVE:
        theirs = torchode_reference(lambda t, y: a @ y, y0, times, method, joint=True, **settings)
        assert (sol.ys - theirs.ys[0]).abs().max().item() <= SAME


def test_vector_state_per_sample_is_independent_scalars(device: torch.device) -> None:
    k = tensor([0.5, 2.0, 8.0], device)
    shapes: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()

    def field(t: Tensor, y: Tensor) -> Tensor:
        shapes.add((tuple(t.shape), tuple(y.shape)))
        return -k * y

    sol = solve(
        field,
        torch.ones(3, dtype=F64, device=device),
        [0.0, 1.0],
        method="dopri5",
        backend="torchode",
        per_sample=True,
        rtol=1e-9,
        atol=1e-9,
    )
    assert shapes == {((3,), (3,))}
    assert (sol.y1 - torch.exp(-k)).abs().max().item() <= 1e-8


# --- extra_args_test ------------------------------------------------------------------------------------


class WithArguments(nn.Module):
    """Extra arguments as attributes: a tuple of things of any kind, the tensor in it scaling the decay."""

    def __init__(self, arguments: tuple):
        super().__init__()
        self.arguments = arguments
        self.seen: list[tuple] = []

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.seen.append(self.arguments)
        return -self.arguments[3] * y


@pytest.mark.parametrize("method", ["heun", *ADAPTIVE])
def test_extra_arguments_as_module_attributes(device: torch.device, method: str) -> None:
    arguments = (0, True, "hello", tensor([[0.5], [2.0]], device))
    field = WithArguments(arguments)
    settings = dict(steps=100) if method == "heun" else dict(rtol=1e-9, atol=1e-9)
    sol = solve(
        field, torch.ones(2, 1, dtype=F64, device=device), [0.0, 1.0], method=method, backend="torchode", **settings
    )
    assert field.seen and all(seen is arguments for seen in field.seen)
    assert (sol.y1 - torch.exp(-arguments[3])).abs().max().item() <= 1e-4  # heun at h = 0.01: measured 1e-5


@pytest.mark.parametrize("per_sample", [False, True])
def test_extra_arguments_in_a_closure(device: torch.device, per_sample: bool) -> None:
    rates = tensor([[0.5], [2.0]], device)
    sol = solve(
        lambda t, y: -rates * y,
        torch.ones(2, 1, dtype=F64, device=device),
        [0.0, 1.0],
        method="tsit5",
        backend="torchode",
        per_sample=per_sample,
        rtol=1e-9,
        atol=1e-9,
    )
    assert (sol.y1 - torch.exp(-rates)).abs().max().item() <= 1e-8


def test_per_sample_data_with_adjoint_works_or_is_refused_clearly(device: torch.device) -> None:
    """Spec item 7: torchode's backsolve runs the field per sample under vmap; a field holding per-sample data
    (here a rate per row) then either gives backprop's gradient or raises a SolveError, not a bare error."""
    rates = tensor([[1.0], [3.0]], device)
    grads = []
    for adjoint in ("backprop", "adjoint"):
        y0 = torch.ones(2, 1, dtype=F64, device=device, requires_grad=True)
        try:
            sol = solve(
                lambda t, y: -rates * y,
                y0,
                [0.0, 1.0],
                method="dopri5",
                backend="torchode",
                per_sample=True,
                gradient=adjoint,
                rtol=1e-9,
                atol=1e-9,
            )
            sol.y1.sum().backward()
        except SolveError as err:
            assert adjoint == "adjoint" and "vmap" in str(err)
            return
        grads.append(y0.grad)
    assert (grads[0] - grads[1]).abs().max().item() <= 1e-6


# --- torch_script_test ----------------------------------------------------------------------------------


def test_compiling_the_torchode_solve_is_refused(device: torch.device) -> None:
    with pytest.raises(SolverConfigError, match="compile"):
        solve(
            lambda t, y: -y,
            torch.ones(2, 1, dtype=F64, device=device),
            [0.0, 1.0],
            method="dopri5",
            backend="torchode",
            compile=True,
        )
