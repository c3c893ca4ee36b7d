"""Gradients with respect to the requested times ``t`` (a learnable depth, a learnable start).

For the exact solution of ``dy/dt = f(t, y)`` from ``y(t_0) = y_0``,

.. math::

    \\frac{\\partial y(t_i)}{\\partial t_i} = f(t_i, y(t_i)), \\qquad
    \\frac{\\partial y(t_i)}{\\partial t_0} = -\\frac{\\partial y(t_i)}{\\partial y_0} f(t_0, y_0)

(Chen et al. 2018, Appendix B.2). :func:`shifted_start` and :func:`shifted_outputs` build both into the solve
without changing a value: the solve starts from ``y_0 - (t_0 - sg(t_0)) f(t_0, y_0)`` and each output gains
``(t_i - sg(t_i)) f(t_i, y_i)``, where ``sg`` stops gradients, so the terms are zero but their derivatives
are the ones above, and the second, from the start's shift, reaches ``t_0`` through whatever differentiates the
solve (backprop, checkpointing or an adjoint). The first output, ``y(t_0) = y_0``, gets ``-f_0 + f_0 = 0``, as it
should. It costs one evaluation of the field per requested time, counted in ``stats.nfe_dense``.
"""

from __future__ import annotations

from typing import TypeGuard

import torch
from torch import Tensor

from .._typing import Field, State
from ._state import leaves, tree_map
from .solution import Stats


def wants_time_gradients(t: object) -> TypeGuard[Tensor]:
    """Whether ``t`` is a tensor that a gradient is asked for."""
    return isinstance(t, Tensor) and t.requires_grad and torch.is_grad_enabled()


def shifted_start(field: Field, y0: State, t0: Tensor, stats: Stats) -> State:
    """``y0 - (t0 - sg(t0)) f(t0, y0)``: the value of ``y0``, with ``dy0/dt0 = -f(t0, y0)``."""
    return _shifted(field, y0, t0, -1.0, stats)


def shifted_outputs(field: Field, ys: list[State], t: Tensor, stats: Stats) -> list[State]:
    """Each ``y_i + (t_i - sg(t_i)) f(t_i, y_i)``: the values of ``ys``, with ``dy_i/dt_i = f(t_i, y_i)``."""
    return [_shifted(field, y, t_i, 1.0, stats) for y, t_i in zip(ys, t.unbind(0))]


def _shifted(field: Field, y: State, t: Tensor, sign: float, stats: Stats) -> State:
    dtype = torch.promote_types(leaves(y)[0].dtype, torch.float32)  # a 16-bit state's times are float32 (_precision)
    stats.nfe_dense += 1
    with torch.no_grad():
        slope = field(t.detach().to(dtype), y)
    shift = sign * (t - t.detach())
    return tree_map(lambda x, f: x + f * shift.to(x.dtype), y, slope)
