"""Named training presets: a dataset, a model and the loop settings that train it well here.

Each preset runs on an offline stand-in dataset; ``data.*`` and ``model.*`` overrides reach the
dataset loader and the model constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from ..data import STAND_INS, Splits, load
from ..models import (
    TRANSEVOLVE_VARIANTS,
    Seq2Seq,
    SetTransformer,
    SignalClassifier,
    TextClassifier,
    TransEvolveClassifier,
    TransEvolveSeq2Seq,
    ViT,
    vit_preset,
)
from .config import TrainConfig

__all__ = ["Preset", "PRESETS", "OT_VARIANTS", "TRANSEVOLVE_LISTOPS_VARIANTS", "EA_VARIANTS", "VARIANTS"]


@dataclass(frozen=True)
class Preset:
    """A dataset (name and options), a model builder, and the default :class:`TrainConfig`."""

    description: str
    dataset: str
    dataset_options: dict[str, Any]
    model: Callable[..., nn.Module]
    config: TrainConfig

    def load_data(self, overrides: dict[str, Any]) -> Splits:
        """The preset's dataset, or with ``name`` in ``overrides`` another one of
        :data:`~neuralode_tf.data.DATASETS` (e.g. ``data.name=mnist data.root=...`` for the real data;
        the preset's options for its own dataset are then left out)."""
        overrides = dict(overrides)
        name = overrides.pop("name", self.dataset)
        if name not in STAND_INS and "root" not in overrides:
            raise ValueError(f"dataset {name!r} is read from files: give their folder with --set data.root=PATH")
        options = self.dataset_options if name == self.dataset else {}
        return load(name, **{**options, **overrides})

    def build_model(self, data: Splits, overrides: dict[str, Any]) -> nn.Module:
        return self.model(data, **overrides)


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


def _ot_vit(data: Splits, **overrides: Any) -> nn.Module:
    """Kan et al.'s MNIST ViT (one attention-only block, one head) on 16 patches of ``data``'s images: patch 7 on
    28x28 MNIST, patch 2 on 8x8 digits."""
    channels, height, width = data.train.x.shape[1:]
    shape = dict(img_size=(height, width), patch_size=height // 4, in_chans=channels, num_classes=data.num_classes)
    model = dict(depth=1, heads=1, attention_only=True, **OT_VARIANTS["ot_mnist_vit"]["ot"])
    return ViT(**{**shape, **model, **overrides})


def _ot_catsdogs(data: Splits, **overrides: Any) -> nn.Module:
    """Kan et al.'s Cats & Dogs OT-Transformer (:data:`~neuralode_tf.models.VIT_PRESETS` ``ot_catsdogs_ode``),
    at the resolution of the loaded images."""
    side = data.train.x.shape[-1]
    return vit_preset("ot_catsdogs_ode", img_size=side, **{**OT_VARIANTS["ot_catsdogs_vit"]["ot"], **overrides})


def _ot_text(data: Splits, **overrides: Any) -> nn.Module:
    """Kan et al.'s IMDb classifier: d = 256, 8 heads on the real data; d = 64, 4 heads on the stand-in."""
    size = dict(dim=256, num_heads=8) if data.name == "imdb" else dict(dim=64, num_heads=4)
    return TextClassifier(
        len(data.vocab), data.num_classes, **{**size, **OT_VARIANTS["ot_imdb_text"]["ot"], **overrides}
    )


def _ot_set(data: Splits, **overrides: Any) -> nn.Module:
    """Kan et al.'s ModelNet40 Set Transformer (ISAB width 200 for OT; 256 for the baseline, as in Lee et al.).

    On the shapes3d stand-in ``dim`` is divided by 4 (50 and 64), with 2 heads and 8 PMA seeds."""
    scale = 1 if data.name.startswith("modelnet40") else 4
    variant = {**OT_VARIANTS["ot_modelnet_set"]["ot"], **overrides}
    variant["dim"] = variant["dim"] // scale
    settings = dict(num_classes=data.num_classes, num_heads=2 if scale > 1 else 4, num_inducing=16, depth=2)
    if scale > 1:  # one PMA seed confuses cones/pyramids and boxes/cylinders of the stand-in (see set_shapes3d)
        settings["num_seeds"] = 8
    return SetTransformer(**{**settings, "mlp_hidden": variant["dim"], **variant})


def _five_models(baseline: dict[str, Any], continuous: dict[str, Any], steps: int, weight: float) -> dict[str, Any]:
    """The discrete baseline, and the OT and N-ODE Transformers without and with the transport cost ``weight``."""
    return {
        "baseline": dict(baseline, field="split", steps=None, transport_cost=None),
        "ot_unregularized": dict(continuous, field="composed", steps=steps, transport_cost=None),
        "ot": dict(continuous, field="composed", steps=steps, transport_cost=weight),
        "node": dict(continuous, field="node", steps=steps, transport_cost=None),
        "node_regularized": dict(continuous, field="node", steps=steps, transport_cost=weight),
    }


OT_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "ot_mnist_vit": _five_models(dict(dim=128), dict(dim=64), steps=20, weight=0.01),
    "ot_catsdogs_vit": _five_models(dict(depth=6), dict(depth=5), steps=20, weight=0.01),
    "ot_imdb_text": _five_models(dict(depth=6), dict(depth=3), steps=8, weight=0.5),
    "ot_modelnet_set": _five_models(dict(dim=256), dict(dim=200), steps=8, weight=1.0),
}
"""The model overrides of the five models Kan et al. (2025, Tables 1-4) compare, per OT preset.

``baseline`` is the discrete transformer; ``ot`` the OT-Transformer (one composed field on
``[0, 1]``, Euler, transport cost ``λ``; the preset's default); ``ot_unregularized`` the same with
``λ = 0``; ``node`` and ``node_regularized`` the N-ODE Transformer (one ODE per block, the same
steps per ODE) without and with the cost. Sizes, steps and ``λ`` are Appendix B's: MNIST ViT ``d``
128 vs 64, 20 steps, ``λ = 0.01``; Cats & Dogs 6 vs 5 blocks, 20 steps, ``λ = 0.01`` (real data only:
``data.root=`` a Kaggle ``train/`` folder); IMDb 6 vs 3 layers, 8 steps, ``λ = 0.5``; ModelNet40 ISAB width
256 vs 200 (``dim``; divided by 4 on the shapes3d stand-in), 8 steps, ``λ = 1``. Composed fields keep
the blocks' inner residuals, as the released code does. Use them as
``--set model.<key>=<value>`` or with :func:`neuralode_tf.train.compare_variants`.
"""


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


def _preset(description: str, dataset: str, model: Callable[..., nn.Module], name: str, **settings: Any) -> Preset:
    options = settings.pop("data", {})
    return Preset(
        description, dataset, options, model, replace(TrainConfig(preset=name, out_dir=f"runs/{name}"), **settings)
    )


PRESETS: dict[str, Preset] = {
    name: _preset(description, dataset, model, name, **settings)
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
            "ot_mnist_vit",
            "OT-Transformer MNIST ViT (d=64, 1 attention block, 20 Euler steps, λ=0.01); digits here, "
            "data.name=mnist for MNIST",
            "digits",
            _ot_vit,
            dict(epochs=30, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
        ),
        (
            "ot_catsdogs_vit",
            "OT-Transformer Cats & Dogs ViT (5 composed blocks, 20 steps, λ=0.01); needs data.root=<Kaggle train/>",
            "catsdogs",
            _ot_catsdogs,
            dict(epochs=300, batch_size=64, lr=3e-5, warmup_steps=0),
        ),
        (
            "ot_imdb_text",
            "OT-Transformer text classifier (3 composed blocks, 8 steps, λ=0.5); tweets here, data.name=imdb for IMDb",
            "tweets",
            _ot_text,
            dict(epochs=2, batch_size=128, lr=1e-3, weight_decay=0.01, warmup_steps=50, data=dict(max_samples=12000)),
        ),
        (
            "ot_modelnet_set",
            "OT-Transformer Set Transformer (ISAB width 200/4, 8 steps, λ=1); shapes3d here, "
            "data.name=modelnet40_h5 for ModelNet40",
            "shapes3d",
            _ot_set,
            dict(epochs=10, batch_size=64, lr=2e-3, warmup_steps=50, data=dict(num_train=1600, num_test=400)),
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


VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    **OT_VARIANTS,
    "transevolve_listops": TRANSEVOLVE_LISTOPS_VARIANTS,
    "transevolve_reverse": TRANSEVOLVE_LISTOPS_VARIANTS,
    **EA_VARIANTS,
}
"""Model variants by preset, for ``neuralode-tf compare`` and :func:`~neuralode_tf.train.compare_variants`."""
