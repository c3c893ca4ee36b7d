"""Which solves of a causal field are exactly causal.

A field is *causal in the sequence positions* when ``field(t, y)[..., i, :]`` reads no position
after ``i`` (a decoder: masked self-attention, cross-attention to a fixed memory, position-wise
MLPs). Any **fixed-grid** solve of such a field is exactly causal too: every step is a fixed
combination of field evaluations, so ``y(t)[..., i, :]`` depends on ``y0[..., : i + 1, :]`` only,
and teacher forcing computes, bit for bit, the values that token-by-token decoding computes.

An **adaptive** solve is not. Step-size control accepts or rejects a step by an error norm taken
over the whole state (all positions, and with torchdiffeq the whole batch), so the step sizes,
and with them every position's value, depend on later positions. The difference is of the order
of the tolerances (about ``1e-5`` in values at ``rtol = atol = 1e-5``), but it is there: a model
trained by teacher forcing with ``dopri5`` does not compute the same function when it decodes one
token at a time. :func:`~neuralode_tf.solve` therefore warns with :class:`CausalityWarning` when
a causal field meets step-size control. For exactly causal adaptive solves, solve each prefix on
its own, as decoding does (:meth:`~neuralode_tf.models.EncoderDecoder.forward` with
``causal_prefixes=True``).

A module declares causality with a boolean attribute ``causal`` (as
:class:`~neuralode_tf.nn.AttentionBranch` and every attention of the library do); a field is
causal when one of its submodules declares it.
"""

from __future__ import annotations

import warnings
from typing import Any

from torch import nn

from ._field_checks import declared

__all__ = ["CausalityWarning", "is_causal"]


class CausalityWarning(UserWarning):
    """An adaptive solve of a causal field: later positions change the step sizes, so earlier ones."""


def is_causal(field: Any) -> bool:
    """Whether ``field`` (or one of its submodules) declares ``causal = True``."""
    if not isinstance(field, nn.Module):
        return False
    return any(causal is True for _, causal in declared(field, "causal"))


def _warn_if_causal(field: Any, method: str) -> None:
    """The warning :func:`~neuralode_tf.solve` gives for an adaptive ``method`` on a causal field."""
    if is_causal(field):
        warnings.warn(
            f"the field is causal, but {method!r} is adaptive: its step sizes come from an error norm over all "
            "positions, so later positions change earlier ones (by about the tolerance) and teacher forcing differs "
            "from token-by-token decoding. Use a fixed-grid method for an exactly causal solve, or solve each prefix "
            "on its own (EncoderDecoder.forward(..., causal_prefixes=True)); see neuralode_tf.numerics.causality",
            CausalityWarning,
            stacklevel=3,
        )
