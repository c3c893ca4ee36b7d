"""Lee et al.'s Set Transformer as their code builds it, for Kan et al.'s ModelNet40 experiment.

Kan et al. (2025, Appendix B) reuse the ModelNet40 model of Sinkformers (``ModelNetSink``), which is
the Set Transformer of Lee et al. (2019; ``juho-lee/set_transformer``, ``modules.py``): two ISABs, then
dropout, PMA, dropout and a linear head. Its MAB differs from the textbook block of
:mod:`~neuralode_tf.models.readings.set_blocks`: it is post-norm, its skip is the query projection
``fc_q(X)``, the scores are scaled by ``1/sqrt(d)`` and the heads have no output projection, and its
rFF is one ReLU layer. These are the blocks whose parameters Kan et al. count (Table 1: 0.86M for the
baseline's four MABs, 0.65M for the continuous models'). Sinkformers' attention is Sinkhorn's; with
one iteration, their "Transformer" baseline, it is the softmax scaled by ``1/n_q`` (their
``MABSINK`` does not undo the scaling). Here it is the softmax of Lee et al.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...fields import Sublayer
from ...nn import _empty_rows
from ...nn._conditioning import check_padding_mask
from ..readings.stack import _named_field, stack_encoder
from .set_transformer import _dense

__all__ = ["ReferenceMAB", "reference_isab", "ReferenceSetTransformer"]


class ReferenceMAB(nn.Module):
    """Lee et al.'s MAB as their code computes it (``MAB`` in ``set_transformer/modules.py``).

    .. math::

        O = LN_0\\Big(Q + \\big[\\mathrm{softmax}\\big(Q_h K_h^\\top / \\sqrt{d}\\big) V_h\\big]_{h=1..H}\\Big),
        \\qquad \\mathrm{MAB}(X, Y) = LN_1\\big(O + \\mathrm{ReLU}(O W_o + b_o)\\big)

    with ``Q = X W_q + b_q``, ``K = Y W_k + b_k``, ``V = Y W_v + b_v`` (width ``d``, split into ``H``
    heads). Parameters: ``(d_q + 2 d_kv + d + 8) d``.

    Args:
        dim_q: Width of ``X``.
        dim_kv: Width of ``Y``.
        dim: Width ``d`` of the output; ``num_heads`` must divide it.
        num_heads: ``H``.

    Attributes:
        feed_forward: The second sub-layer ``O -> LN_1(O + ReLU(O W_o + b_o))``, a
            :class:`~neuralode_tf.fields.Sublayer` (the fully-connected layer of Kan et al.'s eq. 3).
    """

    def __init__(self, dim_q: int, dim_kv: int, dim: int, num_heads: int):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide dim={dim}")
        self.num_heads = num_heads
        self.fc_q = nn.Linear(dim_q, dim)
        self.fc_k = nn.Linear(dim_kv, dim)
        self.fc_v = nn.Linear(dim_kv, dim)
        self.ln0 = nn.LayerNorm(dim)
        self.feed_forward = Sublayer(nn.Sequential(nn.Linear(dim, dim), nn.ReLU()), norm=nn.LayerNorm(dim))

    def attend(self, x: Tensor, y: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """``[softmax(Q_h K_h^T / sqrt(d)) V_h]_h``, ``(*batch, n, d)``; keys at ``key_padding_mask`` (True at
        padding) get no weight."""
        projected = (self.fc_q(x), self.fc_k(y), self.fc_v(y))
        q, k, v = (z.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2) for z in projected)
        mask = None if key_padding_mask is None else _empty_rows.sdpa_mask(~key_padding_mask[..., None, None, :])
        scale = self.fc_q.out_features**-0.5
        return _empty_rows.attend(q, k, v, mask, scale=scale).transpose(-3, -2).flatten(-2)

    def forward(self, x: Tensor, y: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        return self.feed_forward(self.ln0(self.fc_q(x) + self.attend(x, y, key_padding_mask)))


class _InducedAttention(nn.Module):
    """``x -> MAB_1.attend(x, H)`` with ``H = MAB_0(I, x)``: an ISAB's points attending to their summary by
    ``m`` learned inducing points ``I`` (Lee et al. 2019, eqs. 9-10). Padded points (``bind``) are left out
    of the summary."""

    def __init__(self, dim_in: int, dim: int, num_heads: int, num_inducing: int):
        super().__init__()
        self.inducing = nn.Parameter(nn.init.xavier_uniform_(torch.empty(num_inducing, dim)))
        self.summary = ReferenceMAB(dim, dim_in, dim, num_heads)
        self.mab = ReferenceMAB(dim_in, dim, dim, num_heads)
        self._key_padding_mask: Tensor | None = None

    def bind(self, *, key_padding_mask: Tensor | None = None) -> None:
        """Set the padding mask of the points (True at padding) for the following calls."""
        self._key_padding_mask = key_padding_mask

    def forward(self, x: Tensor) -> Tensor:
        check_padding_mask(self._key_padding_mask, "key_padding_mask", x.shape[:-1], "x", bound=True)
        inducing = self.inducing.expand(*x.shape[:-2], -1, -1)
        return self.mab.attend(x, self.summary(inducing, x, self._key_padding_mask))


def reference_isab(dim_in: int, dim: int, num_heads: int, num_inducing: int) -> tuple[Sublayer, Sublayer]:
    """Lee et al.'s ``ISAB(X) = MAB_1(X, MAB_0(I, X))`` as a block of two sub-layers.

    .. math:: s_1(X) = LN_0\\big(X W_q + b_q + \\mathrm{attend}(X, H)\\big), \\qquad s_2(O) = LN_1\\big(O +
        \\mathrm{ReLU}(O W_o + b_o)\\big)

    (:class:`~neuralode_tf.fields.Sublayer` s; ``s_2`` is the fully-connected layer, whose skip the N-ODE
    Transformer removes). Parameters: the two MABs and ``m d`` inducing points.
    """
    induced = _InducedAttention(dim_in, dim, num_heads, num_inducing)
    return Sublayer(induced, skip=induced.mab.fc_q, norm=induced.mab.ln0), induced.mab.feed_forward


class ReferenceSetTransformer(nn.Module):
    """Kan et al.'s ModelNet40 classifier (Appendix B): Lee et al.'s ISAB encoder, in one of the readings.

    .. math::

        x(0) = P \\text{ (discrete) or } P W_{in} + b_{in} \\text{ (ODE)}, \\qquad
        \\mathrm{logits} = W\\, \\mathrm{flatten}\\big(\\mathrm{PMA}_k(\\mathrm{drop}(x(T)))\\big) + b

    with dropout after PMA as well. ``field="discrete"`` is Lee et al.'s model itself, the baseline:
    ``ISAB(3 -> d)`` then ``ISAB(d -> d)`` on the raw points. A field keeps the width fixed, so the
    continuous readings (``"composed"``: the OT-Transformer; ``"node"``: the N-ODE Transformer) lift
    the points first and compose ``depth`` ISABs ``d -> d``; Kan et al.'s 0.65M (four MABs of
    ``d = 200``) is that count. Blocks are post-norm, so ``"split"`` and ``"parallel"`` do not apply.

    Args:
        num_classes: Number of classes (40).
        in_dim: Coordinates per point.
        dim, num_heads, num_inducing: ``d``, heads, inducing points per ISAB.
        depth: Number of ISABs.
        num_seeds: PMA seeds ``k``; their outputs are concatenated for the head.
        dropout: Before and after PMA (0.5, as ``nn.Dropout()`` in the reference).
        field: The name of a reading of the model's own blocks as continuous depth
            (:data:`~neuralode_tf.models.FIELDS`, :func:`~neuralode_tf.models.stack_encoder`), or a ready-made
            field module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out the arguments that configure the
            own blocks): ``"discrete"`` (default), ``"composed"`` or ``"node"``; the points are lifted to
            ``dim`` for any but ``"discrete"``.
        field_norm: For ``"composed"``: a LayerNorm inside the field, as the released OT code's ``ln_f``.
        **encoder: Solve settings and ``transport_cost`` of :func:`~neuralode_tf.models.stack_encoder`.

    Shapes: as :meth:`~neuralode_tf.models.SetTransformer.forward` (dense points with a
    ``key_padding_mask``, True at padding, or a torch_geometric batch), and as there
    ``forward = forward_head(forward_features(...))``, the features being the pooled seeds.
    """

    def __init__(
        self,
        num_classes: int,
        in_dim: int = 3,
        dim: int = 256,
        num_heads: int = 4,
        num_inducing: int = 16,
        depth: int = 2,
        num_seeds: int = 1,
        *,
        dropout: float = 0.5,
        field: str | nn.Module = "discrete",
        field_norm: bool = False,
        **encoder: Any,
    ):
        super().__init__()
        lifted = field != "discrete"
        self.embed = nn.Linear(in_dim, dim) if lifted else nn.Identity()
        self.in_dim = in_dim
        widths = [dim if lifted or i else in_dim for i in range(depth)]
        blocks = _named_field(field, lambda _: [reference_isab(w, dim, num_heads, num_inducing) for w in widths])
        final_norm = nn.LayerNorm(dim) if field_norm else None
        self.encoder = stack_encoder(field, depth, blocks, final_norm=final_norm, **encoder)
        self.dropout = nn.Dropout(dropout)
        self.seeds = nn.Parameter(nn.init.xavier_uniform_(torch.empty(num_seeds, dim)))
        self.pool = ReferenceMAB(dim, dim, dim, num_heads)
        self.head = nn.Linear(num_seeds * dim, num_classes)

    def forward_features(self, points: Any, key_padding_mask: Tensor | None = None) -> Tensor:
        """The pooled features ``(B, num_seeds, dim)``; padded points never reach the real points or the pooling."""
        points, pad = _dense(points, key_padding_mask)
        if points.shape[-1] != self.in_dim or points.dtype != self.head.weight.dtype:
            raise ValueError(
                f"points must have in_dim={self.in_dim} coordinates of the model's dtype {self.head.weight.dtype}, "
                f"got {points.shape[-1]} of {points.dtype}"
            )
        x = self.encoder(self.embed(points.masked_fill(pad.unsqueeze(-1), 0.0)), key_padding_mask=pad)
        seeds = self.seeds.expand(*x.shape[:-2], -1, -1)
        return self.pool(seeds, self.dropout(x), pad)

    def forward_head(self, features: Tensor) -> Tensor:
        """Logits ``(B, num_classes)`` of the pooled features: dropout, the seeds concatenated, the linear head."""
        return self.head(self.dropout(features).flatten(-2))

    def forward(self, points: Any, key_padding_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; ``points`` and ``key_padding_mask`` as in
        :meth:`SetTransformer.forward_features <neuralode_tf.models.SetTransformer.forward_features>`."""
        return self.forward_head(self.forward_features(points, key_padding_mask))
