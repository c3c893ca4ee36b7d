"""Named training presets: a dataset, a model and the loop settings that train it well here.

Each preset runs on an offline stand-in dataset; ``data.*`` and ``model.*`` overrides reach the
dataset loader and the model constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from ..data import Splits, load
from ..models import Seq2Seq, SetTransformer, SignalClassifier, TextClassifier, vit_preset
from .config import TrainConfig

__all__ = ["Preset", "PRESETS"]


@dataclass(frozen=True)
class Preset:
    """A dataset (name and options), a model builder, and the default :class:`TrainConfig`."""

    description: str
    dataset: str
    dataset_options: dict[str, Any]
    model: Callable[..., nn.Module]
    config: TrainConfig

    def load_data(self, overrides: dict[str, Any]) -> Splits:
        return load(self.dataset, **{**self.dataset_options, **overrides})

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
            "seq2seq_reverse",
            "encoder-decoder (d=64, 2+2 blocks) reversing symbol sequences",
            "reverse",
            _seq2seq,
            dict(epochs=20, batch_size=64, lr=1e-3, warmup_steps=50),
        ),
    ]
}
