"""Finite-time Lyapunov exponents of depth dynamics, by Benettin's method.

For ``dx/dt = f(t, x)`` the flow's derivative ``Φ(t) = ∂x(t)/∂x(t0)`` solves the variational equation
``dΦ/dt = J_f(t, x(t)) Φ``, ``Φ(t0) = I``. Its singular values grow or shrink like ``exp(λ_i (t - t0))``: the
Lyapunov exponents ``λ_1 >= λ_2 >= ...`` are the mean exponential rates at which nearby trajectories (token
states that differ by a small perturbation) separate along a trajectory, the sum of the first ``i`` the rate of
growth of ``i``-dimensional volumes. Benettin et al. (1980, *Meccanica* 15: 9-20, 21-30) compute the ``k`` leading
ones without ``Φ``: ``k`` tangent vectors ``V = [v_1, ..., v_k]`` (orthonormal at ``t0``) are propagated by
``dV/dt = J_f(t, x(t)) V`` jointly with ``x``, and re-orthonormalised at times ``t0 < τ_1 < ... < τ_S = t1`` by a QR
decomposition ``V(τ_s) = Q_s R_s``, ``R_s`` upper triangular with positive diagonal, after which ``V = Q_s``. As
``Φ(t1) V(t0) = Q_S R_S ... R_1`` and a product of upper-triangular matrices has the product of their diagonals,

.. math:: λ_i = \\frac{1}{t_1 - t_0} \\sum_{s=1}^{S} \\log (R_s)_{ii},

exactly the ``R`` of the QR decomposition of ``Φ(t1) V(t0)``: the re-orthonormalisation only keeps the tangent
vectors from all collapsing onto the fastest direction in floating point. Over a finite depth these are the
finite-time exponents of the chosen initial frame ``V(t0)``; for an ergodic system they converge to the Lyapunov
exponents as ``t1 - t0 -> ∞``, like ``O(1 / (t1 - t0))`` in bias plus fluctuations of ``O((t1 - t0)^{-1/2})``.
Tong et al. (ICLR 2025, "Neural ODE Transformers") read such spectra of transformer depth dynamics.

Here ``J_f V`` is evaluated by forward-mode automatic differentiation (:func:`torch.func.jvp`), vectorised over
the ``k`` tangent vectors with :func:`torch.func.vmap`, so ``J_f`` is never formed, and the joint state ``(x, V)``
is integrated by :func:`neuralode_tf.solve` with any fixed-grid method (Runge-Kutta or, for a field with
``parts``, splitting: the variational equation of a sum of parts is the sum of theirs). A fixed-grid method applied
to ``(x, V)`` is the exact derivative of the same method applied to ``x`` alone (the discrete flow's tangent map),
so the exponents are those of the computed trajectory.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .._dynamo import own_code
from ..continuous import ContinuousDepth
from ..numerics import COMPILE_OPTIONS, FIXED_GRID_METHODS, SolverConfigError, check_times, solve
from ..protocols import Augmented, jump_times_of, parts_of
from .jacobian import _batched_jvp

__all__ = ["lyapunov_spectrum", "LyapunovSpectrum"]

_FROM_CONTINUOUS_DEPTH = ("method", "steps", "step_size", "substep", "backend")
"""The solve options of a :class:`~neuralode_tf.ContinuousDepth` that the tangent solve reuses (the others are about
gradients, compilation or adaptive steps)."""


@dataclass(frozen=True)
class LyapunovSpectrum:
    """The result of :func:`lyapunov_spectrum`.

    Attributes:
        exponents: ``(k,)`` the finite-time exponents ``λ_1, ..., λ_k`` over ``[t0, t1]``, in Benettin's order
            (``λ_1 + ... + λ_i`` is the growth rate of the volume spanned by the first ``i`` tangent vectors). Where
            the spectrum has gaps they come out descending as ``t1 - t0`` grows; over a short depth, or where the
            exponents lie close together (a small pre-norm transformer field on ``[0, 4]`` gave 0.039, 0.106, 0.099
            from the default frame), their order is partly the frame's and need not be descending.
        times: ``(S + 1,)`` float64, ``t0`` and the depths ``τ_s`` at which the frame was re-orthonormalised.
        running: ``(S, k)`` the running estimates ``(1 / (τ_s - t0)) Σ_{r <= s} log (R_r)_ii``, the
            exponents over ``[t0, τ_s]`` (``running[-1]`` equals ``exponents``), for a plot over depth.
        x1: The state at ``t1``.
        frame: ``(k, *x.shape)`` the orthonormal tangent frame at ``t1`` (approximate Lyapunov vectors).
        nfe: Evaluations of the joint field ``(x, V) -> (f(x), J_f V)``; each is one forward-mode pass.
    """

    exponents: Tensor
    times: Tensor
    running: Tensor
    x1: Tensor
    frame: Tensor
    nfe: int


class _TangentDynamics(nn.Module):
    """The field of the variational equation, ``(x, V) -> (f(t, x), J_f(t, x) V)``, for ``V`` ``(k, *x.shape)``;
    with ``compile``, each evaluation is one call of a :func:`torch.compile` d function."""

    def __init__(self, field: nn.Module, compile: bool = False):
        super().__init__()
        self.field = field
        self.compiled = compile
        self._vectorised = True

    def forward(self, t: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        x, frame = state
        if self.compiled:
            return _compiled_jvp(self.field, frame)(self.field, t, x, frame)
        if self._vectorised:
            try:
                return _batched_jvp(self.field, t, x, frame)
            except (RuntimeError, ValueError):  # vmap cannot trace this field; a genuine error recurs below
                self._vectorised = False
        return _batched_jvp(self.field, t, x, frame, vectorised=False)

    @property
    def jump_times(self) -> tuple[float, ...]:
        return tuple(jump_times_of(self.field))


class _SplitTangentDynamics(_TangentDynamics):
    """:class:`_TangentDynamics` of a field with ``parts``, whose parts are the parts' variational fields."""

    def __init__(self, field: nn.Module, parts: Any, compile: bool = False):
        super().__init__(field, compile)
        self.tangent_parts = nn.ModuleList(_TangentDynamics(part, compile) for part in parts)

    @property
    def parts(self) -> nn.ModuleList:
        return self.tangent_parts


