"""The Set Transformer of Lee et al. (2019) with its ISAB encoder as a continuous-depth field.

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
step per unit (``method="lie_trotter"``, the default of :class:`SetTransformer`) is exactly the
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
which Kan et al.'s ModelNet40 experiment counts, are in :mod:`~neuralode_tf.models.set_reference`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from .._checks import check_padding_mask
from ..fields import SplitField, WeightSharedField
from ..nn import AttentionBranch, MLPBranch
from .blocks import stack_encoder

__all__ = ["MAB", "PMA", "InducedAttentionBranch", "isab_field", "SetTransformer"]


class _CrossAttention(nn.Module):
    """``(x, y) -> Multihead(LN(x), LN(y), LN(y))``: pre-norm attention of ``x`` to the set ``y``."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.attn = AttentionBranch(dim, num_heads, context_dim=dim)
        self.norm_context = nn.LayerNorm(dim)

    def forward(self, x: Tensor, y: Tensor, y_padding_mask: Tensor | None = None) -> Tensor:
        return self.attn(x, context=self.norm_context(y), key_padding_mask=y_padding_mask)


class MAB(nn.Module):
    """Pre-norm multihead attention block: ``MAB(X, Y) = H + rFF(H)``, ``H = X + Multihead(LN(X), LN(Y), LN(Y))``.

    Lee et al. (2019, eq. 6) with the LayerNorms inside the branches (see the module docstring).

    Args:
        dim: Width of ``X``, ``Y`` and the output.
        num_heads: Attention heads.
        mlp_hidden: Hidden width of rFF (default ``4 * dim``).

    Shapes:
        ``x``: ``(*batch, n, dim)``; ``y``: ``(*batch, m, dim)``; ``y_padding_mask``: bool
        ``(*batch, m)``, True at padding (those elements of ``Y`` are never attended to).
    """

    def __init__(self, dim: int, num_heads: int, mlp_hidden: int | None = None):
        super().__init__()
        self.attend = _CrossAttention(dim, num_heads)
        self.mlp = MLPBranch(dim, mlp_hidden)

    def forward(self, x: Tensor, y: Tensor, y_padding_mask: Tensor | None = None) -> Tensor:
        h = x + self.attend(x, y, y_padding_mask)
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


