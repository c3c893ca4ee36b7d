"""Datasets by name, for command-line front-ends: :data:`DATASETS` and :func:`load`."""

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
from .splits import Splits
from .text import load_imdb, tweets

__all__ = ["DATASETS", "STAND_INS", "load"]

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
"""Datasets available offline, generated or shipped with a package; all take ``seed=``."""

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
    """The dataset ``name`` of :data:`DATASETS`, built with keyword ``options`` (e.g. ``seed=0``, ``root=...``)."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(DATASETS)}")
    return DATASETS[name](**options)