_COMPILED: weakref.WeakKeyDictionary[nn.Module, dict[tuple, Callable]] = weakref.WeakKeyDictionary()
"""Compiled joint evaluations by field, then by the frame's shape, dtype and device, each with a code object of its
own (so that dynamo's limit of 8 variants per code object does not send a ninth field back to eager mode)."""


def _joint_evaluation(field: nn.Module, t: Tensor, x: Tensor, frame: Tensor) -> tuple[Tensor, Tensor]:
    return _batched_jvp(field, t, x, frame)


def _compiled_jvp(field: nn.Module, frame: Tensor) -> Callable:
    """:func:`_joint_evaluation` under :func:`torch.compile` for ``field`` and frames like ``frame``, cached."""
    cache = _COMPILED.setdefault(field, {})
    key = (tuple(frame.shape), frame.dtype, frame.device)
    if key not in cache:
        options: dict[str, Any] = dict(COMPILE_OPTIONS) if frame.device.type == "cpu" else {}
        cache[key] = torch.compile(own_code(_joint_evaluation), options=options)
    return cache[key]


def lyapunov_spectrum(
    field: nn.Module,
    x0: Tensor,
    t0: float | None = None,
    t1: float | None = None,
    k: int = 1,
    *,
    method: str | None = None,
    steps: int | None = None,
    step_size: float | None = None,
    reorthonormalize_every: int = 1,
    frame: Tensor | None = None,
    compile: bool = False,
    **solve_options: Any,
) -> LyapunovSpectrum:
    """The ``k`` leading finite-time Lyapunov exponents of ``dx/dt = field(t, x)`` from ``x0`` over ``[t0, t1]``.

    Benettin's method (module docstring): ``k`` tangent vectors are integrated with the variational equation
    ``dV/dt = J_f(t, x(t)) V`` jointly with ``x``, as the tuple state ``(x, V)`` of one fixed-grid
    :func:`~neuralode_tf.solve` per stretch of ``reorthonormalize_every`` steps, and re-orthonormalised by QR after
    each stretch; ``λ_i = (1 / (t1 - t0)) Σ_s log (R_s)_ii``. The whole state is one vector of
    ``n = x0.numel()`` entries (for a batch of sequences, the exponents of the batch as one system). No gradients
    are tracked. Each evaluation of the joint field is one forward pass of ``field`` with ``k`` tangents pushed
    through it (:func:`torch.func.jvp` under :func:`torch.func.vmap`), as many evaluations as the solve of ``x``
    alone on the same grid makes: about ``k + 1`` times its arithmetic (``benchmarks/lyapunov.py`` times it).

    ``lyapunov_spectrum(depth, x0, k=4)`` with a :class:`~neuralode_tf.ContinuousDepth` ``depth`` uses its
    ``field``, ``t0``, ``t1`` and grid (``method``, ``steps``/``step_size``, ``substep``, ``backend``); arguments
    given here override them. Its fixed-grid default (Euler, unit steps) is the residual stack itself.

    Args:
        field: A field ``(t, x) -> dx/dt`` (an ``nn.Module`` mapping a tensor to a tensor of its shape), or a
            :class:`~neuralode_tf.ContinuousDepth` over a tensor state.
        x0: The initial state, a real floating tensor.
        t0, t1: The depth span, ``t0 < t1`` (default: the ContinuousDepth's).
        k: How many exponents, ``1 <= k <= n``.
        method: A fixed-grid method of :func:`~neuralode_tf.solve` (default ``"rk4"``, or the ContinuousDepth's).
        steps, step_size: The grid: ``steps`` equal steps over ``[t0, t1]``, or steps of at most ``step_size``
            (one of them is needed for a plain field).
        reorthonormalize_every: Steps between re-orthonormalisations. Growth ratios between tangent directions
            of ``exp((λ_1 - λ_k) Δt)`` over a stretch must stay well below ``1 / eps``.
        frame: The initial tangent vectors, ``(k, *x0.shape)``, linearly independent; they are orthonormalised
            (Gram-Schmidt order). Default: standard normal vectors drawn one by one from a generator seeded with 0,
            so the first ``j`` do not depend on ``k`` (``k=1`` gives the leading exponent of ``k=3``).
        compile: Evaluate the joint field through :func:`torch.compile` (one graph for ``f`` and its ``k``
            tangents; not ``solve``'s ``compile``, which would recompile the march for every stretch). The first
            call for a field, ``k`` and state shape compiles (about 10-30 s on a CPU); later ones reuse it. Worth it
            where per-operation overhead dominates, which forward-mode AD multiplies (``benchmarks/lyapunov.py``).
        **solve_options: Further arguments of :func:`~neuralode_tf.solve` (``backend``, ``substep``, ...).

    Returns:
        :class:`LyapunovSpectrum`: ``exponents``, their ``running`` estimates at the ``times`` of
        re-orthonormalisation, the final state and frame, and the number of evaluations.

    Raises:
        TypeError: ``x0`` is not a tensor (tuple states are not supported), or ``t0``/``t1`` are not numbers.
        ValueError: ``k`` exceeds the state dimension, ``t1 <= t0`` (:class:`~neuralode_tf.numerics.InvalidTimesError`),
            no grid is given, ``reorthonormalize_every < 1``, or ``frame`` has the wrong shape or is singular.
        ~neuralode_tf.numerics.SolverConfigError: ``method`` is not a fixed-grid method.
    """
    if isinstance(field, ContinuousDepth):
        if isinstance(field.field, Augmented):
            raise TypeError("lyapunov_spectrum follows a tensor state; this ContinuousDepth's field is augmented")
        settings = {key: value for key, value in field.solve_options.items() if key in _FROM_CONTINUOUS_DEPTH}
        t0 = field.t0 if t0 is None else t0
        t1 = field.t1 if t1 is None else t1
        field = field.field
    else:
        settings = {"method": "rk4"}
    if method is not None:
        settings = {key: value for key, value in settings.items() if key != "substep"}
        settings["method"] = method
    if steps is not None or step_size is not None:
        settings = {key: value for key, value in settings.items() if key not in ("steps", "step_size")}
        settings.update(steps=steps, step_size=step_size)
    settings.update(solve_options)
    x0 = _check_state(x0)
    start, end = check_times((t0, t1), names=("t0", "t1"))
    grid = _grid(start, end, settings.pop("steps", None), settings.pop("step_size", None), reorthonormalize_every)
    if settings["method"] not in FIXED_GRID_METHODS:
        raise SolverConfigError(
            f"lyapunov_spectrum needs a fixed-grid method (one of {sorted(FIXED_GRID_METHODS)}), got "
            f"{settings['method']!r}: pass method='rk4' and steps= or step_size="
        )
    n = x0.numel()
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"k must be an integer with 1 <= k <= n = x0.numel() = {n} (the state dimension), got {k!r}")
    parts = parts_of(field)
    tangent = _TangentDynamics(field, compile) if parts is None else _SplitTangentDynamics(field, parts, compile)
    with torch.no_grad():
        x, basis = x0.detach(), _initial_frame(frame, k, x0)
        logs, nfe = [], 0
        for (a, b), count in grid:
            solution = solve(tangent, (x, basis), [a, b], steps=count, **settings)
            x, grown = solution.y1
            nfe += solution.stats.nfe
            q, r = torch.linalg.qr(grown.reshape(k, n).T)
            logs.append(r.diagonal().abs().log())
            basis = q.T.reshape(grown.shape)
        times = torch.tensor([start] + [b for (_, b), _ in grid], dtype=torch.float64)
        depth = (times[1:] - start).to(device=x.device, dtype=x.dtype)
        running = torch.stack(logs).cumsum(dim=0) / depth[:, None]
    return LyapunovSpectrum(exponents=running[-1], times=times, running=running, x1=x, frame=basis, nfe=nfe)


