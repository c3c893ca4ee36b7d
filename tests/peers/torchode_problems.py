"""Problems with known solutions for the port of torchode's test suite (``test_torchode_suite*.py``).

torchode's ``tests/problems.py`` builds its problems as torchode objects (``ODETerm``, ``InitialValueProblem``);
here a problem is a field ``f(t, y)`` as :func:`neuralode_tf.solve` takes it, plus its exact solution. A field
gets ``t`` as a 0-dim tensor (one step size for the whole state, ``per_sample=False``) or as a ``(batch,)``
tensor of per-sample times (``per_sample=True``, and when torchode is called directly): :func:`per_row` makes
either broadcast against the state row by row.

:func:`torchode_reference` runs the same problem through torchode's own API, for the tests that compare
numbers with torchode itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torchode as to
from torch import Tensor, nn

Field = Callable[[Tensor, Tensor], Tensor]

TORCHODE_STEPPERS = {"euler": to.Euler, "heun": to.Heun, "dopri5": to.Dopri5, "tsit5": to.Tsit5}


def per_row(t: Tensor, y: Tensor) -> Tensor:
    """``t`` shaped to broadcast against ``y``: a 0-dim ``t`` as it is, a ``(batch,)`` ``t`` as a column."""
    return t if t.dim() == 0 else t.reshape(t.shape[0], *([1] * (y.dim() - 1)))


# --- torchode's "sine" problem --------------------------------------------------------------------------
# dy/dt = 2 y / t + t^4 sin(2t) - t^2 + 4 t^3 is linear in y with homogeneous solutions c t^2, so every
# solution is sine_solution(t) + c t^2: samples with different c make a batch with one exact answer each.


def sine_solution(t: Tensor, c: Tensor | float = 0.0) -> Tensor:
    """The exact solution through ``c``: elementwise in ``t`` (any shape), ``c`` broadcast against it."""
    two_t = 2 * t
    return (
        -0.5 * t**4 * torch.cos(two_t)
        + 0.5 * t**3 * torch.sin(two_t)
        + 0.25 * t**2 * torch.cos(two_t)
        - t**3
        + 2 * t**4
        + (math.pi - 0.25) * t**2
        + c * t**2
    )


def sine_field(t: Tensor, y: Tensor) -> Tensor:
    """The right-hand side for states ``(batch, 1)`` (or any shape with a shared ``t``). Singular at t = 0."""
    s = per_row(t, y)
    return 2 * y / s + s**4 * torch.sin(2 * s) - s**2 + 4 * s**3


# --- relaxation towards cos(t), one rate per sample -----------------------------------------------------


class Relaxation(nn.Module):
    """``dy/dt = -k_b (y - cos t)`` for sample ``b`` (dim 0 of a ``(batch, 1)`` state), ``k_b`` in a buffer.

    A larger rate is a stiffer sample that needs more steps of an explicit method, so a batch of rates is a
    batch of samples of different difficulty. Each sample only reads its own row.
    """

    rates: Tensor

    def __init__(self, rates: Tensor):
        super().__init__()
        self.register_buffer("rates", rates.reshape(-1, 1))

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        return -self.rates * (y - torch.cos(per_row(t, y)))

    def exact(self, y0: Tensor, t0: Tensor, t: Tensor) -> Tensor:
        """The exact state at times ``t`` (shape ``(batch, n)``) from ``y0`` (``(batch, 1)``) at ``t0``
        (``(batch,)``), as ``(n, batch, 1)`` like ``Solution.ys``."""
        k = self.rates  # (batch, 1)
        steady_cos, steady_sin = k**2 / (k**2 + 1), k / (k**2 + 1)
        t0 = t0.reshape(-1, 1)
        transient = y0 - steady_cos * torch.cos(t0) - steady_sin * torch.sin(t0)
        y = transient * torch.exp(-k * (t - t0)) + steady_cos * torch.cos(t) + steady_sin * torch.sin(t)
        return y.T.unsqueeze(-1)


# --- linear dynamics, row-vector convention as in torchode's adjoint tests --------------------------------

MATRIX = [[-0.9, 0.6, -0.3], [-0.5, 0.2, 0.7], [0.4, -0.8, -1.1]]
ROWS = [[0.4, -1.0, 0.7], [1.3, 0.2, -0.6]]


class LinearDynamics(nn.Module):
    """``dy/dt = y A`` for a ``(batch, n)`` state of row vectors, ``A`` a parameter: ``y(t) = y0 exp(A t)``."""

    def __init__(self, matrix: Tensor):
        super().__init__()
        self.A = nn.Parameter(matrix.clone())

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        return y @ self.A


def linear_exact(y0: Tensor, matrix: Tensor, elapsed: Tensor) -> Tensor:
    """``y0 exp(A s)`` for each elapsed time ``s`` (a 1-D tensor): ``(len(elapsed), *y0.shape)``,
    differentiable in ``y0`` and ``matrix`` through :func:`torch.linalg.matrix_exp`."""
    return torch.stack([y0 @ torch.linalg.matrix_exp(matrix * s) for s in elapsed])


# --- harmonic oscillators with a frequency per sample -----------------------------------------------------


def oscillator(frequencies: Tensor) -> Field:
    """``x'' = -w_b^2 x`` as a first-order field on ``(batch, 2)`` states ``[x, x']``."""

    def field(t: Tensor, y: Tensor) -> Tensor:
        return torch.stack([y[:, 1], -(frequencies**2) * y[:, 0]], dim=-1)

    return field


def oscillator_exact(frequencies: Tensor, t: Tensor) -> Tensor:
    """From ``[1, 0]`` at time 0: ``(len(t), batch, 2)``."""
    wt = t[:, None] * frequencies[None, :]
    return torch.stack([torch.cos(wt), -frequencies * torch.sin(wt)], dim=-1)


# --- a quartic: an ODE whose exact solution is a polynomial of degree 4 ----------------------------------

QUARTIC = [0.7, -1.3, 0.4, 2.1, -0.6]


def quartic(t: Tensor) -> Tensor:
    return sum(c * t**k for k, c in enumerate(QUARTIC))  # type: ignore[return-value]


def quartic_field(t: Tensor, y: Tensor) -> Tensor:
    """``dy/dt = p'(t)`` (independent of ``y``): the solution from ``p(t0)`` is ``p``."""
    s = per_row(t, y)
    slope = sum(k * c * s ** (k - 1) for k, c in enumerate(QUARTIC) if k > 0)
    return slope * torch.ones_like(y)


# --- torchode itself ------------------------------------------------------------------------------------


def torchode_reference(
    field: Field,
    y0: Tensor,
    t_eval: Tensor,
    method: str,
    *,
    joint: bool = False,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    dt0: float | None = None,
    max_steps: int | None = None,
) -> to.Solution:
    """Solve with torchode's own API: ``AutoDiffAdjoint`` with an ``IntegralController`` (adaptive methods) or a
    ``FixedStepController`` (``euler``, ``heun``; ``dt0`` is then the step).

    ``y0`` is ``(batch, features)`` and ``t_eval`` ``(batch, n)`` (each sample its own steps), or with ``joint``
    any shape and 1-D: the whole state is then torchode's one sample, and ``field`` gets a 0-dim ``t`` and the
    state in its own shape, as ``solve(..., per_sample=False)`` gives them. ``ys`` of the returned solution is
    torchode's ``(batch, n, features)``.
    """
    if joint:
        shape = y0.shape

        def flat(t: Tensor, y: Tensor) -> Tensor:
            return field(t.reshape(()), y.reshape(shape)).reshape(1, -1)

        term, y0, t_eval = to.ODETerm(flat), y0.reshape(1, -1), t_eval.reshape(1, -1)
    else:
        term = to.ODETerm(field)
    stepper = TORCHODE_STEPPERS[method](term=term)
    if method in ("euler", "heun"):
        controller: to.StepSizeController = to.FixedStepController()
    else:
        controller = to.IntegralController(atol=atol, rtol=rtol, term=term)
    first = None if dt0 is None else torch.full((y0.shape[0],), dt0, dtype=y0.dtype, device=y0.device)
    problem = to.InitialValueProblem(y0, t_start=t_eval[:, 0], t_end=t_eval[:, -1], t_eval=t_eval)
    return to.AutoDiffAdjoint(stepper, controller, max_steps=max_steps).solve(problem, dt0=first)
