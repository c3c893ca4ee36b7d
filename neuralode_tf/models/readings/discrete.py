"""The discrete stack: every block applied once, as the baseline of the continuous-depth readings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..._checks import bind_calls, check_conditioning
from ...fields import ComposedField

__all__ = ["DiscreteStack"]


class DiscreteStack(nn.Module):
    """``x -> B_D ∘ ... ∘ B_1(x)``: the discrete transformer, each block with its skips (Kan et al. 2025, eqs. 2-3).

    The baseline of Kan et al.'s comparisons, for any blocks, including those that are no Euler step
    of a field: post-norm blocks ``N(u + b(u))`` (Sinkformers' IMDb encoder) and Lee et al.'s MAB,
    whose skip is its query projection (:class:`~neuralode_tf.fields.Sublayer`). It is the
    :class:`~neuralode_tf.fields.ComposedField` of the blocks, evaluated once instead of integrated.
    For pre-norm blocks it equals the ``"split"`` reading with one Lie-Trotter Euler step per block.

    Args:
        blocks: The ``D`` blocks, each a sequence of sub-layers (see :class:`~neuralode_tf.fields.ComposedField`).
    """

    def __init__(self, blocks: Sequence[nn.Module | Sequence[nn.Module]]):
        super().__init__()
        self.stack = ComposedField(blocks)

    def forward(self, x: Tensor, **conditioning: Any) -> Tensor:
        """The stack's output; ``conditioning`` (e.g. ``key_padding_mask``) is bound as
        :class:`~neuralode_tf.ContinuousDepth` binds it."""
        calls = bind_calls(self.stack, conditioning)
        check_conditioning(x, conditioning)
        for bind, keywords in calls:
            bind(**keywords)
        return self.stack(torch.zeros((), device=x.device), x)
