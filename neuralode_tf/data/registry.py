"""Datasets by name, for presets and the command line: :data:`DATASETS`, :func:`load` and
:func:`register_dataset`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from .corpus import load_openwebtext, load_shakespeare_char, tweets_char
from .glue import load_glue
from .imagenet import load_imagenet
from .images import digits, load_catsdogs, load_cifar100, load_mnist, mnist1d
from .listops import listops
from .modelnet import load_modelnet40, load_modelnet40_h5
from .pretrained_text import tweets_raw
from .seq2seq import TASKS, seq2seq
from .shapes3d import shapes3d
from .splits import MODEL_INPUTS, Splits
from .text import load_imdb, tweets

__all__ = ["DATASETS", "STAND_INS", "load", "register_dataset"]

STAND_INS: dict[str, Callable[..., Splits]] = {
    "digits": digits,
    "mnist1d": mnist1d,
    "tweets": tweets,
    "tweets_raw": tweets_raw,
    "tweets_char": tweets_char,
    "listops": listops,
    "shapes3d": shapes3d,
    **{task: partial(seq2seq, task) for task in TASKS},
}
"""Datasets available offline, generated or shipped with a package (the built-in ones all take ``seed=``); a preset
loads them without ``data.root``. :func:`register_dataset` with ``offline=True`` adds one."""

DATASETS: dict[str, Callable[..., Splits]] = {
    **STAND_INS,
    "mnist": load_mnist,
    "cifar100": load_cifar100,
    "catsdogs": load_catsdogs,
    "imagenet": load_imagenet,
    "imdb": load_imdb,
    "glue": load_glue,
    "shakespeare_char": load_shakespeare_char,
    "openwebtext": load_openwebtext,
    "modelnet40": load_modelnet40,
    "modelnet40_h5": load_modelnet40_h5,
}
"""Every dataset by name: the stand-ins and the loaders of the papers' datasets, which take ``root=``."""


def load(name: str, **options: Any) -> Splits:
    """The dataset ``name`` of :data:`DATASETS`, built with keyword ``options`` (e.g. ``seed=0``, ``root=...``).

    Raises:
        ValueError: ``name`` is not a dataset of :data:`DATASETS`.
        TypeError: its loader returned something other than :class:`Splits`, or splits of an unknown kind.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(DATASETS)}")
    splits = DATASETS[name](**options)
    if not isinstance(splits, Splits):
        raise TypeError(f"the loader of dataset {name!r} returned a {type(splits).__name__}, not Splits")
    if splits.kind not in MODEL_INPUTS:
        raise TypeError(f"dataset {name!r} has kind {splits.kind!r}, which is none of {list(MODEL_INPUTS)}")
    return splits


def register_dataset(name: str, loader: Callable[..., Splits], *, offline: bool = False) -> None:
    """Add a dataset, so that :func:`load`, a preset (``register_preset(..., dataset=name)``) and
    ``neuralode-tf train PRESET --set data.name=NAME`` load it by name.

    Args:
        name: The dataset's name (not one of :data:`DATASETS`).
        loader: ``(**options) -> Splits``, called with the preset's ``data`` options and the ``data.*`` settings;
            it returns :class:`Splits` of a :data:`~neuralode_tf.data.Kind`, each split holding what the kind
            says, so that the training loop can call a model with :data:`~neuralode_tf.data.MODEL_INPUTS`
            (:func:`load` checks the type and the kind).
        offline: Whether the dataset needs no files (generated, or shipped with a package): it then joins
            :data:`STAND_INS`, and a preset loads it without ``data.root``. A dataset read from files takes its
            folder as ``root=``.

    Raises:
        ValueError: ``name`` is taken or not a non-empty string.
        TypeError: ``loader`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a dataset's name is a non-empty string, got {name!r}")
    if name in DATASETS:
        raise ValueError(f"a dataset named {name!r} exists already")
    if not callable(loader):
        raise TypeError(f"a dataset's loader is a callable returning Splits, got {loader!r}")
    DATASETS[name] = loader
    if offline:
        STAND_INS[name] = loader
