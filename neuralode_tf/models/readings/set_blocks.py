"""The blocks of the Set Transformer (Lee et al. 2019), pre-norm, and its ISAB encoder as a continuous-depth field.

Lee et al. write their blocks post-norm (eqs. 6-11)::

    MAB(X, Y) = LN(H + rFF(H)),  H = LN(X + Multihead(X, Y, Y))
    ISAB_m(X) = MAB(X, H),       H = MAB(I, X)        (I: m learned inducing points)
    PMA_k(Z)  = MAB(S, rFF(Z))                        (S: k learned seeds)

A post-norm block ``x -> LN(x + f(x))`` is not ``x`` plus an increment, so it is not a step of
any ODE. Here every MAB is pre-norm (Xiong et al. 2020), with the LayerNorms moved into the
branches::

    MAB(X, Y) = H + rFF(H),      H = X + Multihead(LN(X), LN(Y), LN(Y))

Then an ISAB updates the points by two increments, attention to the induced summary ``H`` and a
row-wise MLP, and the encoder is the field

.. math:: \\frac{dx}{dt} = \\mathrm{Multihead}\\big(LN(x), LN(H(x)), LN(H(x))\\big) + \\mathrm{rFF}(x),
    \\qquad H(x) = \\mathrm{MAB}(I, x)

with its own parameters on each unit of depth-time (:func:`isab_field`). One Lie-Trotter Euler
step per unit (``method="lie_trotter"``, the default of :class:`~neuralode_tf.models.SetTransformer`) is exactly the
stack of pre-norm ISABs ``x <- x + Multihead(...)``, then ``x <- x + rFF(x)``; plain ``"euler"``
adds both increments at once (the parallel block of Zhong et al. 2022); any other method
integrates the same ODE.

Further differences from the reference code (``juho-lee/set_transformer``), all to keep standard
multi-head attention (Vaswani et al. 2017, eq. 4): scores are scaled by ``1/sqrt(d_head)`` (the
reference uses ``1/sqrt(d)``), the heads go through an output projection ``W_o`` (the reference
has none), the residual adds the queries themselves (the reference adds their projection
``fc_q(Q)``), rFF is LN-Linear-GELU-Linear (the reference: ``O + relu(fc_o(O))``), and PMA
is ``MAB(S, Z)`` without the ``rFF(Z)`` of eq. 11, as in the reference code. A continuous depth
keeps the width fixed, so the points are lifted to ``dim`` by a linear map before the encoder
(the reference's first ISAB does this with ``fc_q``). Lee et al.'s blocks as their code builds them,
which Kan et al.'s ModelNet40 experiment counts, are in :mod:`~neuralode_tf.models.frontends.set_reference`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ...fields import SplitField, WeightSharedField
from ...nn import AttentionBranch, MLPBranch
from ...nn._conditioning import check_padding_mask

__all__ = ["MAB", "PMA", "InducedAttentionBranch", "isab_field"]


class _CrossAttention(nn.Module):
    """``(x, y) -> Multihead(LN(x), LN(y), LN(y))``: pre-norm attention of ``x`` to the set ``y``."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.attn = AttentionBranch(dim, num_heads, context_dim=dim)
        self.norm_context = nn.LayerNorm(dim)

    def forward(self, x: Tensor, y: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        return self.attn(x, context=self.norm_context(y), key_padding_mask=key_padding_mask)


class MAB(nn.Module):
    """Pre-norm multihead attention block: ``MAB(X, Y) = H + rFF(H)``, ``H = X + Multihead(LN(X), LN(Y), LN(Y))``.

    Lee et al. (2019, eq. 6) with the LayerNorms inside the branches (see the module docstring).

    Args:
        dim: Width of ``X``, ``Y`` and the output.
        num_heads: Attention heads.
        mlp_hidden: Hidden width of rFF (default ``4 * dim``).

    Shapes:
        ``x``: ``(*batch, n, dim)``; ``y``: ``(*batch, m, dim)``; ``key_padding_mask``: bool
        ``(*batch, m)``, True at padding (those elements of ``Y`` are never attended to).
    """

    def __init__(self, dim: int, num_heads: int, mlp_hidden: int | None = None):
        super().__init__()
        self.attend = _CrossAttention(dim, num_heads)
        self.mlp = MLPBranch(dim, mlp_hidden)

    def forward(self, x: Tensor, y: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        h = x + self.attend(x, y, key_padding_mask)
        return h + self.mlp(h)


class PMA(nn.Module):
    """Pooling by multihead attention: ``PMA_k(Z) = MAB(S, Z)`` with ``k`` learned seed vectors ``S``.

    Lee et al. (2019, eq. 11, without its ``rFF(Z)``, as in their code). The output ``(*batch, k, dim)``
    does not depend on the order of the set, nor on its padded elements.

    Args:
        dim: Width.
        num_heads: Attention heads.
        num_seeds: ``k``.
        mlp_hidden: Hidden width of the MAB's rFF (default ``4 * dim``).
    """

    def __init__(self, dim: int, num_heads: int, num_seeds: int = 1, mlp_hidden: int | None = None):
        super().__init__()
        self.seeds = nn.Parameter(nn.init.xavier_uniform_(torch.empty(num_seeds, dim)))
        self.mab = MAB(dim, num_heads, mlp_hidden)

    def forward(self, z: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        seeds = self.seeds.expand(*z.shape[:-2], -1, -1)
        return self.mab(seeds, z, key_padding_mask)


class InducedAttentionBranch(nn.Module):
    """The attention increment of an ISAB, ``x -> Multihead(LN(x), LN(H), LN(H))`` with ``H = MAB(I, x)``.

    Lee et al. (2019, eqs. 9-10), pre-norm. The ``m`` inducing points ``I`` summarise the set in
    ``H = PMA_m(x)``, which costs ``O(nm)`` instead of the ``O(n^2)`` of self-attention; then every
    point attends to the summary. ``SplitField(InducedAttentionBranch(...), MLPBranch(...))``
    stepped once by ``lie_trotter`` with Euler and ``h = 1`` is a pre-norm ISAB.

    Padded points (``key_padding_mask``, True at padding, set by :meth:`bind`, which
    :class:`~neuralode_tf.ContinuousDepth` calls) are left out of the summary and get a zero
    increment.

    Args:
        dim: Width of the points.
        num_heads: Attention heads.
        num_inducing: ``m``.
        mlp_hidden: Hidden width of the rFF inside the summary's MAB (default ``4 * dim``).
    """

    def __init__(self, dim: int, num_heads: int, num_inducing: int, mlp_hidden: int | None = None):
        super().__init__()
        self.summary = PMA(dim, num_heads, num_inducing, mlp_hidden)
        self.attend = _CrossAttention(dim, num_heads)
        self._key_padding_mask: Tensor | None = None

    def bind(self, *, key_padding_mask: Tensor | None = None) -> None:
        """Set the padding mask of the points (True at padding) for the following calls."""
        self._key_padding_mask = key_padding_mask

    def forward(self, x: Tensor) -> Tensor:
        check_padding_mask(self._key_padding_mask, "key_padding_mask", x.shape[:-1], "x", bound=True)
        out = self.attend(x, self.summary(x, self._key_padding_mask))
        if self._key_padding_mask is not None:
            out = out.masked_fill(self._key_padding_mask.unsqueeze(-1), 0.0)
        return out


def isab_field(
    dim: int,
    num_heads: int,
    num_inducing: int,
    depth: int,
    *,
    num_sets: int | None = None,
    mlp_hidden: int | None = None,
) -> WeightSharedField:
    """The ISAB encoder as a field on ``[0, depth]``: ``dx/dt = InducedAttention_σ(t)(x) + rFF_σ(t)(x)``.

    A :class:`~neuralode_tf.fields.WeightSharedField` of ``num_sets`` (default ``depth``, no sharing)
    blocks ``SplitField(InducedAttentionBranch, MLPBranch)``; with ``lie_trotter``, Euler and unit
    steps it is the stack of ``depth`` pre-norm ISABs. ``mlp_hidden`` sets every rFF (default ``4 * dim``).
    """
    sets = _isab_sets(dim, num_heads, num_inducing, depth, num_sets, mlp_hidden)
    return WeightSharedField([SplitField(*branches) for branches in sets], depth)


def _isab_sets(
    dim: int, num_heads: int, num_inducing: int, depth: int, num_sets: int | None, mlp_hidden: int | None
) -> list[tuple[nn.Module, nn.Module]]:
    """``num_sets`` (default ``depth``) new ISAB parameter sets ``(InducedAttentionBranch, MLPBranch)``."""
    return [
        (InducedAttentionBranch(dim, num_heads, num_inducing, mlp_hidden), MLPBranch(dim, mlp_hidden))
        for _ in range(num_sets or depth)
    ]
