"""The presets' models: registered configurations of :mod:`neuralode_tf.models` built on a dataset's shape."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from torch import nn

from ...data import Splits, TensorSplit
from ...models import continuous_resnet, create_model
from ._ablations import ABLATIONS

__all__ = ["registered", "resnet", "classes", "images", "tokens", "pairs", "AA_RESNET_ABLATIONS"]

Shape = Callable[[Splits], dict[str, Any]]
"""The keyword arguments a model takes from the dataset (its number of classes, image shape, vocabulary)."""


def registered(name: str, shape: Shape) -> Callable[..., nn.Module]:
    """A preset's model builder ``(data, **overrides) -> nn.Module``: the registered model ``name``
    (:func:`~neuralode_tf.models.create_model`) with ``shape(data)``, then the ``overrides``."""
    return partial(_build, name, shape)


def _build(name: str, shape: Shape, data: Splits, **overrides: Any) -> nn.Module:
    return create_model(name, **{**shape(data), **overrides})


def resnet(name: str) -> Callable[..., nn.Module]:
    """A preset's builder of the registered :func:`~neuralode_tf.models.aa_resnet` model ``name`` for the data's
    image size, channels and classes, then the ``overrides``, read by :func:`~neuralode_tf.models.continuous_resnet`
    (its default, one Lie-Trotter Euler step per block, is the discrete network; it takes ``images=`` like the
    library's models)."""
    return partial(_build_resnet, name)


def _build_resnet(name: str, data: Splits, **overrides: Any) -> nn.Module:
    shape = images(data)
    size = {"image_size": shape["img_size"], "in_chans": shape["in_chans"], "num_classes": shape["num_classes"]}
    return continuous_resnet(create_model(name, **{**size, **overrides}))


AA_RESNET_ABLATIONS: dict[str, dict[str, Any]] = {
    "aa": dict(evolving=False),
    **{name: dict(evolving=True, **change) for name, change in ABLATIONS.items()},
}
"""Wang et al.'s Table 2 as model overrides of an :func:`~neuralode_tf.models.aa_resnet`: AA-ResNet (``aa``),
EA-AA-ResNet (``ea``, the registered ``α = 0.5, β = 1``, 3x3) and its ablations ``no_convolution`` (``β = 0``),
``no_skip`` (``α = 0``), ``kernel_1x1`` and ``kernel_5x5``."""


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
