"""Small timm ResNets for the AA-ResNet tests: a reduced configuration and norms that make every branch matter."""

from __future__ import annotations

import torch
from torch import nn

SMALL = dict(
    num_classes=5,
    image_size=8,
    layers=(2, 2, 1, 1),
    channels=(8, 16, 32, 64),
    small_images=True,
    num_heads=2,
    min_key_dim_per_head=2,
    stages=(1, 2),
    pooled_stages=(),
)
"""``aa_resnet`` settings of a reduced model on 8x8 images: stages 1 (8x8 maps) and 2 (4x4) augmented."""


def randomise_norms(model: nn.Module) -> nn.Module:
    """timm zero-initialises each block's last norm (its residual branch starts at 0): make the branches matter."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            with torch.no_grad():
                module.weight.uniform_(0.3, 1.0, generator=generator)
                module.bias.normal_(0, 0.1, generator=generator)
                module.running_mean.normal_(0, 0.1, generator=generator)
                module.running_var.uniform_(0.5, 2.0, generator=generator)
    return model
