"""A Vision Transformer whose encoder is a continuous-depth ODE (the papers' ViTs are named in
:mod:`~neuralode_tf.models.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..readings.blocks import _evolving_settings, _transformer_sets
from ..readings.stack import _named_field, stack_encoder

__all__ = ["ViT"]


class ViT(nn.Module):
    """Vision Transformer (Dosovitskiy et al. 2021) with a continuous-depth encoder.

    .. math::

        x(0) = [x_{cls};\\, P(I)] + E_{pos}, \\qquad \\frac{dx}{dt} = f(t, x) \\text{ on } [0, D],
        \\qquad \\mathrm{logits} = W\\, \\mathrm{LN}(x(D))_{cls} + b

    where ``P`` is the patch embedding (a convolution with kernel and stride ``patch_size``, i.e. a
    linear map of each flattened patch), ``x_cls`` the learned class token and ``E_pos`` the learned
    positions. The encoder is a :class:`~neuralode_tf.ContinuousDepth` of the field ``f``:

    * ``field="split"`` with the default ``method`` (``lie_trotter``) and unit steps computes exactly
      the discrete pre-norm ViT/DeiT stack of ``depth`` blocks ``x + G(x)``, then ``+ F(.)``;
    * ``field="parallel"`` with the default ``method`` (``euler``) and unit steps is the parallel
      block of Zhong et al. (2022, eq. 4), ``x + G(x) + F(x)``;
    * ``field="composed"`` is the OT-Transformer (Kan et al. 2025): all blocks composed into one
      autonomous field on ``[0, 1]``, e.g. with ``steps=20`` and ``transport_cost=0.01``;
      ``field="node"`` is their N-ODE Transformer baseline, one ODE per block;
    * any other ``method``, ``steps`` or ``step_size`` of :func:`~neuralode_tf.solve` integrates the
      same ODE differently (e.g. ``method="rk4"``, Zhong et al. Table 1; 20 Euler steps on
      ``[0, 1]``, Kan et al. 2025);
    * ``num_sets=k`` builds the ``depth`` layers from ``k`` parameter sets (weight sharing);
    * ``field`` may also be a ready-made field module ``(t, x) -> dx/dt`` on tokens
      ``(B, 1 + num_patches, dim)``.

    Parameters: a shared set is counted once by ``sum(p.numel() for p in model.parameters())``. With the
    default attention each set has ``4d² + 6d`` attention parameters (LayerNorm, ``qkv``, output projection) plus
    ``2dh + h + 3d`` MLP parameters (hidden width ``h``), so the encoder has ``k`` times that; the rest
    is ``(C p² + 1) d`` (patches), ``(N + 2) d`` (class token, ``N + 1`` positions), ``2d`` (final
    norm) and ``(d + 1) n_cls`` (head).

    Args:
        img_size: Image height and width (an int for square images); each divisible by ``patch_size``.
        patch_size: Side of the square patches.
        in_chans: Image channels ``C``.
        num_classes: Number of logits.
        dim: Token width ``d``.
        depth: Number of layers ``D`` (the length of depth-time).
        num_heads: Attention heads (default ``dim // 64``, at least 1: head width 64 as in ViT and DeiT).
        mlp_hidden: Hidden width of the MLPs (default ``4 * dim``).
        field: The name of a reading of the model's own blocks as continuous depth
            (:data:`~neuralode_tf.models.FIELDS`, :func:`~neuralode_tf.models.stack_encoder`), or a ready-made
            field module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out the arguments that configure the
            own blocks): ``"split"``, ``"parallel"``, ``"composed"``, ``"node"``, ``"evolving"``, ``"discrete"``.
        num_sets: Independent parameter sets (default ``depth``); must divide ``depth``.
        attention_only: Blocks without the MLP branch.
        attention: Further keywords of every :class:`~neuralode_tf.nn.AttentionBranch`: ``head_dim``,
            ``qkv_bias``, ``out_proj`` (e.g. Sinkformers' ViTs: ``{"qkv_bias": False, "head_dim": 64}``).
        field_norm: For ``field="composed"``: a LayerNorm inside the field after the composition, as the
            released OT-Transformer code's ``ln_f`` (:class:`~neuralode_tf.fields.ComposedField`); the
            model's own final norm stays before the head.
        evolving: For ``field="evolving"`` (EA-ViT, Wang et al. 2021): settings of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es, e.g. ``{"alpha": 0.5, "beta": 0.5,
            "kernel_size": 3}`` (default: the branch's defaults).
        norm: Where each block's LayerNorms sit (:data:`~neuralode_tf.models.readings.blocks.NORM_PLACEMENTS`):
            ``"pre"`` (default) each branch normalises its input, ``x + G(LN_1 x) + F(LN_2 x)`` in a parallel block
            (Zhong et al. 2022, Figure 2a); ``"shared"`` one norm for both, ``x + G(LN x) + F(LN x)``; ``"output"`` each
            branch normalises its output, ``x + LN_1(G(x)) + LN_2(F(x))``; ``"post"`` a norm after each residual sum
            (Vaswani et al. 2017), no field, so ``field="discrete"`` only; ``"none"``. The paper's text does not say
            what its Figure 2's placements (b) and (c) are; ``"shared"`` and ``"output"`` are this library's choice.
        dropout: Dropout in training on the attention weights, the attention output and the MLP output of every
            branch (:class:`~neuralode_tf.nn.AttentionBranch`, :class:`~neuralode_tf.nn.MLPBranch`), drawn afresh at
            every evaluation of the field (Zhong et al. 2022, Table 2; DeiT's ``drop_rate`` also drops the
            embeddings and the MLP's hidden layer, this does not).
        drop_path: Stochastic depth (Huang et al. 2016): the drop probability of the last layer's branches, rising
            linearly from 0 at the first (:class:`~neuralode_tf.fields.StochasticDepth`, DeiT's ``drop_path_rate``);
            ``field="split"`` or ``"parallel"`` only, where depth-time counts the layers. With the default unit steps
            it is the discrete stack's stochastic depth.
        **encoder: Settings of :func:`~neuralode_tf.models.stack_encoder`: ``method``, ``steps``,
            ``step_size`` and any other argument of :func:`~neuralode_tf.solve` (``gradient``,
            ``backend``, ``rtol``, ...); ``t1``, the end of depth-time (default ``depth``, or 1 for
            ``"composed"``/``"node"``); ``transport_cost``, ``λ`` of the kinetic-energy transport
            cost (Kan et al. 2025, eq. 8); ``inner_residuals``, the blocks' skips inside a composed
            field. ``method=None`` goes by the kind of field: ``"lie_trotter"`` for fields with parts
            (split, evolving), ``"euler"`` for parallel blocks and the others; fixed-grid methods take unit
            steps on ``[0, depth]`` (one step on ``[0, 1]``) unless ``steps`` or ``step_size`` is given.

    Shapes:
        ``images``: ``(B, in_chans, H, W)`` with ``(H, W)`` equal to ``img_size``. Logits: ``(B, num_classes)``.
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        num_classes: int = 1000,
        dim: int = 192,
        depth: int = 12,
        num_heads: int | None = None,
        *,
        mlp_hidden: int | None = None,
        field: str | nn.Module = "split",
        num_sets: int | None = None,
        attention_only: bool = False,
        attention: Mapping[str, Any] | None = None,
        field_norm: bool = False,
        evolving: Mapping[str, Any] | None = None,
        norm: str = "pre",
        dropout: float = 0.0,
        drop_path: float = 0.0,
        **encoder: Any,
    ):
        super().__init__()
        evolving = _evolving_settings(field, evolving)
        if drop_path and field not in ("split", "parallel"):
            raise ValueError(
                f"drop_path reads the layer from depth-time, one unit per layer: field 'split' or 'parallel', "
                f"not {field!r}"
            )
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if any(side % patch_size for side in self.img_size):
            raise ValueError(f"img_size={self.img_size} must be divisible by patch_size={patch_size}")
        self.in_chans = in_chans
        num_patches = (self.img_size[0] // patch_size) * (self.img_size[1] // patch_size)
        heads = max(dim // 64, 1) if num_heads is None else num_heads
        sets = _named_field(
            field,
            lambda _: _transformer_sets(
                dim,
                heads,
                depth,
                mlp_hidden,
                num_sets,
                attention_only,
                evolving,
                norm=norm,
                attention={**dict(attention or {}), "dropout": dropout} if dropout else attention,
                mlp=dict(dropout=dropout) if dropout else None,
                drop_path=drop_path,
            ),
            num_heads=num_heads,
            mlp_hidden=mlp_hidden,
            num_sets=num_sets,
            attention_only=attention_only,
            attention=attention,
            norm=None if norm == "pre" else norm,
            dropout=dropout or None,
            drop_path=drop_path or None,
        )
        self.patch_embed = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        final_norm = nn.LayerNorm(dim) if field_norm else None
        self.encoder = stack_encoder(field, depth, sets, final_norm=final_norm, **encoder)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward_features(self, images: Tensor) -> Tensor:
        """Tokens ``LN(x(D))``, shaped ``(B, 1 + num_patches, dim)``; the class token comes first."""
        return self.norm(self.encoder(self.tokens(images)))

    def tokens(self, images: Tensor) -> Tensor:
        """The encoder's initial condition ``x(0)``: class token and patch embeddings plus positions,
        ``(B, 1 + num_patches, dim)`` (to solve ``self.encoder.field`` yourself, e.g. with another method)."""
        expected = (self.in_chans, *self.img_size)
        if images.ndim != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"expected images of shape (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}"
            )
        if images.dtype != self.patch_embed.weight.dtype:
            raise TypeError(f"images must have the model's dtype {self.patch_embed.weight.dtype}, got {images.dtype}")
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        return torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Logits from the class token of ``forward_features``' output (its features with ``pre_logits``)."""
        x = x[:, 0]
        return x if pre_logits else self.head(x)

    def forward(self, images: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(images))
