"""Terminal events: stop a solve where ``g(t, y(t))`` changes sign, and differentiate the time it stops.

``solve(field, y0, [t0, t_max], event=g, ...)`` steps until the sign of ``g`` at a node (a step's end)
differs from its sign at ``t0``, then finds the root ``t_e`` inside that last step by bisection on the
dense output (:class:`~neuralode_tf.numerics.dense.Trajectory`), to float64 resolution. On a fixed grid
that is the grid's own dense output (two slope evaluations). An adaptive method's step is long, as long as
its error estimate allows, and a cubic through it would find the root 100 to 1000 times less accurately
than the solver's own interpolant (torchdiffeq's ``odeint_event``); so that step is first crossed again in
:data:`EVENT_SUBSTEPS` classical RK4 steps from its start, and the root is found on their dense output
(``4 * EVENT_SUBSTEPS`` evaluations more, counted in ``stats.nfe_dense``). The anchors are torchdiffeq's
``odeint_event`` and diffrax's ``Event``; like them this finds the first sign change *between nodes*: a
root pair inside one step, where ``g`` dips and returns, is not seen.

**Gradients.** ``t_e`` is defined implicitly by ``g(t_e, y(t_e; θ); θ) = 0``. By the implicit function
theorem (Chen, Amos & Nickel 2021, "Learning Neural Event Functions", eq. 6)

.. math::

    \\frac{d t_e}{d θ} = -\\frac{\\partial_θ g + \\partial_y g \\cdot \\partial_θ y(t_e)}{\\dot g},
    \\qquad \\dot g = \\partial_t g + \\partial_y g \\cdot f(t_e, y(t_e)),

and the state at the event moves with it: ``d y_e/dθ = ∂_θ y(t_e) + f(t_e, y_e) dt_e/dθ``. Both are
built into the returned tensors, so ``backward()`` gives them; the tests check them against finite
differences and an analytic event time.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._typing import State
from ._state import leaves, tree_map
from .dense import Event, Trajectory
from .fixed_grid import rk_step, time_dtype
from .tableaus import RK4

__all__ = ["locate_event", "EVENT_SUBSTEPS"]

EVENT_SUBSTEPS = 8
"""RK4 steps across an adaptive method's last step, to find an event in: their cubic's error is ``8^4`` times
smaller than one across the step."""


def locate_event(trajectory: Trajectory, event: Event, *, refine: bool = False) -> tuple[Tensor, State]:
    """The event time ``t_e`` in the last step of ``trajectory`` and the state there, both differentiable. With
    ``refine``, the last step is crossed again in :data:`EVENT_SUBSTEPS` RK4 steps first (module docstring)."""
    if refine:
        trajectory = _refined(trajectory) or trajectory
    n = len(trajectory.times) - 2
    before, after = trajectory.times[n], trajectory.times[n + 1]
    trajectory.slope(n, left=False)  # the slopes, with the solve's graph, before bisecting without one
    trajectory.slope(n + 1, left=True)
    with torch.no_grad():
        start_sign = _sign(event, trajectory, before)
        while True:
            middle = 0.5 * (before + after)
            if not before < middle < after:
                break
            sign = _sign(event, trajectory, middle)
            if sign == 0.0:
                before = after = middle
                break
            if sign == start_sign:
                before = middle
            else:
                after = middle
    t_e = after
    y_e = trajectory.evaluate(t_e)
    trajectory.stats.nfe_dense += 1
    slope = trajectory.field(trajectory.time(t_e), y_e)
    rate = _rate(event, trajectory.time(t_e), y_e, slope)
    value = event(trajectory.time(t_e), y_e)
    t_event = trajectory.time(t_e)
    if rate != 0.0:
        t_event = t_event - (value - value.detach()) / rate
    shift = t_event - t_event.detach()
    y_event = tree_map(lambda y, f: y + f.detach() * shift.to(y.dtype), y_e, slope)
    return t_event, y_event


def _refined(trajectory: Trajectory) -> Trajectory | None:
    """The last step of ``trajectory`` in :data:`EVENT_SUBSTEPS` RK4 steps, up to the first of them that ends with
    the event's sign changed; ``None`` if none does (an event a hair before the step's end, where the two solutions
    differ in sign)."""
    start, end = trajectory.times[-2], trajectory.times[-1]
    local = Trajectory(trajectory.field, tuple(trajectory.jumps), trajectory.stats, trajectory.event)
    y = trajectory.node(len(trajectory.times) - 2)
    local.add(start, y)
    dtype, h = time_dtype(y), (end - start) / EVENT_SUBSTEPS
    for k in range(EVENT_SUBSTEPS):
        y = rk_step(trajectory.field, start + k * h, h, y, RK4, dtype)
        trajectory.stats.nfe_dense += RK4.stages
        if local.add(end if k == EVENT_SUBSTEPS - 1 else start + (k + 1) * h, y):
            return local
    return None


def _sign(event: Event, trajectory: Trajectory, t: float) -> float:
    value = float(event(trajectory.time(t), trajectory.evaluate(t)))
    return math.copysign(1.0, value) if value else 0.0


def _rate(event: Event, t: Tensor, y: State, slope: State) -> float:
    """``dg/dt`` along the solution at ``(t, y)``: ``∂_t g + ∂_y g · f``."""
    t = t.detach().requires_grad_(True)
    y = tree_map(lambda x: x.detach().requires_grad_(True), y)
    with torch.enable_grad():
        value = event(t, y)
        grads = torch.autograd.grad(value, (t, *leaves(y)), allow_unused=True)
    total = 0.0 if grads[0] is None else float(grads[0])
    for grad, f in zip(grads[1:], leaves(slope)):
        if grad is not None:
            total += float((grad * f.detach()).sum())
    return total
