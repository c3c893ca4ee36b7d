"""Dense output: the trajectory of a solve at any time of its span, from the solver's own steps.

A solve with ``dense=True`` keeps its **nodes**: the state ``y_n`` at every step's start ``t_n`` (each grid
point of a fixed-grid method, each accepted step of an adaptive one) and at the end. Between two nodes
:meth:`Trajectory.evaluate` is the cubic Hermite interpolant (Hairer, Nørsett & Wanner, *Solving ODEs I*,
§II.6, eq. 6.7), with ``h = t_{n+1} - t_n`` and ``s = (t - t_n) / h``:

.. math::

    y(t) = (2s^3 - 3s^2 + 1)\\, y_n + (s^3 - 2s^2 + s)\\, h f_n + (3s^2 - 2s^3)\\, y_{n+1} + (s^3 - s^2)\\, h f_{n+1},

where ``f_n = f(t_n, y_n)``. It matches the nodes' values and slopes, and its error is ``O(h^4)`` given
exact nodes, so with a method of order ``p`` the dense output has order ``min(p, 4)`` (the tests fit it),
the order of torchdiffeq's and torchode's own dopri5 interpolants. It is not offered for dopri8, whose steps
are long enough to make it about 10^3 times less accurate than the nodes.

**Cost.** A time that is a node returns the node itself (no evaluation). Otherwise the slopes at the two
ends of its step are evaluated once each and cached: at most two evaluations per step touched, counted in
``stats.nfe_dense``. At a node where the field jumps (its ``jump_times``), the step ending there takes the
slope of the left limit, as the solvers do.

**Gradients** flow to the field's parameters, ``y0`` and the evaluation times, through the nodes (the
solve's own autograd graph: ``gradient="backprop"`` or ``"checkpoint"``) and the slopes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .._typing import Field, State
from ._state import stack, tree_map
from .errors import InvalidTimesError
from .fixed_grid import field_time, time_dtype
from .solution import Stats

__all__ = ["Trajectory"]

Event = Callable[[Tensor, State], Tensor]


class Trajectory:
    """The nodes of a solve and the cubic Hermite interpolant through them (module docstring).

    Args:
        field: The solved field, evaluated for the nodes' slopes.
        jumps: The field's ``jump_times``.
        stats: The solve's statistics; slope evaluations go to ``stats.nfe_dense``.
        event: A terminal event ``g(t, y)``: :meth:`add` reports when its sign has changed between two nodes.
    """

    def __init__(self, field: Field, jumps: Sequence[float], stats: Stats, event: Event | None = None):
        self.field, self.jumps, self.stats, self.event = field, frozenset(jumps), stats, event
        self.times: list[float] = []
        self.states: list[State] = []
        self._slopes: dict[tuple[int, bool], State] = {}
        self._clocks: dict[int, Tensor] = {}
        self._sign = 0.0
        self.fired = False

    def add(self, t: float | Tensor, y: State) -> bool:
        """Record the node ``(t, y)`` (a repeated time is ignored); True once the event's sign has changed.

        A tensor ``t`` that requires grad is a solver's step end that autograd sees moving with the
        parameters (torchdiffeq's step-size control is differentiated): the node is then taken at the
        fixed time, ``y - (t - sg(t)) f(t, y)``, so that its gradient is the state's at that time.
        """
        clock = t if isinstance(t, Tensor) and t.requires_grad else None
        t = float(t.detach()) if isinstance(t, Tensor) else float(t)
        if self.times and t <= self.times[-1]:
            return False
        if clock is not None:
            self._clocks[len(self.times)] = clock
        self.times.append(t)
        self.states.append(y)
        if self.event is None:
            return False
        with torch.no_grad():
            value = float(self.event(self.time(t), y))
        sign = math.copysign(1.0, value) if value else 0.0
        if len(self.times) == 1:
            if sign == 0.0:
                raise InvalidTimesError(f"the event function is 0 at t[0]={t:g}: the solve would stop where it starts")
            self._sign = sign
            return False
        self.fired = sign != self._sign
        return self.fired

    def time(self, t: float, left_limit: bool = False) -> Tensor:
        """``t`` as the solver gave it to the field (:func:`~neuralode_tf.numerics.fixed_grid.field_time`)."""
        return field_time(t, time_dtype(self.states[0]), left_limit)

    @property
    def span(self) -> tuple[float, float]:
        """The first and last node times: where :meth:`evaluate` is defined."""
        return self.times[0], self.times[-1]

    def evaluate(self, t: float | Sequence[float] | Tensor) -> State:
        """The state at ``t``: a number or 0-dim tensor gives one state, a sequence or 1-D tensor the states at
        each, stacked along a new dim 0. Times are within :attr:`span`; a tensor ``t`` may require grad."""
        if isinstance(t, Tensor) and t.ndim == 1:
            return stack([self._at(x) for x in t.unbind(0)])
        if isinstance(t, (Tensor, int, float)):
            return self._at(t)
        return stack([self._at(float(x)) for x in t])

    def _at(self, t: float | Tensor) -> State:
        value = float(t.detach()) if isinstance(t, Tensor) else float(t)
        lo, hi = self.span
        if not (math.isfinite(value) and lo <= value <= hi):
            raise InvalidTimesError(f"dense output is defined on [{lo:g}, {hi:g}], the solve's span; got t={value:g}")
        n = bisect.bisect_right(self.times, value) - 1
        if self.times[n] == value and not (isinstance(t, Tensor) and t.requires_grad):
            return self.node(n)
        n = min(n, len(self.times) - 2)
        t_a, t_b = self.times[n], self.times[n + 1]
        h = t_b - t_a
        s = (t - t_a) / h
        s2, s3 = s * s, s * s * s
        f_a, f_b = self.slope(n, left=False), self.slope(n + 1, left=True)
        weights = (2 * s3 - 3 * s2 + 1, (s3 - 2 * s2 + s) * h, 3 * s2 - 2 * s3, (s3 - s2) * h)
        return tree_map(
            lambda y_a, d_a, y_b, d_b: _combine(weights, (y_a, d_a, y_b, d_b)),
            self.node(n),
            f_a,
            self.node(n + 1),
            f_b,
        )

    def node(self, n: int) -> State:
        """The state at node ``n``, as a function of the parameters at that node's fixed time (:meth:`add`)."""
        clock = self._clocks.get(n)
        if clock is None:
            return self.states[n]
        shift = clock - clock.detach()
        return tree_map(lambda y, f: y - f.detach() * shift.to(y.dtype), self.states[n], self.slope(n, left=True))

    def slope(self, n: int, *, left: bool) -> State:
        """``f(t_n, y_n)``; with ``left``, at the left limit of ``t_n`` where the field jumps there."""
        left = left and self.times[n] in self.jumps
        if (n, left) not in self._slopes:
            self.stats.nfe_dense += 1
            self._slopes[(n, left)] = self.field(self.time(self.times[n], left), self.states[n])
        return self._slopes[(n, left)]


def _combine(weights: tuple, values: tuple[Tensor, ...]) -> Tensor:
    out = values[0] * _weight(weights[0], values[0])
    for w, v in zip(weights[1:], values[1:]):
        out = out + v * _weight(w, v)
    return out


def _weight(w: float | Tensor, like: Tensor) -> float | Tensor:
    return w.to(like.dtype) if isinstance(w, Tensor) else w
