"""Continuous-depth versions of timm Vision Transformers, sharing the original model's parameters."""

from __future__ import annotations

from typing import Any, Protocol, cast

from torch import Tensor, nn

from ...nn import timm_block_branches
from ..readings.stack import FIELDS, stack_encoder

__all__ = ["ContinuousVisionTransformer", "continuous_from_timm"]

_REQUIRED = ("patch_embed", "_pos_embed", "patch_drop", "norm_pre", "blocks", "norm", "forward_head")


class _VisionTransformer(Protocol):
    """The parts of a timm ``VisionTransformer`` that are used (:data:`_REQUIRED`)."""

    patch_embed: nn.Module
    patch_drop: nn.Module
    norm_pre: nn.Module
    blocks: nn.Sequential
    norm: nn.Module

    def _pos_embed(self, x: Tensor) -> Tensor: ...

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor: ...


def _vision_transformer(model: nn.Module) -> _VisionTransformer:
    """``model``, checked to have the parts of a timm ``VisionTransformer`` that are used."""
    missing = [name for name in _REQUIRED if not hasattr(model, name)]
    if missing:
        raise TypeError(
            f"{type(model).__name__} is not a timm VisionTransformer: it lacks {missing} "
            "(see timm.models.vision_transformer.VisionTransformer)"
        )
    return cast(_VisionTransformer, model)


class ContinuousVisionTransformer(nn.Module):
    """A timm ``VisionTransformer`` whose block stack is replaced by a :class:`~neuralode_tf.ContinuousDepth`.

    ``forward_features`` is timm's own, with ``encoder`` in place of ``blocks``: ``patch_embed``,
    ``_pos_embed`` (class/register tokens and positions), ``patch_drop``, ``norm_pre``, the
    encoder, ``norm``; ``forward_head`` is the model's (pooling, ``fc_norm``, head). Build it with
    :func:`continuous_from_timm`.

    Attributes:
        vit: The timm model. Its ``blocks`` stay in place, sharing their parameters with the
            encoder's field, so ``vit(images)`` still runs the discrete stack; ``parameters()``
            yields every shared tensor once (``state_dict()`` lists the block weights under both
            names).
        encoder: The continuous-depth module that replaces ``vit.blocks`` (a
            :class:`~neuralode_tf.ContinuousDepth`, or a :class:`~neuralode_tf.models.NODETransformer`).
    """

    def __init__(self, vit: nn.Module, encoder: nn.Module):
        super().__init__()
        self.vit = _vision_transformer(vit)
        self.encoder = encoder

    def forward_features(self, images: Tensor) -> Tensor:
        vit = self.vit
        x = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(images))))
        return vit.norm(self.encoder(x))

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        return self.vit.forward_head(x, pre_logits=pre_logits)

    def forward(self, images: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(images))


def continuous_from_timm(
    model: nn.Module,
    field: str = "split",
    *,
    method: str | None = None,
    steps: int | None = None,
    step_size: float | None = None,
    **solve_options: Any,
) -> ContinuousVisionTransformer:
    """A continuous-depth model from a timm ``VisionTransformer`` (any ``img_size``, ``patch_size``, pooling).

    Block ``m`` of the ``D`` blocks gives its attention and MLP branches ``G_m``, ``F_m``
    (:func:`~neuralode_tf.nn.timm_block_branches`, no copy), and the stack becomes the ODE

    .. math:: \\frac{dx}{dt} = G_{\\lfloor t \\rfloor}(x) + F_{\\lfloor t \\rfloor}(x), \\qquad t \\in [0, D]

    (Zhong et al. 2022, eq. 3), a :class:`~neuralode_tf.fields.WeightSharedField` of ``D`` layers, each
    a :class:`~neuralode_tf.fields.SplitField` (``field="split"``) or
    :class:`~neuralode_tf.fields.ParallelField` (``field="parallel"``) of one block's branches. With
    ``field="split"`` and the default ``method`` (``lie_trotter`` with one Euler step per block) the
    logits equal the original model's; ``field="parallel"`` with the default (``euler``) is Zhong et
    al.'s parallel block ``x + G_m(x) + F_m(x)`` on the same weights; other methods and step counts
    integrate the same ODE (e.g. ``method="rk4"``).

    ``field="composed"`` makes the whole stack one autonomous field on ``[0, 1]``, the
    OT-Transformer of Kan et al. (2025): ``dx/dt = B_D ∘ ... ∘ B_1(x)`` with each block's own skips
    (:class:`~neuralode_tf.fields.ComposedField`; ``inner_residuals=False`` drops them), and the
    model's ``norm`` stays after the encoder. One Euler step (the default) gives
    ``norm(x + B_D ∘ ... ∘ B_1(x))``; pass ``steps=20`` for Kan et al.'s grid and
    ``transport_cost=λ`` for their regulariser. ``field="node"`` is their N-ODE Transformer
    baseline (:class:`~neuralode_tf.models.NODETransformer`): one ODE per block without its outer
    skip, ``dx/dt = F_m(x + G_m(x))``.

    Drop-path is left out of the field (:func:`~neuralode_tf.nn.timm_block_branches`); dropout inside
    the blocks stays, so use ``eval()`` or zero dropout when an adaptive method integrates it.

    Args:
        model: A timm ``VisionTransformer`` whose blocks are timm ``Block``\\ s (or share their layout).
            It is not modified; the result trains its parameters.
        field: ``"split"``, ``"parallel"``, ``"composed"`` or ``"node"``.
        method, steps, step_size, **solve_options: Settings of :func:`~neuralode_tf.models.stack_encoder`:
            solve settings (``gradient``, ``rtol``, ...) and ``inner_residuals``, ``t1``,
            ``transport_cost``. ``method=None`` is ``"lie_trotter"`` for ``"split"`` and ``"euler"``
            otherwise; fixed-grid methods take one step per block (``"split"``, ``"parallel"``) or
            one step over ``[0, 1]`` (``"composed"``, ``"node"``) unless ``steps`` or ``step_size`` is given.

    Raises:
        TypeError: ``model`` is not a timm ``VisionTransformer``, or a block is not a timm ``Block``
            (e.g. ``ParallelScalingBlock``).
        ValueError: an unknown ``field``.
    """
    vit = _vision_transformer(model)
    if field not in FIELDS:
        raise ValueError(f"unknown field {field!r}; valid: {', '.join(map(repr, FIELDS))}")
    branches = [timm_block_branches(block) for block in vit.blocks]
    settings = dict(method=method, steps=steps, step_size=step_size, **solve_options)
    encoder = stack_encoder(field, len(branches), branches, **settings)
    return ContinuousVisionTransformer(model, encoder)