def _check_state(x0: object) -> Tensor:
    if not isinstance(x0, Tensor):
        raise TypeError(
            f"x0 must be a tensor (the state whose perturbations are followed), got {type(x0).__name__}; "
            "tuple states (augmented fields) are not supported"
        )
    if not x0.is_floating_point():
        raise TypeError(f"x0 must be a real floating tensor, got dtype {x0.dtype}")
    return x0


def _grid(
    start: float, end: float, steps: int | None, step_size: float | None, every: int
) -> list[tuple[tuple[float, float], int]]:
    """The stretches ``((a, b), steps)`` between re-orthonormalisations: ``every`` equal steps each, the last
    possibly fewer."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"reorthonormalize_every must be a positive integer (steps), got {every!r}")
    if (steps is None) == (step_size is None):
        raise ValueError("lyapunov_spectrum needs one grid: pass steps= (over [t0, t1]) or step_size=, not both")
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        total = steps
    else:
        if not isinstance(step_size, (int, float)) or not step_size > 0 or not math.isfinite(step_size):
            raise ValueError(f"step_size must be a positive number, got {step_size!r}")
        total = max(1, math.ceil((end - start) / step_size - 1e-9))
    h = (end - start) / total
    stretches = []
    for first in range(0, total, every):
        count = min(every, total - first)
        b = end if first + count == total else start + (first + count) * h
        stretches.append(((start + first * h, b), count))
    return stretches


def _initial_frame(frame: Tensor | None, k: int, x0: Tensor) -> Tensor:
    """The orthonormalised initial tangent vectors ``(k, *x0.shape)``."""
    n = x0.numel()
    if frame is None:
        generator = torch.Generator().manual_seed(0)
        frame = torch.stack([torch.randn(n, generator=generator, dtype=torch.float64) for _ in range(k)])
    elif not isinstance(frame, Tensor) or frame.shape != (k, *x0.shape):
        shape = tuple(frame.shape) if isinstance(frame, Tensor) else type(frame).__name__
        raise ValueError(f"frame must be a tensor of shape (k, *x0.shape) = {(k, *x0.shape)}, got {shape}")
    q, r = torch.linalg.qr(frame.detach().reshape(k, n).T.to(dtype=x0.dtype, device=x0.device))
    diagonal = r.diagonal().abs()
    if not bool((diagonal > 1e3 * torch.finfo(x0.dtype).eps * diagonal.max()).all()):
        raise ValueError("frame must have k linearly independent tangent vectors")
    return q.T.reshape(k, *x0.shape)
