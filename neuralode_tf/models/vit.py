"""A Vision Transformer whose encoder is a continuous-depth ODE, and the papers' ViTs as presets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from .blocks import _evolving_settings, _transformer_sets, stack_encoder

__all__ = ["ViT", "VIT_PRESETS", "vit_preset"]


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
      ``(B, 1 + num_patches, dim)``, integrated over ``[0, depth]``.

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
        heads: Attention heads (default ``dim // 64``, at least 1: head width 64 as in ViT and DeiT).
        mlp_ratio: MLP hidden width over ``dim`` (default 4).
        field: ``"split"``, ``"parallel"``, ``"composed"``, ``"node"``, ``"evolving"``, ``"discrete"`` (see
            :func:`~neuralode_tf.models.stack_encoder`) or a field module.
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
        **encoder: Settings of :func:`~neuralode_tf.models.stack_encoder`: ``method``, ``steps``,
            ``step_size`` and any other argument of :func:`~neuralode_tf.solve` (``adjoint``,
            ``backend``, ``rtol``, ...); ``t1``, the end of depth-time (default ``depth``, or 1 for
            ``"composed"``/``"node"``); ``transport_cost``, ``λ`` of the kinetic-energy transport
            cost (Kan et al. 2025, eq. 8); ``inner_residuals``, the blocks' skips inside a composed
            field. ``method=None`` is ``"lie_trotter"`` for a field with ``parts`` (a split field)
            and ``"euler"`` otherwise; fixed-grid methods take unit steps on ``[0, depth]`` (one step
            on ``[0, 1]``) unless ``steps`` or ``step_size`` is given.

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
        heads: int | None = None,
        mlp_ratio: float | None = None,
        *,
        field: str | nn.Module = "split",
        num_sets: int | None = None,
        attention_only: bool = False,
        attention: Mapping[str, Any] | None = None,
        field_norm: bool = False,
        evolving: Mapping[str, Any] | None = None,
        **encoder: Any,
    ):
        super().__init__()
        evolving = _evolving_settings(field, evolving)
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if any(side % patch_size for side in self.img_size):
            raise ValueError(f"img_size={self.img_size} must be divisible by patch_size={patch_size}")
        self.in_chans = in_chans
        num_patches = (self.img_size[0] // patch_size) * (self.img_size[1] // patch_size)
        if isinstance(field, nn.Module):
            settings = {
                "heads": heads,
                "mlp_ratio": mlp_ratio,
                "num_sets": num_sets,
                "attention_only": attention_only,
                "attention": attention,
            }
            given = [name for name, value in settings.items() if value is not None and value is not False]
            if given:
                raise ValueError(f"{given} configure the built-in field; with a ready-made field module leave them out")
            sets = None
        else:
            mlp_hidden = round((4.0 if mlp_ratio is None else mlp_ratio) * dim)
            heads = max(dim // 64, 1) if heads is None else heads
            sets = _transformer_sets(
                dim, heads, depth, mlp_hidden, num_sets, attention_only, evolving, attention=attention
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


_SINKFORMERS_MNIST = dict(
    img_size=28,
    patch_size=7,
    in_chans=1,
    num_classes=10,
    depth=1,
    heads=1,
    attention_only=True,
    attention=dict(qkv_bias=False, out_proj=False),
)
_DEIT_TINY = dict(dim=192, depth=12, heads=3)
_CATS_DOGS = dict(
    img_size=224,
    patch_size=16,
    in_chans=3,
    num_classes=2,
    dim=128,
    heads=8,
    mlp_ratio=1.0,
    attention=dict(qkv_bias=False, head_dim=64),
)

VIT_PRESETS: dict[str, dict[str, Any]] = {
    "ot_mnist_baseline": dict(_SINKFORMERS_MNIST, dim=128),
    "ot_mnist_ode": dict(_SINKFORMERS_MNIST, dim=64, field="composed", steps=20, transport_cost=0.01),
    "ot_catsdogs_baseline": dict(_CATS_DOGS, depth=6),
    "ot_catsdogs_ode": dict(_CATS_DOGS, depth=5, field="composed", steps=20, transport_cost=0.01),
    "deit_tiny": dict(_DEIT_TINY, img_size=224, patch_size=16, in_chans=3, num_classes=1000),
    "deit_tiny_cifar100": dict(_DEIT_TINY, img_size=32, patch_size=4, in_chans=3, num_classes=100),
    "deit_tiny_digits": dict(
        img_size=8, patch_size=2, in_chans=1, num_classes=10, dim=48, depth=4, heads=4, field="parallel"
    ),
}
"""Configurations of :class:`ViT` by name, for :func:`vit_preset`.

``ot_mnist_baseline``
    The MNIST ViT of Sander et al. (2022; Sinkformers' ``ViT_only_Att``), baseline of Kan et al.
    (2025, Table 2): 28x28x1 images, patch 7, one attention-only block with one head,
    ``d = k = 128``, ``qkv`` without biases and no output projection (lucidrains' rule for one head
    of width ``d``), one discrete block: 59,658 parameters. Kan et al.'s 93k is 92,938: Sinkformers'
    model also builds a ``FeedForward(128, 128)`` (33,280 parameters) that its forward never calls.
``ot_mnist_ode``
    Kan et al.'s OT-Transformer (Appendix B): the same with ``d = k = 64``, the block as one composed
    field on ``[0, 1]`` with 20 Euler steps and ``λ = 0.01``: 17,546 parameters, their 18k.
``ot_catsdogs_baseline``, ``ot_catsdogs_ode``
    Kan et al.'s Cats & Dogs ViTs (Appendix B, after Sinkformers' ``trainer_cats_and_dogs.py``):
    224x224x3, patch 16, ``d = 128``, 8 heads of ``k = 64`` (``qkv`` without biases), MLP width 128;
    the baseline has 6 discrete blocks, the OT-Transformer 5 blocks composed into one field with
    20 Euler steps on ``[0, 1]`` and ``λ = 0.01``. Their blocks have 1,774,848 and 1,479,040
    parameters: Table 3's 1.77M and 1.48M.
``deit_tiny``
    DeiT-Ti (Touvron et al. 2021): 224x224x3, patch 16, ``d = 192``, depth 12, 3 heads, MLP ratio 4,
    split field, so the discrete DeiT-Ti stack (without distillation token).
``deit_tiny_cifar100``
    DeiT-Ti on CIFAR-100 at its own resolution: 32x32x3, patch 4, 100 classes. The rows of Zhong
    et al. (2022, Table 1) are overrides: ``field="parallel"`` (their model), ``num_sets=6, 4, 3, 2, 1``,
    ``method="rk4"``. Their parameter counts (5.5M ... 0.7M) are those of
    ``vit_preset("deit_tiny", num_classes=100, ...)``, i.e. CIFAR-100 resized to 224x224.
``deit_tiny_digits``
    Zhong et al.'s parallel model scaled down to scikit-learn's 8x8x1 digits: patch 2 (16 patches),
    ``d = 48``, depth 4, 4 heads, ``field="parallel"``.
"""


def vit_preset(name: str, **overrides: Any) -> ViT:
    """The :class:`ViT` of the preset ``name`` in :data:`VIT_PRESETS`, with keyword ``overrides``.

    Example: ``vit_preset("deit_tiny_cifar100", field="parallel", num_sets=6, method="rk4")``.
    """
    if name not in VIT_PRESETS:
        raise ValueError(f"unknown ViT preset {name!r}; valid: {', '.join(map(repr, VIT_PRESETS))}")
    return ViT(**{**VIT_PRESETS[name], **overrides})
