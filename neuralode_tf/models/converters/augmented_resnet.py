"""AA-ResNet (Bello et al. 2019) and EA-AA-ResNet (Wang et al. 2021, §4.1) built on timm's ResNets (needs ``timm``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torch import nn

from ...nn.aa_conv import AugmentedConv2d, LogitChain

__all__ = ["AA_RESNET_DEPTHS", "aa_resnet", "augmented_convolutions"]

AA_RESNET_DEPTHS: dict[int, float] = {18: 0.2, 34: 0.2, 50: 0.1, 101: 0.1, 152: 0.1}
"""Depth -> default value share ``υ = d_v / F_out`` (and ``κ = 2υ``): 0.2 for the basic-block ResNets, 0.1 for
the bottleneck ones. With these, 8 heads and at least 20 key dimensions per head, the parameter counts are those of
Wang et al.'s Table 1 (and Bello et al.'s Table 3) at their printed precision: 20.7M, 25.8M, 45.4M, 61.6M."""


def aa_resnet(
    depth: int,
    evolving: bool = False,
    num_classes: int = 1000,
    *,
    image_size: int | tuple[int, int] = 224,
    in_chans: int = 3,
    kappa: float | None = None,
    upsilon: float | None = None,
    num_heads: int = 8,
    min_key_dim_per_head: int = 20,
    stages: Sequence[int] = (2, 3, 4),
    pooled_stages: Sequence[int] = (2,),
    alpha: float = 0.5,
    beta: float = 1.0,
    kernel_size: int = 3,
    layers: Sequence[int] | None = None,
    channels: Sequence[int] | None = None,
    small_images: bool = False,
) -> nn.Module:
    """timm's ResNet-``depth`` with its 3x3 convolutions attention-augmented, and with ``evolving=True`` the
    attention logits evolving from layer to layer (EA-AA-ResNet, Wang et al. 2021, §4.1).

    **Augmentation** (Bello et al. 2019's protocol for ResNets): every 3x3 convolution of the ``stages``
    (1-4; the last three by default) — both of a basic block, the middle one of a bottleneck — becomes an
    :class:`~neuralode_tf.nn.AugmentedConv2d` with ``num_heads`` heads, ``d_v = υ F_out`` and
    ``d_k = max(κ F_out, min_key_dim_per_head · N_h)`` channels (each rounded to a multiple of ``N_h``;
    Bello et al. ask for "a minimum of 20 dimensions per head for the keys"), ``F_out`` being the
    convolution's output channels, and 2D relative positions. The defaults, ``κ = 2υ`` with ``υ`` from
    :data:`AA_RESNET_DEPTHS` (0.2 for ResNet-18/34, 0.1 for ResNet-50/101/152), 8 heads and 20 key dimensions
    per head, give Table 1's parameter counts at the printed precision (a test). Bello et al. state
    ``κ = 2υ = 0.2`` and 8 heads; none of the settings with ``υ = 0.1`` that we searched (κ, heads, stages,
    convolutions, rounding) gives ResNet-34's 20.7M. The stages of ``pooled_stages`` (stage 2 by default) attend
    on a 2x2-pooled map (``pool=2``), as the released EA-ResNet-50 code does in its first augmented stage, so that
    its maps (14 x 14 on 224 pixels) chain into the next stage's.

    **Evolving attention**: each augmented convolution mixes the logits of the previous one into its own by
    eq. 4 (:class:`~neuralode_tf.nn.AugmentedConv2d`), where their shapes match, as the released code does
    (the paper is silent): on 224-pixel images the maps of stages 2 and 3 (196 x 196) form one chain and
    stage 4 (49 x 49) starts another. ``α = 0.5, β = 1`` is the paper's EA-AA-ResNet-34 setting (§4.1); the
    appendix with the other depths' settings is not in our copy, so they default to the same. The chain
    restarts at every forward pass. With ``α = β = 0`` the model computes the AA-ResNet with the same weights.

    Args:
        depth: 18, 34, 50, 101 or 152 (timm's ``resnet{depth}``: basic blocks up to 34, bottlenecks above).
        evolving: EA-AA-ResNet instead of AA-ResNet.
        num_classes: Classes of the head.
        image_size: The input size the relative position embeddings are built for.
        in_chans: Input channels.
        kappa, upsilon: ``κ = d_k / F_out`` and ``υ = d_v / F_out`` (default: from :data:`AA_RESNET_DEPTHS`).
        num_heads: ``N_h``.
        min_key_dim_per_head: The smallest ``d_k / N_h``.
        stages: The stages (1-4) whose 3x3 convolutions are augmented.
        pooled_stages: Stages whose attention runs on a 2x2-pooled map.
        alpha, beta, kernel_size: Evolving attention's ``α``, ``β`` and the kernel of its convolution (eq. 4).
        layers: Blocks per stage instead of the depth's (for reduced models).
        channels: Stage widths instead of ``(64, 128, 256, 512)`` (needs timm >= 1.0.9).
        small_images: He et al.'s (2016, §4.2) stem for small images: a 3x3 convolution of stride 1 and no
            max-pooling, instead of the 7x7 convolution of stride 2 and the max-pooling.

    Returns:
        The timm ``ResNet``, its convolutions replaced; ``model(images)`` is its usual forward.
    """
    from timm.models.resnet import BasicBlock, Bottleneck, ResNet

    if depth not in AA_RESNET_DEPTHS:
        raise ValueError(f"depth must be one of {sorted(AA_RESNET_DEPTHS)}, got {depth!r}")
    if not set(stages) <= {1, 2, 3, 4} or not set(pooled_stages) <= {1, 2, 3, 4}:
        raise ValueError(f"stages and pooled_stages are numbers 1-4, got {tuple(stages)} and {tuple(pooled_stages)}")
    upsilon = AA_RESNET_DEPTHS[depth] if upsilon is None else upsilon
    kappa = 2 * upsilon if kappa is None else kappa
    block = BasicBlock if depth < 50 else Bottleneck
    default_layers = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
    options: dict[str, Any] = {"num_classes": num_classes, "in_chans": in_chans}
    if channels is not None:
        options["channels"] = tuple(channels)
    model: Any = ResNet(block, tuple(layers or default_layers[depth]), **options)  # type: ignore[arg-type]
    if small_images:
        model.conv1 = nn.Conv2d(in_chans, model.conv1.out_channels, 3, padding=1, bias=False)
        model.maxpool = nn.Identity()
    chain = LogitChain() if evolving else None
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    stem = _stem_size(model, (height, width))
    previous: tuple[int, int] | None = None
    for stage, blk, name, conv, size in _three_by_three(model, stem):
        if stage not in stages:
            continue
        pool = 2 if stage in pooled_stages else 1
        grid = (-(-size[0] // pool), -(-size[1] // pool))
        replacement = AugmentedConv2d(
            conv,
            key_dim=max(_multiple(kappa * conv.out_channels, num_heads), min_key_dim_per_head * num_heads),
            value_dim=max(_multiple(upsilon * conv.out_channels, num_heads), num_heads),
            num_heads=num_heads,
            size=grid,
            pool=pool,
            evolving=(alpha, beta, kernel_size) if evolving else None,
            chain=chain,
            starts_chain=previous is None,
            has_evolution=evolving and previous == grid,
        )
        setattr(blk, name, replacement)
        previous = grid
    return model


def augmented_convolutions(model: nn.Module) -> list[AugmentedConv2d]:
    """The model's :class:`~neuralode_tf.nn.AugmentedConv2d` modules, in forward order."""
    return [m for m in model.modules() if isinstance(m, AugmentedConv2d)]


def _multiple(value: float, base: int) -> int:
    return base * round(value / base)


def _conv_size(size: tuple[int, int], conv: nn.Module) -> tuple[int, int]:
    """The spatial output size of a convolution or pooling layer (kernel, stride, padding, dilation)."""

    def pair(v: Any) -> tuple[int, int]:
        return (v, v) if isinstance(v, int) else tuple(v)

    k, s, p, d = (pair(getattr(conv, a, 1)) for a in ("kernel_size", "stride", "padding", "dilation"))
    return tuple((n + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i, n in enumerate(size))  # type: ignore[return-value]


def _stem_size(model: Any, size: tuple[int, int]) -> tuple[int, int]:
    """The size after timm's stem, ``conv1`` (a convolution) then ``maxpool`` (or an identity)."""
    if not isinstance(model.conv1, nn.Conv2d):
        raise TypeError("aa_resnet reads timm ResNets with the plain stem (one conv1 convolution)")
    size = _conv_size(size, model.conv1)
    return size if isinstance(model.maxpool, nn.Identity) else _conv_size(size, model.maxpool)


def _three_by_three(
    model: nn.Module, size: tuple[int, int]
) -> Iterator[tuple[int, nn.Module, str, nn.Conv2d, tuple[int, int]]]:
    """``(stage, block, attribute, conv, output size)`` of every 3x3 convolution of the stages, in forward order."""
    for stage in range(1, 5):
        for blk in getattr(model, f"layer{stage}"):
            for name in ("conv1", "conv2"):
                conv = getattr(blk, name)
                if isinstance(conv, nn.Conv2d) and conv.kernel_size == (3, 3):
                    size = _conv_size(size, conv)
                    yield stage, blk, name, conv, size
