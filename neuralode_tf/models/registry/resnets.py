"""Attention-augmented ResNets: Wang et al.'s ImageNet AA- and EA-AA-ResNets and the reduced digits models, registered
on import."""

from __future__ import annotations

from ..converters.augmented_resnet import AA_RESNET_DEPTHS, aa_resnet
from ._registry import register_model

for _depth in (34, 50, 101, 152):
    register_model(
        f"aa_resnet{_depth}",
        aa_resnet,
        f"AA-ResNet-{_depth} (Bello et al. 2019; Wang et al. 2021, Table 1) on 224x224 ImageNet: timm's resnet{_depth} "
        f"with its 3x3 convolutions in stages 2-4 attention-augmented "
        f"(8 heads, κ = 2υ = {2 * AA_RESNET_DEPTHS[_depth]:g}).",
        depth=_depth,
    )
    register_model(
        f"ea_aa_resnet{_depth}",
        aa_resnet,
        f"EA-AA-ResNet-{_depth} (Wang et al. 2021, §4.1, Table 1): aa_resnet{_depth} with evolving attention, "
        "α = 0.5, β = 1, 3x3 (the paper's ResNet-34 setting).",
        depth=_depth,
        evolving=True,
    )
_DIGITS_RESNET = dict(
    depth=18,
    layers=(2, 2, 2, 2),
    channels=(16, 32, 64, 128),
    small_images=True,
    image_size=8,
    in_chans=1,
    num_classes=10,
    num_heads=4,
    min_key_dim_per_head=4,
    stages=(1, 2, 3),
    pooled_stages=(),
)
register_model(
    "aa_resnet_digits",
    aa_resnet,
    "Reduced AA-ResNet for 8x8 digits: basic blocks (2, 2, 2, 2) of widths 16-128, a 3x3 stride-1 stem, the 3x3 "
    "convolutions of stages 1-3 (8x8, 4x4 and 2x2 maps) augmented with 4 heads, κ = 2υ = 0.4, 4 key dimensions per "
    "head at least.",
    **_DIGITS_RESNET,
)
register_model(
    "ea_aa_resnet_digits",
    aa_resnet,
    "aa_resnet_digits with evolving attention at the paper's image setting α = 0.5, β = 1, 3x3 (§4.1).",
    **_DIGITS_RESNET,
    evolving=True,
)
