"""The parallel (side-by-side) transformer block of Zhong et al. (2022)."""

from __future__ import annotations

from ._parts import SumOfParts

__all__ = ["ParallelField"]


class ParallelField(SumOfParts):
    """Attention and MLP side by side: the field their parallel block integrates with Euler.

    .. math:: \\frac{dx}{dt} = G(x) + F(x), \\qquad x^{m+1} = x^m + G(x^m) + F(x^m)

    (Zhong et al. 2022, eqs. 3-4). It is the same ODE as :class:`~neuralode_tf.fields.SplitField`
    ``G + F``; the two readings differ in the integrator. An Euler step of size 1 is the parallel block,
    and higher-order methods (rk4 in Zhong et al. Table 1) evaluate the sum at each stage. Its
    :attr:`parts` are ``G`` and ``F``, so splitting methods take it too, rightly, as it is the same
    ODE: one Lie-Trotter Euler step of size 1 is the sequential block ``x + G(x)``, then ``+ F(.)``.
    The front-ends therefore choose the method by the kind of field, not by its parts: ``euler``
    for a parallel field, ``lie_trotter`` for a split one (:func:`~neuralode_tf.models.stack_encoder`).

    Args:
        *parts: Residual branches ``x -> dx`` or fields ``(t, x) -> dx``.
    """
