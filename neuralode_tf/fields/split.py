"""The Lie-Trotter reading of a transformer block."""

from __future__ import annotations

from ._parts import SumOfParts

__all__ = ["SplitField"]


class SplitField(SumOfParts):
    """A field that is a sum of parts which splitting integrators may step one after another.

    .. math:: \\frac{dx}{dt} = f_1(t, x) + \\dots + f_p(t, x)

    As a plain field (for any Runge-Kutta or adaptive method) it is the sum. The splitting methods
    ``lie_trotter`` and ``strang`` of :func:`neuralode_tf.solve` instead advance ``f_1``, ...,
    ``f_p`` in turn through :attr:`parts`. For ``SplitField(attn, mlp)`` one Lie-Trotter Euler step
    of size 1 is the standard pre-norm block ``x + attn(x)`` then ``+ mlp(.)`` (Lu et al. 2019;
    Zhong et al. 2022, eqs. 1-3), and one Strang Euler step of ``SplitField(mlp, attn)`` is the
    Macaron block: half MLP, attention, half MLP.

    Args:
        *parts: Residual branches ``x -> dx`` (e.g. :class:`~neuralode_tf.nn.AttentionBranch`) or
            fields ``(t, x) -> dx``, in the order a splitting method steps them.
    """
