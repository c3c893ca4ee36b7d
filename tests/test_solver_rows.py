"""The solver core's contracts that a port of torchdiffeq's and torchode's own suites found broken, one test each:
a coupled vector is not a batch, fixed grids land on the field's jumps, 0-dim states and ``t``'s dtype on every
backend, a custom norm's shape, torchode's adjoint on a field that mixes samples, torchdiffeq's callbacks, one
name per method, and a step limit that says how to raise it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from neuralode_tf import solve
from neuralode_tf.fields import SplitField, WeightSharedField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import FieldOutputError, MaxStepsExceededError, SolverConfigError

from ._reference import max_abs


class Linear(nn.Module):
    """``dy/dt = A y`` for one coupled vector ``y`` of shape ``(n,)`` (torchdiffeq's ``linear`` problem)."""

    def __init__(self, n: int = 6):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.A = nn.Parameter(0.5 * torch.randn(n, n, dtype=torch.float64, generator=generator))

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.A @ y


def test_a_coupled_vector_is_one_system_on_every_backend_by_default(device):
    """Row 1: the default steps a ``(n,)`` state as one system, on torchode too (it once stepped each component
    on its own, a relative error of 77 to 463 with no warning), forward and adjoint."""
    field = Linear().to(device)
    y0 = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64, device=device)
    exact = torch.linalg.matrix_exp(field.A.detach()) @ y0
    for backend, method in (("torchode", "dopri5"), ("torchode", "tsit5"), ("torchdiffeq", "dopri5")):
        for gradient in ("backprop", "adjoint"):
            settings = dict(method=method, backend=backend, gradient=gradient, rtol=1e-8, atol=1e-10)
            y1 = solve(field, y0, [0.0, 1.0], **settings).y1
            assert max_abs(y1, exact) / float(exact.abs().max()) <= 1e-6, (backend, method, gradient)


class Layers(nn.Module):
    """Three layers with their own weights, layer ``k`` on depth-times ``[k, k + 1)``: ``jump_times = [1, 2]``."""

    jump_times = [1.0, 2.0]

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(1)
        self.W = nn.Parameter(0.8 * torch.randn(3, 5, 5, dtype=torch.float64, generator=generator))

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        layer = min(int(math.floor(float(t))), 2)
        return torch.tanh(y @ self.W[layer])


def _fitted_order(errors: list[float], steps: list[int]) -> float:
    return -float(np.polyfit(np.log(steps), np.log(errors), 1)[0])


@pytest.mark.parametrize(
    "backend, method, order", [("builtin", "rk4", 4), ("torchdiffeq", "rk4_38", 4), ("torchode", "heun", 2)]
)
def test_a_fixed_grid_keeps_its_order_on_a_stack_whose_steps_miss_the_layer_boundaries(backend, method, order, device):
    """Row 2: 4, 8, 16 steps over 3 layers put no grid point on the boundaries by themselves; the grid adds them,
    so the method keeps its order (it was first order: 0.048, 0.023, 0.012), and ``stats`` counts the steps taken
    (4 steps of 0.75 over 3 layers: two steps per layer)."""
    field = Layers().to(device)
    y0 = torch.randn(2, 5, dtype=torch.float64, device=device, generator=None)
    reference = solve(field, y0, [0.0, 3.0], method="rk4", steps=3 * 256).y1
    taken, errors = [], []
    for n in [8, 16, 32, 64]:
        solution = solve(field, y0, [0.0, 3.0], method=method, steps=n, backend=backend)
        taken.append(solution.stats.n_accepted)
        errors.append(max_abs(solution.y1, reference))
    assert taken == [9, 18, 33, 66]  # ceil(1 / step) steps in each layer
    assert _fitted_order(errors, taken) >= order - 0.3, errors
    four = solve(field, y0, [0.0, 3.0], method=method, steps=4, backend=backend)
    six = solve(field, y0, [0.0, 3.0], method=method, steps=6, backend=backend)
    assert four.stats.n_accepted == six.stats.n_accepted == 6 and max_abs(four.y1, six.y1) <= 1e-12


