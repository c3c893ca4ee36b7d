"""Problems with exact solutions for the port of torchdiffeq's test suite (``test_torchdiffeq_*.py``).

torchdiffeq's ``tests/problems.py`` defines four fields with analytic solutions ("constant", "linear", "sine",
"exp") and solves them over ``t = linspace(1, 8, 10)``. These are our own versions, written for
:func:`neuralode_tf.solve`: each is an ``nn.Module`` ``f(t, y)`` with an ``exact(t)`` giving the solution at a 1-D
tensor of times, stacked along dim 0 (what ``Solution.ys`` holds).

* :class:`Ramp` -- the solution is the straight line ``y = slope t + level``; the field adds ``(y - line)^5``,
  which vanishes on the line, so every consistent method reproduces the line up to rounding (any Runge-Kutta
  stage of a point on the line is on the line).
* :class:`Rotation` -- ``dy/dt = A y`` with ``A`` antisymmetric (the state turns on a sphere): ``y = exp(tA) y0``.
* :class:`Sine` -- ``dy/dt = 2y/t + t^4 sin 2t - t^2 + 4t^3``, linear in ``y`` with homogeneous solutions
  ``c t^2``: ``y = t^2 (c - t + 2t^2 + (1/4 - t^2/2) cos 2t + (t/2) sin 2t)``. Singular at ``t = 0``.
* :class:`Decay` -- ``dy/dt = -r e^{-rt}``, a field that ignores ``y``: ``y = e^{-rt}``.
* :class:`Switch` -- torchdiffeq's discontinuity problem: ``dy/dt = -y/2`` before ``t = 1/2`` and ``y^2``
  after; :func:`switch_exact` solves it piece by piece. ``SwitchWithJumps`` declares the switch in ``jump_times``.
* :class:`SplitRotation` -- the rotation as a sum of two non-commuting parts, for the splitting methods.
* :class:`TinyNet` -- a small network (torchdiffeq's ``_NeuralF``), for the tests that count steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

F64 = torch.float64


class Ramp(nn.Module):
    """torchdiffeq's "constant" problem: a line that attracts (or repels) as the fifth power of the distance."""

    def __init__(self, slope: float = 0.2, level: float = 3.0) -> None:
        super().__init__()
        self.slope = nn.Parameter(torch.tensor(slope, dtype=F64))
        self.level = nn.Parameter(torch.tensor(level, dtype=F64))
        self.calls = 0

    def line(self, t: Tensor) -> Tensor:
        return self.slope * t + self.level

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        return self.slope + (y - self.line(t)) ** 5

    def exact(self, t: Tensor) -> Tensor:
        return self.line(t)


