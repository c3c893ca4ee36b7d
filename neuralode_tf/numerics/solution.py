"""What :func:`neuralode_tf.solve` returns: the states at the requested times and statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ._state import State, stack, tree_map
from .errors import SolverConfigError

if TYPE_CHECKING:
    from .dense import Trajectory

__all__ = ["Stats", "Solution"]


@dataclass
class Stats:
    """Counters of one solve.

    Attributes:
        nfe: Evaluations of the field during the forward solve. One evaluation is one call on
            the whole batch, also for torchode's per-sample solving. For the splitting methods it
            counts evaluations of single parts (one attention or one MLP branch), so it is not
            comparable one-to-one with the count of a method that evaluates the whole field.
        n_accepted: Accepted steps. Fixed-grid methods accept every step. With torchode's
            per-sample solving it is the largest count over the samples.
        n_rejected: Rejected steps (adaptive methods only), counted like ``n_accepted``.
        nfe_backward: Evaluations during the backward pass: the adjoint's backward solve, or the
            recomputations under checkpointing; both are counted as ``backward()`` runs (not
            under ``compile=True``).
        nfe_dense: Evaluations for dense output and events, after the steps: the slopes at the ends of
            the steps that :meth:`Solution.evaluate` interpolates in, one at an event, and one per
            requested time when ``t`` requires grad.
        backend: The backend that ran the solve.
    """

    nfe: int = 0
    n_accepted: int = 0
    n_rejected: int = 0
    nfe_backward: int = 0
    nfe_dense: int = 0
    backend: str = ""


class Solution:
    """The result of a solve.

    Attributes:
        ts: The requested times, a 1-D float64 tensor (2-D for per-sample times), made on first access when given
            as floats.
        ys: The state at every requested time, stacked along a new leading dimension (for a tuple
            state, a tuple of such stacks). The built-in integrators stack on first access, so a
            caller that only reads :attr:`y1` pays for no copy.
        stats: The :class:`Stats` of the solve.
        event_t: With ``event=``: the time the event function changed sign (a 0-dim tensor in the state's
            dtype, differentiable; also ``ts[-1]``), or ``None`` if it did not before ``t[-1]``.
    """

    def __init__(
        self,
        ts: Tensor | Sequence[float] | Sequence[Sequence[float]],
        ys: State | list[State],
        stats: Stats | None = None,
        *,
        trajectory: Trajectory | None = None,
        event_t: Tensor | None = None,
    ):
        self._ts = ts
        self.stats = stats if stats is not None else Stats()
        self._ys = ys
        self._trajectory = trajectory
        self.event_t = event_t

    def evaluate(self, t: float | Sequence[float] | Tensor) -> State:
        """The state at any time ``t`` of the solve's span, by dense output (``solve(..., dense=True)``).

        A number or 0-dim tensor gives one state; a sequence or 1-D tensor the state at each time, stacked along
        a new dim 0. Differentiable, also in ``t``. :mod:`~neuralode_tf.numerics.dense` states the interpolant,
        its order and its cost (``stats.nfe_dense``).

        Raises:
            SolverConfigError: the solve did not keep its steps (``dense=False``).
            InvalidTimesError: ``t`` is outside the span.
        """
        if self._trajectory is None:
            raise SolverConfigError("this solve kept no dense output: pass dense=True to solve to evaluate it at any t")
        return self._trajectory.evaluate(t)

    @property
    def ts(self) -> Tensor:
        """The requested times (see the class's docstring)."""
        if not isinstance(self._ts, Tensor):
            self._ts = torch.tensor(self._ts, dtype=torch.float64)
        return self._ts

    @property
    def ys(self) -> State:
        if isinstance(self._ys, list):
            self._ys = stack(self._ys)
        return self._ys

    @property
    def y1(self) -> State:
        """The state at the last requested time."""
        if isinstance(self._ys, list):
            return self._ys[-1]
        return tree_map(lambda y: y[-1], self._ys)

    def __repr__(self) -> str:
        return f"Solution(ts={self.ts!r}, ys={self.ys!r}, stats={self.stats!r})"