def test_the_grid_of_a_stack_does_not_straddle_its_layers(device):
    """Row 2 on the library's own stacks: a weight-shared stack of 3 layers with 4 rk4 steps takes the steps of 6."""
    torch.manual_seed(0)
    layers = [SplitField(AttentionBranch(8, 2), MLPBranch(8)).double().to(device) for _ in range(3)]
    field = WeightSharedField(layers, depth=3)
    x = torch.randn(2, 4, 8, dtype=torch.float64, device=device)
    four = solve(field, x, [0.0, 3.0], method="rk4", steps=4)
    six = solve(field, x, [0.0, 3.0], method="rk4", steps=6)
    assert four.stats.n_accepted == 6 and max_abs(four.y1, six.y1) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(method="tsit5", backend="torchode"),
        dict(method="dopri5", backend="torchode"),
        dict(method="heun", steps=8, backend="torchode"),
        dict(method="dopri5", backend="torchdiffeq"),
        dict(method="rk4", steps=8),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_0_dim_state_gets_a_0_dim_time_of_its_dtype(kwargs, dtype, device):
    """Rows 3 and 4: ``dy/dt = t y`` from a 0-dim state, on every backend: the field sees a 0-dim ``t`` in the
    state's dtype (torchode once gave ``(1,)``; the built-in backend float64, promoting a float32 state)."""
    seen: list[tuple[tuple[int, ...], torch.dtype]] = []

    def field(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append((tuple(t.shape), t.dtype))
        return t * y

    y1 = solve(field, torch.tensor(1.0, dtype=dtype, device=device), [0.0, 1.0], **kwargs).y1
    assert y1.shape == () and y1.dtype == dtype
    assert abs(float(y1) - math.exp(0.5)) <= (2e-3 if "steps" in kwargs and kwargs["method"] == "heun" else 1e-5)
    assert set(seen) == {((), dtype)}


def test_a_custom_norm_sees_a_0_dim_state_as_0_dim(device):
    """Row 6: torchdiffeq's ``norm`` option gets the state's shape, ``()``, not the ``(1,)`` the adapter uses."""
    shapes = []

    def norm(y: torch.Tensor) -> torch.Tensor:
        shapes.append(tuple(y.shape))
        return y.abs()

    y0 = torch.tensor(1.0, dtype=torch.float64, device=device)
    solve(lambda t, y: -y, y0, [0.0, 1.0], method="dopri5", backend="torchdiffeq", options={"norm": norm})
    assert shapes and set(shapes) == {()}


class MixesSamples(nn.Module):
    """A field that multiplies over dim 0 with ``torch.mm``: its rows are not independent samples."""

    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(0.3 * torch.eye(4, dtype=torch.float64) + 0.1)

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mm(self.W, y)


def test_torchodes_adjoint_on_a_field_that_mixes_samples(device):
    """Row 7: by default (one system) torchode's adjoint runs ``torch.mm`` fields and matches backprop; asked to
    step samples apart, the per-sample backsolve fails with a message naming why, not a raw torch error."""
    field = MixesSamples().to(device)
    y0 = torch.randn(4, 3, dtype=torch.float64, device=device)
    grads = {}
    for adjoint in ("backprop", "adjoint"):
        field.zero_grad()
        solve(
            field, y0, [0.0, 1.0], method="dopri5", backend="torchode", gradient=adjoint, rtol=1e-9, atol=1e-10
        ).y1.sum().backward()
        grads[adjoint] = field.W.grad.clone()
    assert max_abs(grads["adjoint"], grads["backprop"]) <= 1e-6
    solution = solve(field, y0, [0.0, 1.0], method="dopri5", backend="torchode", gradient="adjoint", per_sample=True)
    with pytest.raises(
        FieldOutputError, match=r"under torch.func.vmap, one torchode sample at a time.*per_sample=False"
    ):
        solution.y1.sum().backward()


class WithCallbacks(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = {"step": 0, "accept": 0, "reject": 0}

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -50.0 * (y - torch.cos(t))

    def callback_step(self, t0: torch.Tensor, y0: torch.Tensor, dt: torch.Tensor) -> None:
        self.calls["step"] += 1

    def callback_accept_step(self, t0: torch.Tensor, y0: torch.Tensor, dt: torch.Tensor) -> None:
        self.calls["accept"] += 1

    def callback_reject_step(self, t0: torch.Tensor, y0: torch.Tensor, dt: torch.Tensor) -> None:
        self.calls["reject"] += 1


def test_torchdiffeqs_step_callbacks_are_called_or_refused(device):
    """Row 9: the field's callbacks are called on torchdiffeq (every attempt, accept and reject counted as
    ``stats`` counts them), refused by name where a backend would never call them, and a fixed-grid method
    warns that it never accepts or rejects."""
    field = WithCallbacks()
    y0 = torch.zeros(3, dtype=torch.float64, device=device)
    stats = solve(field, y0, [0.0, 1.0], method="dopri5", backend="torchdiffeq", dt0=0.5).stats
    assert field.calls == {
        "step": stats.n_accepted + stats.n_rejected,
        "accept": stats.n_accepted,
        "reject": stats.n_rejected,
    }
    assert stats.n_rejected > 0
    for kwargs in (dict(method="rk4", steps=4), dict(method="dopri5", backend="torchode")):
        with pytest.raises(SolverConfigError, match=r"callback_step.*never calls: use backend='torchdiffeq'"):
            solve(field, y0, [0.0, 1.0], **kwargs)
    field = WithCallbacks()
    with pytest.warns(UserWarning, match=r"accepts every step and rejects none"):
        solve(field, y0, [0.0, 1.0], method="rk4_38", steps=4, backend="torchdiffeq")
    assert field.calls == {"step": 4, "accept": 0, "reject": 0}


@pytest.mark.parametrize("backend", ["torchdiffeq", "torchode"])
def test_the_step_limit_says_how_to_raise_it(backend, device):
    """Row 11: a solve that needs more steps than ``max_steps`` says how to raise it, and then succeeds
    (adaptive_heun needs about 7k steps here, 22k at rtol = 1e-7: the default 10k bound stays)."""
    y0 = torch.ones(2, dtype=torch.float64, device=device)
    method = "adaptive_heun" if backend == "torchdiffeq" else "dopri5"
    kwargs = dict(method=method, backend=backend, rtol=1e-6, atol=1e-6)

    def field(t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cos(30 * t) * y

    with pytest.raises(MaxStepsExceededError, match=r"pass a larger max_steps= to solve \(e\.g\. max_steps=80\)"):
        solve(field, y0, [0.0, 3.0], max_steps=20, **kwargs)
    y1 = solve(field, y0, [0.0, 3.0], max_steps=20_000, **kwargs).y1
    assert max_abs(y1, y0 * math.exp(math.sin(90.0) / 30)) <= 5e-5  # global error at rtol = atol = 1e-6