class SetTransformer(nn.Module):
    """Point-cloud (set) classification: a continuous-depth ISAB encoder, PMA pooling and a linear head.

    .. math::

        x(0) = W_{in} p, \\qquad \\frac{dx}{dt} = f(t, x) \\text{ on } [0, D], \\qquad
        \\mathrm{logits} = W\\, \\mathrm{flatten}\\big(LN(\\mathrm{PMA}_k(x(D)))\\big) + b

    Lee et al. (2019), §5.5 and their ModelNet40 model: ISAB encoder, dropout, PMA, dropout,
    linear. The output is invariant to the order of the points; padded points never change the
    real points' features nor the logits (they are masked out of every attention and of the
    pooling, and their coordinates are zeroed before the encoder). That holds exactly for
    fixed-grid methods; an adaptive method chooses its steps from the whole padded state.

    Args:
        num_classes: Number of output classes.
        in_dim: Coordinates per point (3 for ``pos``).
        dim, num_heads: Width and attention heads.
        num_inducing: Inducing points ``m`` per ISAB.
        depth: Depth-time ``D``, the number of ISABs of the default field.
        num_seeds: PMA seeds ``k``; their outputs are concatenated for the head.
        field: How the ``depth`` pre-norm ISABs become continuous depth: ``"split"`` (default,
            :func:`isab_field`), ``"parallel"``, ``"composed"`` or ``"node"``
            (:func:`~neuralode_tf.models.stack_encoder`); or a ready-made field on ``[0, depth]``
            whose modules take ``bind(key_padding_mask=...)``, e.g. the SAB encoder
            :func:`~neuralode_tf.models.transformer_field` (self-attention, ``O(n^2)``).
        num_sets: Independent parameter sets of the default field (weight sharing across depth).
        mlp_hidden: Hidden width of every rFF (default ``dim``: the reference's rFF is one
            ``dim x dim`` layer).
        dropout: Dropout before and after PMA (0.5 in the reference ModelNet40 model).
        **encoder: Settings of :func:`~neuralode_tf.models.stack_encoder`: ``method``, ``steps``,
            ``step_size``, any argument of :func:`~neuralode_tf.solve`, and ``t1``,
            ``transport_cost``, ``inner_residuals`` (the kinetic energy leaves padded points out). The
            default for ``"split"``, ``lie_trotter`` with one Euler step per unit of time, is the
            discrete pre-norm ISAB stack.

    The parameter count is ``sum(p.numel() for p in model.parameters())``.
    """

    def __init__(
        self,
        num_classes: int,
        in_dim: int = 3,
        dim: int = 64,
        num_heads: int = 4,
        num_inducing: int = 16,
        depth: int = 2,
        num_seeds: int = 1,
        *,
        field: str | nn.Module = "split",
        num_sets: int | None = None,
        mlp_hidden: int | None = None,
        dropout: float = 0.0,
        **encoder: Any,
    ):
        super().__init__()
        mlp_hidden = dim if mlp_hidden is None else mlp_hidden
        self.embed = nn.Linear(in_dim, dim)
        sets = None
        if not isinstance(field, nn.Module):
            sets = _isab_sets(dim, num_heads, num_inducing, depth, num_sets, mlp_hidden)
        self.encoder = stack_encoder(field, depth, sets, **encoder)
        self.dropout = nn.Dropout(dropout)
        self.pool = PMA(dim, num_heads, num_seeds, mlp_hidden)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(num_seeds * dim, num_classes)

    @classmethod
    def modelnet40(cls, **overrides: Any) -> SetTransformer:
        """The ModelNet40 configuration of Lee et al. (2019; their ``main_pointcloud.py``): width 256,
        4 heads, 16 inducing points, 2 ISABs, PMA with 1 seed, dropout 0.5, 40 classes."""
        config = dict(num_classes=40, dim=256, num_heads=4, num_inducing=16, depth=2, num_seeds=1, dropout=0.5)
        return cls(**{**config, **overrides})

    @classmethod
    def shapes3d(cls, **overrides: Any) -> SetTransformer:
        """A small model for :func:`neuralode_tf.data.shapes3d` (8 primitives, 3-d points): width 64,
        4 heads, 16 inducing points, 2 ISABs, PMA with 1 seed."""
        config = dict(num_classes=8, dim=64, num_heads=4, num_inducing=16, depth=2, num_seeds=1)
        return cls(**{**config, **overrides})

    def encode(self, points: Any, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Encoder features ``(B, N, dim)``, zero at padding, and the mask ``(B, N)``, True at real points.

        ``points`` is a ``torch_geometric.data.Batch`` (or ``Data``) whose ``pos`` is batched by
        ``batch``, densified with ``torch_geometric.utils.to_dense_batch``; or a dense ``(B, N, in_dim)``
        tensor with ``mask`` ``(B, N)``, **True at real points** (as ``to_dense_batch`` returns it;
        default: all real). Every set needs at least one real point.
        """
        points, real = _dense(points, mask)
        if points.shape[-1] != self.embed.in_features or points.dtype != self.embed.weight.dtype:
            raise ValueError(
                f"points must have in_dim={self.embed.in_features} coordinates of the model's dtype "
                f"{self.embed.weight.dtype}, got {points.shape[-1]} of {points.dtype}"
            )
        pad = ~real
        x = self.embed(points.masked_fill(pad.unsqueeze(-1), 0.0))
        x = self.encoder(x, key_padding_mask=pad)
        return x.masked_fill(pad.unsqueeze(-1), 0.0), real

    def forward(self, points: Any, mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; ``points`` and ``mask`` as in :meth:`encode`."""
        x, real = self.encode(points, mask)
        pooled = self.norm(self.pool(self.dropout(x), ~real))
        return self.head(self.dropout(pooled).flatten(-2))


def _dense(points: Any, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(points (B, N, d), mask (B, N) True at real points)`` from a dense tensor or a torch_geometric batch."""
    if isinstance(points, Tensor):
        if points.ndim != 3:
            raise ValueError(f"dense points must be (B, N, in_dim), got shape {tuple(points.shape)}")
        if mask is None:
            return points, torch.ones(points.shape[:2], dtype=torch.bool, device=points.device)
        real = mask.bool() if isinstance(mask, Tensor) else mask
        check_padding_mask(real, "mask", points.shape[:-1], "points", marks="real points")
        return points, real
    if mask is not None:
        raise ValueError("mask= goes with dense points; a torch_geometric batch carries its own `batch` vector")
    if not isinstance(getattr(points, "pos", None), Tensor):
        raise TypeError(
            f"points must be a dense tensor or a torch_geometric batch with `pos`, got {type(points).__name__}"
        )
    try:
        from torch_geometric.utils import to_dense_batch
    except ImportError as err:
        raise ImportError(
            "batched point clouds need torch-geometric (pip install 'neuralode-tf[graph]'); "
            "or pass dense points (B, N, d) with a mask (B, N)"
        ) from err
    return to_dense_batch(points.pos, getattr(points, "batch", None))
