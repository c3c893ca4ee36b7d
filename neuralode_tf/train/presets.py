"""Named training presets: a dataset, a model and the loop settings that train it well here.

Most presets run on an offline stand-in dataset; the OT-Transformer paper presets read the paper's data
(:mod:`~neuralode_tf.train.presets_ot`). ``data.*`` and ``model.*`` overrides reach the dataset loader
and the model constructor.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..data import Splits
from ..models import (
    TRANSEVOLVE_VARIANTS,
    Seq2Seq,
    SetTransformer,
    SignalClassifier,
    TextClassifier,
    TransEvolveClassifier,
    TransEvolveSeq2Seq,
    vit_preset,
)
from ._preset import Preset, make_preset
from .presets_ot import OT_PRESETS, OT_VARIANTS

__all__ = ["Preset", "PRESETS", "OT_VARIANTS", "TRANSEVOLVE_LISTOPS_VARIANTS", "EA_VARIANTS", "VARIANTS"]


def _vit(data: Splits, **overrides: Any) -> nn.Module:
    return vit_preset("deit_tiny_digits", num_classes=data.num_classes, **overrides)


def _text(data: Splits, **overrides: Any) -> nn.Module:
    return TextClassifier(len(data.vocab), data.num_classes, **{"dim": 64, "num_heads": 4, "depth": 2, **overrides})


def _signal(data: Splits, **overrides: Any) -> nn.Module:
    return SignalClassifier(data.num_classes, **{"patch": 4, "dim": 64, "num_heads": 4, "depth": 4, **overrides})


def _set(data: Splits, **overrides: Any) -> nn.Module:
    # Eight PMA seeds and a 256-wide rFF: with one seed, cones/pyramids and boxes/cylinders were confused.
    settings = {"num_classes": data.num_classes, "num_seeds": 8, "mlp_hidden": 256, **overrides}
    return SetTransformer.shapes3d(**settings)


def _seq2seq(data: Splits, **overrides: Any) -> nn.Module:
    return Seq2Seq(len(data.vocab), **{"dim": 64, "num_heads": 4, "encoder_depth": 2, "decoder_depth": 2, **overrides})


def _transevolve_settings(variant: str) -> dict[str, Any]:
    if variant not in TRANSEVOLVE_VARIANTS:
        raise ValueError(
            f"unknown variant {variant!r}; valid: 'transformer', {', '.join(map(repr, TRANSEVOLVE_VARIANTS))}"
        )
    return TRANSEVOLVE_VARIANTS[variant]


def _listops(data: Splits, variant: str = "randomFF-2", **overrides: Any) -> nn.Module:
    """ListOps classifiers of Dutta et al.'s comparison: a 6-block pre-norm transformer (``"transformer"``) or a
    TransEvolve variant of :data:`~neuralode_tf.models.TRANSEVOLVE_VARIANTS` (6 layers in 1 or 2 blocks),
    d = 64, 4 heads, mean pooling over the real tokens."""
    size = dict(dim=64, num_heads=4)
    if variant == "transformer":
        return TextClassifier(len(data.vocab), data.num_classes, **{**size, "depth": 6, **overrides})
    settings = {**size, **_transevolve_settings(variant), **overrides}
    return TransEvolveClassifier(len(data.vocab), data.num_classes, **settings)


def _transevolve_seq2seq(data: Splits, variant: str = "randomFF-2", **overrides: Any) -> nn.Module:
    """Encoder-decoders of Dutta et al.'s translation comparison at toy scale: a 6 + 6-block pre-norm transformer
    (``"transformer"``) or a TransEvolve variant (6 layers in 1 or 2 blocks per side), d = 64, 4 heads."""
    size = dict(dim=64, num_heads=4)
    if variant == "transformer":
        return Seq2Seq(len(data.vocab), **{**size, "encoder_depth": 6, "decoder_depth": 6, **overrides})
    return TransEvolveSeq2Seq(len(data.vocab), **{**size, **_transevolve_settings(variant), **overrides})


TRANSEVOLVE_LISTOPS_VARIANTS: dict[str, dict[str, Any]] = {
    name: {"variant": name} for name in ("transformer", *TRANSEVOLVE_VARIANTS)
}
"""The five models of the ListOps and sequence-to-sequence comparisons (Transformer and TransEvolve
randomFF/fullFF-1/-2), as overrides of ``transevolve_listops`` and ``transevolve_reverse``."""


def _ablations(alpha: float, beta: float) -> dict[str, dict[str, Any]]:
    """Vanilla attention, evolving attention (``α``, ``β``, 3x3), and the ablations of Wang et al.
    (2021, Tables 2, 4, 6): no convolution (``β = 0``), no skip (``α = 0``), 1x1 and 5x5 kernels."""
    ea = dict(alpha=alpha, beta=beta, kernel_size=3)
    return {
        "vanilla": dict(field="split", evolving=None),
        "ea": dict(field="evolving", evolving=ea),
        "no_convolution": dict(field="evolving", evolving={**ea, "beta": 0.0}),
        "no_skip": dict(field="evolving", evolving={**ea, "alpha": 0.0}),
        "kernel_1x1": dict(field="evolving", evolving={**ea, "kernel_size": 1}),
        "kernel_5x5": dict(field="evolving", evolving={**ea, "kernel_size": 5}),
    }


EA_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "ea_digits_vit": _ablations(alpha=0.5, beta=1.0),
    "ea_tweets_text": _ablations(alpha=0.4, beta=0.4),
}
"""The models of the evolving-attention ablation (Wang et al. 2021), per preset, as model overrides.

