"""The Set Transformer of Lee et al. (2019) for point-cloud classification, with a continuous-depth ISAB encoder
(the blocks and the field are in :mod:`~neuralode_tf.models.readings.set_blocks`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...nn._conditioning import check_padding_mask
from ..readings.set_blocks import PMA, _isab_sets
from ..readings.stack import _named_field, stack_encoder

__all__ = ["SetTransformer"]


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
        field: The name of a reading of the model's own blocks as continuous depth
            (:data:`~neuralode_tf.models.FIELDS`, :func:`~neuralode_tf.models.stack_encoder`), or a ready-made
            field module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out the arguments that configure the
            own blocks): ``"split"`` (default, the ``depth`` pre-norm ISABs of
            :func:`~neuralode_tf.models.isab_field`), ``"parallel"``, ``"composed"`` or ``"node"``; a ready-made
            field's modules take ``bind(key_padding_mask=...)``, e.g. the SAB encoder
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

    ``forward = forward_head(forward_features(...))`` as in timm, the features being the pooled seeds
    (pooling needs the padding mask, so it comes before the head). The parameter count is
    ``sum(p.numel() for p in model.parameters())``.
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
        sets = _named_field(
            field, lambda _: _isab_sets(dim, num_heads, num_inducing, depth, num_sets, mlp_hidden), num_sets=num_sets
        )
        self.encoder = stack_encoder(field, depth, sets, **encoder)
        self.dropout = nn.Dropout(dropout)
        self.pool = PMA(dim, num_heads, num_seeds, mlp_hidden)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(num_seeds * dim, num_classes)

    def forward_features(self, points: Any, key_padding_mask: Tensor | None = None) -> Tensor:
        """The pooled features ``(B, num_seeds, dim)``: encoder (its output zeroed at padding), dropout, PMA, norm.

        ``points`` is a ``torch_geometric.data.Batch`` (or ``Data``) whose ``pos`` is batched by
        ``batch``, densified with ``torch_geometric.utils.to_dense_batch``; or a dense ``(B, N, in_dim)``
        tensor with ``key_padding_mask`` ``(B, N)``, **True at padding** (as in :class:`torch.nn.MultiheadAttention`;
        ``to_dense_batch`` returns the opposite, True at real points: pass ``~mask``; default: all real).
        Every set needs at least one real point.
        """
        points, pad = _dense(points, key_padding_mask)
        if points.shape[-1] != self.embed.in_features or points.dtype != self.embed.weight.dtype:
            raise ValueError(
                f"points must have in_dim={self.embed.in_features} coordinates of the model's dtype "
                f"{self.embed.weight.dtype}, got {points.shape[-1]} of {points.dtype}"
            )
        x = self.embed(points.masked_fill(pad.unsqueeze(-1), 0.0))
        x = self.encoder(x, key_padding_mask=pad).masked_fill(pad.unsqueeze(-1), 0.0)
        return self.norm(self.pool(self.dropout(x), pad))

    def forward_head(self, features: Tensor) -> Tensor:
        """Logits ``(B, num_classes)`` of the pooled features: dropout, the seeds concatenated, the linear head."""
        return self.head(self.dropout(features).flatten(-2))

    def forward(self, points: Any, key_padding_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; ``points`` and ``key_padding_mask`` as in :meth:`forward_features`."""
        return self.forward_head(self.forward_features(points, key_padding_mask))


def _dense(points: Any, key_padding_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(points (B, N, d), key_padding_mask (B, N) True at padding)`` from a dense tensor or a torch_geometric
    batch."""
    if isinstance(points, Tensor):
        if points.ndim != 3:
            raise ValueError(f"dense points must be (B, N, in_dim), got shape {tuple(points.shape)}")
        if key_padding_mask is None:
            return points, torch.zeros(points.shape[:2], dtype=torch.bool, device=points.device)
        pad = key_padding_mask.bool() if isinstance(key_padding_mask, Tensor) else key_padding_mask
        check_padding_mask(pad, "key_padding_mask", points.shape[:-1], "points")
        return points, pad
    if key_padding_mask is not None:
        raise ValueError(
            "key_padding_mask= goes with dense points; a torch_geometric batch carries its own `batch` vector"
        )
    if not isinstance(getattr(points, "pos", None), Tensor):
        raise TypeError(
            f"points must be a dense tensor or a torch_geometric batch with `pos`, got {type(points).__name__}"
        )
    try:
        from torch_geometric.utils import to_dense_batch
    except ImportError as err:
        raise ImportError(
            "batched point clouds need torch-geometric (pip install 'neuralode-tf[graph]'); "
            "or pass dense points (B, N, d) with a key_padding_mask (B, N)"
        ) from err
    dense, real = to_dense_batch(points.pos, getattr(points, "batch", None))
    return dense, ~real
