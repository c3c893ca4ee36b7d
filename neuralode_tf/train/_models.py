"""The presets' models: registered configurations of :mod:`neuralode_tf.models` built on a dataset's shape."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from torch import nn

from ..data import Splits, TensorSplit
from ..models import create_model

__all__ = ["registered", "classes", "images", "tokens", "pairs"]

Shape = Callable[[Splits], dict[str, Any]]
"""The keyword arguments a model takes from the dataset (its number of classes, image shape, vocabulary)."""


def registered(name: str, shape: Shape) -> Callable[..., nn.Module]:
    """A preset's model builder ``(data, **overrides) -> nn.Module``: the registered model ``name``
    (:func:`~neuralode_tf.models.create_model`) with ``shape(data)``, then the ``overrides``."""
    return partial(_build, name, shape)


def _build(name: str, shape: Shape, data: Splits, **overrides: Any) -> nn.Module:
    return create_model(name, **{**shape(data), **overrides})


def classes(data: Splits) -> dict[str, Any]:
    """``num_classes``: the dataset's."""
    return {"num_classes": data.num_classes}


def images(data: Splits) -> dict[str, Any]:
    """A ViT's ``img_size``, ``in_chans`` and ``num_classes``: the dataset's images ``(C, H, W)`` and classes."""
    if not isinstance(data.train, TensorSplit):
        raise TypeError(f"images needs a split of image tensors; {data.name!r} holds {data.kind!r}")
    channels, height, width = data.train.x.shape[1:]
    return {"img_size": (height, width), "in_chans": channels, **classes(data)}


def tokens(data: Splits) -> dict[str, Any]:
    """A sequence classifier's ``vocab_size`` and ``num_classes``."""
    return {"vocab_size": _vocabulary_size(data), **classes(data)}


def pairs(data: Splits) -> dict[str, Any]:
    """A :class:`~neuralode_tf.models.Seq2Seq`'s ``src_vocab_size`` (one vocabulary for sources and targets)."""
    return {"src_vocab_size": _vocabulary_size(data)}


def _vocabulary_size(data: Splits) -> int:
    """The size of the dataset's vocabulary, which a token dataset has."""
    if data.vocab is None:
        raise TypeError(f"{data.name!r} holds {data.kind!r}, which have no vocabulary")
    return len(data.vocab)