``ea_digits_vit`` uses the paper's image setting ``α = 0.5, β = 1`` (§4.1, ImageNet);
``ea_tweets_text`` the largest values of its text search grid, ``α = β = 0.4`` (§4.2). Not tuned here.
"""


def _ea_vit(data: Splits, **overrides: Any) -> nn.Module:
    """The digits ViT of ``deit_tiny_digits`` (patch 2, d = 48, 4 heads) with 4 sequential blocks, EA by default."""
    model = dict(num_classes=data.num_classes, **EA_VARIANTS["ea_digits_vit"]["ea"])
    return vit_preset("deit_tiny_digits", **{**model, **overrides})


def _ea_text(data: Splits, **overrides: Any) -> nn.Module:
    """The tweets classifier (d = 64, 4 heads) with 4 blocks, EA by default."""
    model = dict(dim=64, num_heads=4, depth=4, **EA_VARIANTS["ea_tweets_text"]["ea"])
    return TextClassifier(len(data.vocab), data.num_classes, **{**model, **overrides})


_PRESETS: dict[str, Preset] = {
    name: make_preset(description, dataset, model, name, **settings)
    for name, description, dataset, model, settings in [
        (
            "vit_digits",
            "DeiT-Ti-like ViT (patch 2, d=48, 4 parallel blocks) on scikit-learn digits",
            "digits",
            _vit,
            dict(epochs=30, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
        ),
        (
            "text_tweets",
            "text classifier (d=64, 2 blocks) on the tweets sentiment corpus, 3 classes",
            "tweets",
            _text,
            dict(epochs=3, batch_size=128, lr=1e-3, weight_decay=0.01, warmup_steps=50),
        ),
        (
            "set_shapes3d",
            "Set Transformer (ISAB width 64, 8 PMA seeds) on generated 3D shapes, 8 classes",
            "shapes3d",
            _set,
            dict(epochs=20, batch_size=64, lr=2e-3, warmup_steps=50, data=dict(num_train=4000, num_test=1000)),
        ),
        (
            "transformer_mnist1d",
            "continuous-depth transformer (patch 4, d=64, 4 blocks) on MNIST-1D, 4,000/1,000 split",
            "mnist1d",
            _signal,
            dict(epochs=60, batch_size=100, lr=1e-3, weight_decay=0.01, warmup_steps=100),
        ),
        (
            "transevolve_listops",
            "TransEvolve (randomFF-2: 2 blocks of depth 3, d=64) on generated ListOps, lengths 16-128",
            "listops",
            _listops,
            dict(epochs=20, batch_size=64, lr=1e-3, weight_decay=0.01, warmup_steps=100),
        ),
        (
            "ea_digits_vit",
            "Evolving-attention ViT (patch 2, d=48, 4 blocks, α=0.5, β=1, 3x3) on scikit-learn digits",
            "digits",
            _ea_vit,
            dict(epochs=30, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
        ),
        (
            "ea_tweets_text",
            "Evolving-attention text classifier (d=64, 4 blocks, α=β=0.4, 3x3) on the tweets corpus",
            "tweets",
            _ea_text,
            dict(epochs=2, batch_size=128, lr=1e-3, weight_decay=0.01, warmup_steps=50, data=dict(max_samples=12000)),
        ),
        (
            "transevolve_reverse",
            "TransEvolve encoder-decoder (randomFF-2: 2 blocks of depth 3 per side, d=64) reversing symbol sequences",
            "reverse",
            _transevolve_seq2seq,
            dict(epochs=20, batch_size=64, lr=1e-3, warmup_steps=50),
        ),
        (
            "seq2seq_reverse",
            "encoder-decoder (d=64, 2+2 blocks) reversing symbol sequences",
            "reverse",
            _seq2seq,
            dict(epochs=20, batch_size=64, lr=1e-3, warmup_steps=50),
        ),
    ]
}

PRESETS: dict[str, Preset] = {**_PRESETS, **OT_PRESETS}
"""Every preset by name (``neuralode-tf train --list``)."""


VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    **OT_VARIANTS,
    "transevolve_listops": TRANSEVOLVE_LISTOPS_VARIANTS,
    "transevolve_reverse": TRANSEVOLVE_LISTOPS_VARIANTS,
    **EA_VARIANTS,
}
"""Model variants by preset, for ``neuralode-tf compare`` and :func:`~neuralode_tf.train.compare_variants`."""