class Rotation(nn.Module):
    """``dy/dt = A y`` with a random antisymmetric ``A`` (entries of size ~0.1, as in torchdiffeq's "linear")."""

    def __init__(self, dim: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = 0.1 * torch.randn(dim, dim, generator=g, dtype=F64)
        self.A = nn.Parameter(w - w.T)
        self.start = torch.ones(dim, dtype=F64)
        self.calls = 0

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        return self.A @ y

    def exact(self, t: Tensor) -> Tensor:
        a = self.A.detach()
        start = self.start.to(a)
        return torch.stack([torch.linalg.matrix_exp(a * s) @ start for s in t.to(a)])


class Sine(nn.Module):
    """torchdiffeq's "sine" problem; ``c`` picks the solution (``pi - 1/4`` is theirs)."""

    def __init__(self, c: float = math.pi - 0.25) -> None:
        super().__init__()
        self.c = c
        self.calls = 0

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        return 2 * y / t + t**4 * torch.sin(2 * t) - t**2 + 4 * t**3

    def exact(self, t: Tensor) -> Tensor:
        u = 2 * t
        return t**2 * (self.c - t + 2 * t**2 + (0.25 - 0.5 * t**2) * torch.cos(u) + 0.5 * t * torch.sin(u))


class Decay(nn.Module):
    """torchdiffeq's "exp" problem: the slope is the exact solution's, whatever ``y`` is."""

    def __init__(self, rate: float = 0.1) -> None:
        super().__init__()
        self.rate = rate
        self.calls = 0

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        return -self.rate * torch.exp(-self.rate * t).expand_as(y)

    def exact(self, t: Tensor) -> Tensor:
        return torch.exp(-self.rate * t)


class _Turn(nn.Module):
    """One part of :class:`SplitRotation`: ``dy/dt = B y``."""

    def __init__(self, b: Tensor) -> None:
        super().__init__()
        self.B = nn.Parameter(b)

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        return self.B @ y


class SplitRotation(nn.Module):
    """:class:`Rotation`'s ODE with ``A = A_1 + A_2`` given as two non-commuting parts, for the splitting methods
    (``lie_trotter``, ``strang``) of the built-in backend, which advance one part after the other."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.first = _Turn(Rotation(dim, seed=1).A.detach())
        self.second = _Turn(Rotation(dim, seed=2).A.detach())
        self.start = torch.ones(dim, dtype=F64)

    @property
    def parts(self) -> tuple[nn.Module, nn.Module]:
        return (self.first, self.second)

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        return self.first(t, y) + self.second(t, y)

    def exact(self, t: Tensor) -> Tensor:
        a = (self.first.B + self.second.B).detach()
        return torch.stack([torch.linalg.matrix_exp(a * s) @ self.start.to(a) for s in t.to(a)])


PROBLEMS: dict[str, Callable[[], nn.Module]] = {"constant": Ramp, "linear": Rotation, "sine": Sine, "exp": Decay}
"""torchdiffeq's four problems under their names; ``problem("split", ...)`` gives :class:`SplitRotation`."""
FIELDS: dict[str, Callable[[], nn.Module]] = {**PROBLEMS, "split": SplitRotation}


def problem(
    name: str, device: torch.device, dtype: torch.dtype = F64, n_times: int = 10
) -> tuple[nn.Module, Tensor, Tensor, Tensor]:
    """``(field, y0, t, exact)`` of problem ``name`` over ``linspace(1, 8, n_times)``: ``exact`` is the solution at
    every time (``exact[0]`` is ``y0``), in ``dtype``; ``t`` is float64 unless ``dtype`` is float32 (then float32)."""
    field = FIELDS[name]().to(device=device, dtype=dtype)
    if isinstance(field, (Rotation, SplitRotation)):
        field.start = field.start.to(device=device, dtype=dtype)
    t = torch.linspace(1.0, 8.0, n_times, dtype=dtype, device=device)
    with torch.no_grad():
        exact = field.exact(t).to(dtype)
    field.calls = 0
    return field, exact[0].clone(), t, exact


def rel_error(got: Tensor, want: Tensor) -> float:
    """The worst relative error, as torchdiffeq's tests measure it."""
    return ((got - want) / want).abs().max().item()


# --- torchdiffeq's discontinuity problem -------------------------------------------------------------------

SWITCH = 0.5


class Switch(nn.Module):
    """``dy/dt = -y/2`` for ``t < 1/2``, ``y^2`` from then on; records every time it is called at."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.seen: list[Tensor] = []

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        self.seen.append(t.detach())
        return -0.5 * y if t < SWITCH else y**2


class SwitchWithJumps(Switch):
    """The same field, declaring its discontinuity."""

    jump_times = (SWITCH,)


def switch_exact(y0: Tensor, t: float) -> Tensor:
    """The exact solution of :class:`Switch` from ``y(0) = y0`` (before ``y`` blows up at ``1/2 + e^{1/4}/y0``)."""
    if t <= SWITCH:
        return y0 * math.exp(-0.5 * t)
    at_switch = y0 * math.exp(-0.5 * SWITCH)
    return 1 / (1 / at_switch - (t - SWITCH))


# --- a small network, for step counts --------------------------------------------------------------------------


class TinyNet(nn.Module):
    """``tanh(W2 tanh(W1 y + b1) + b2)``, optionally times ``sin(freq t)``: a field without a closed-form solution whose
    step counts torchdiffeq's norm and callback tests compare. The weights come from ``seed``, the same every time."""

    def __init__(self, width: int = 10, freq: float = 0.0, dtype: torch.dtype = F64, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.inner = nn.Linear(2, width, dtype=dtype)
        self.outer = nn.Linear(width, 2, dtype=dtype)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=F64) / math.sqrt(p.shape[-1]))
        self.freq = freq
        self.calls = 0

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.calls += 1
        out = torch.tanh(self.outer(torch.tanh(self.inner(y))))
        return out * torch.sin(self.freq * t) if self.freq else out
