"""Stochastic depth (Huang et al. 2016) inside a field: a part's increment dropped per sample in training."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._typing import State
from ._parts import Autonomous

__all__ = ["StochasticDepth"]


class StochasticDepth(Autonomous):
    """A residual branch ``f`` read as a field, dropped for whole samples in training by the linear rule over depth.

    .. math::

        g(t, x)_b = \\frac{m_b}{1 - p(t)}\\, f(t, x)_b, \\qquad m_b \\sim \\mathrm{Bernoulli}\\big(1 - p(t)\\big),
        \\qquad p(t) = p_{\\max} \\frac{\\ell(t)}{D - 1}, \\quad \\ell(t) = \\min(\\lfloor t \\rfloor, D - 1)

    for each sample ``b`` of the batch (the leading dimension): layer ``ℓ`` of a ``D``-layer stack on ``[0, D]``
    drops its branch with probability ``p(t)``, rising linearly from 0 at the first layer to ``p_max`` at the last
    (Huang et al. 2016, §3, "linear decay"; the rule of DeiT and timm's ``drop_path_rate``; ``p = 0`` for ``D = 1``).
    The kept increments are scaled by ``1 / (1 - p)``, so their expectation is ``f``, and in evaluation mode the
    wrapper is ``f`` itself.

    It is an :class:`~neuralode_tf.fields.Autonomous` field of the branch with the same state-dict keys, so a model
    trained with stochastic depth loads into one without, and back.

    The masks are drawn afresh at every evaluation, so one Euler or Lie-Trotter step of size 1 per layer, where each
    part is evaluated once, is exactly the discrete stack with stochastic depth on each residual branch; a method with
    several stages per step (RK4) draws a mask per stage. The layer index is read from the time, which must be one
    number in training (per-sample times, as torchode's, raise).

    Args:
        branch: A residual branch ``x -> dx`` on tensors whose leading dimension is the batch.
        rate: ``p_max``, the drop probability of the last layer, in ``[0, 1)``.
        depth: ``D``, the number of layers of the stack (the field lives on ``[0, D]``).
    """

    def __init__(self, branch: nn.Module, rate: float, depth: int):
        super().__init__(branch)
        if not (isinstance(rate, (int, float)) and 0.0 <= rate < 1.0):
            raise ValueError(f"rate must be a probability in [0, 1), got {rate!r}")
        if not (isinstance(depth, int) and depth >= 1):
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        self.rate = float(rate)
        self.depth = depth

    def drop_probability(self, t: Tensor | float) -> float:
        """``p(t)``: the drop probability of the layer at time ``t``."""
        if self.depth == 1:
            return 0.0
        layer = min(max(math.floor(float(t)), 0), self.depth - 1)
        return self.rate * layer / (self.depth - 1)

    def forward(self, t: Tensor, y: State) -> State:
        out = self.branch(y)
        if not self.training or self.rate == 0.0:
            return out
        if not isinstance(out, Tensor):
            raise TypeError(f"stochastic depth drops tensor increments; the branch returned {type(out).__name__}")
        if isinstance(t, Tensor) and t.numel() > 1:
            raise ValueError("stochastic depth reads the layer from one time; per-sample times are not supported")
        keep = 1.0 - self.drop_probability(t)
        if keep == 1.0:
            return out
        mask = torch.empty((out.shape[0],) + (1,) * (out.ndim - 1), dtype=out.dtype, device=out.device)
        return out * mask.bernoulli_(keep).div_(keep)

    def extra_repr(self) -> str:
        return f"rate={self.rate}, depth={self.depth}"
