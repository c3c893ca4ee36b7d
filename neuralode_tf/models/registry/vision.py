"""Vision Transformers: DeiT-Ti, Zhong et al.'s CIFAR-100 and digits models, and Kan et al.'s MNIST and
Cats & Dogs ViTs with their stand-ins, registered on import."""

from __future__ import annotations

from ..frontends.vit import ViT
from ._registry import register_model

# Vision Transformers ------------------------------------------------------------------------------------------

_DEIT_TINY = dict(dim=192, depth=12, num_heads=3)
_DIGITS_VIT = dict(
    img_size=8, patch_size=2, in_chans=1, num_classes=10, dim=48, depth=4, num_heads=4, field="parallel"
)
_SINKFORMERS_MNIST = dict(
    img_size=28,
    patch_size=7,
    in_chans=1,
    num_classes=10,
    depth=1,
    num_heads=1,
    attention_only=True,
    attention=dict(qkv_bias=False, out_proj=False),
)
_CATS_DOGS = dict(
    img_size=224, patch_size=16, in_chans=3, num_classes=2, dim=128, num_heads=8, mlp_hidden=128,
    attention=dict(qkv_bias=False, head_dim=64),
)
_OT = dict(field="composed", transport_cost=0.01, steps=20)  # Kan et al.'s ViTs: one field on [0, 1], 20 Euler steps

register_model(
    "deit_tiny", ViT, "DeiT-Ti (Touvron et al. 2021): 224x224x3, patch 16, d = 192, depth 12, 3 heads, MLP ratio 4, "
    "split field, so the discrete DeiT-Ti stack (without distillation token).",
    **_DEIT_TINY, img_size=224, patch_size=16, in_chans=3, num_classes=1000,
)
register_model(
    "deit_tiny_cifar100", ViT, "DeiT-Ti on CIFAR-100 at its own resolution: 32x32x3, patch 4, 100 classes. The rows "
    "of Zhong et al. (2022, Table 1) are overrides: field='parallel' (their model), num_sets=6, 4, 3, 2, 1, "
    "method='rk4'. Their parameter counts (5.5M ... 0.7M) are those of deit_tiny with num_classes=100, i.e. "
    "CIFAR-100 resized to 224x224.",
    **_DEIT_TINY, img_size=32, patch_size=4, in_chans=3, num_classes=100,
)
register_model(
    "vit_digits", ViT, "Zhong et al.'s parallel model scaled down to scikit-learn's 8x8x1 digits: patch 2 "
    "(16 patches), d = 48, depth 4, 4 heads, field='parallel'.",
    **_DIGITS_VIT,
)
register_model(
    "ea_vit_digits", ViT, "vit_digits with 4 sequential evolving-attention blocks (Wang et al. 2021) at the "
    "paper's image setting α = 0.5, β = 1 (§4.1, ImageNet), 3x3 convolutions.",
    **{**_DIGITS_VIT, "field": "evolving", "evolving": dict(alpha=0.5, beta=1.0, kernel_size=3)},
)
register_model(
    "ot_mnist_baseline", ViT, "The MNIST ViT of Sander et al. (2022; Sinkformers' ViT_only_Att), baseline of Kan et "
    "al. (2025, Table 2): 28x28x1, patch 7, one attention-only block with one head, d = k = 128, qkv without biases "
    "and no output projection, one discrete block: 59,658 parameters. Kan et al.'s 93k is 92,938: Sinkformers' "
    "model also builds a FeedForward(128, 128) (33,280 parameters) that its forward never calls.",
    **_SINKFORMERS_MNIST, dim=128,
)
register_model(
    "ot_mnist_ode", ViT, "Kan et al.'s MNIST OT-Transformer (Appendix B): ot_mnist_baseline with d = k = 64, the "
    "block as one composed field on [0, 1] with 20 Euler steps and λ = 0.01: 17,546 parameters, their 18k.",
    **_SINKFORMERS_MNIST, dim=64, **_OT,
)
register_model(
    "ot_mnist_ode_digits", ViT, "ot_mnist_ode with patch 2 on scikit-learn's 8x8x1 digits (the ot_mnist_digits "
    "stand-in).",
    **{**_SINKFORMERS_MNIST, "img_size": 8, "patch_size": 2}, dim=64, **_OT,
)
register_model(
    "ot_catsdogs_baseline", ViT, "Kan et al.'s Cats & Dogs ViT (Appendix B, after Sinkformers' "
    "trainer_cats_and_dogs.py): 224x224x3, patch 16, d = 128, 8 heads of k = 64 (qkv without biases), MLP width "
    "128, 6 blocks (1,774,848 parameters: Table 3's 1.77M).",
    **_CATS_DOGS, depth=6,
)
register_model(
    "ot_catsdogs_ode", ViT, "Kan et al.'s Cats & Dogs OT-Transformer: ot_catsdogs_baseline with 5 blocks composed "
    "into one field, 20 Euler steps on [0, 1], λ = 0.01 (blocks: 1,479,040 parameters, Table 3's 1.48M).",
    **_CATS_DOGS, depth=5, **_OT,
)
