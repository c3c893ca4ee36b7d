"""The registry itself: :class:`ModelConfig`, :func:`register_model`, :func:`list_models`, :func:`model_config`,
:func:`create_model`, and the former names of renamed models."""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from ..._renamed import renamed

__all__ = ["ModelConfig", "RENAMED_MODELS", "register_model", "create_model", "list_models", "model_config"]


@dataclass(frozen=True)
class ModelConfig:
    """A named configuration: the model is ``builder(**kwargs)``; ``doc`` describes it."""

    name: str
    builder: Callable[..., nn.Module]
    kwargs: dict[str, Any]
    doc: str


_REGISTRY: dict[str, ModelConfig] = {}


def register_model(name: str, builder: Callable[..., nn.Module], doc: str, **kwargs: Any) -> None:
    """Register ``builder(**kwargs)`` as ``name``, described by ``doc``; a name is registered once."""
    if name in _REGISTRY:
        raise ValueError(f"a model named {name!r} is already registered")
    _REGISTRY[name] = ModelConfig(name, builder, copy.deepcopy(kwargs), doc)


def list_models(pattern: str = "*") -> list[str]:
    """The registered names that match the shell-style ``pattern`` (e.g. ``"ot_*"``), sorted."""
    return sorted(fnmatch.filter(_REGISTRY, pattern))


RENAMED_MODELS: dict[str, str] = {"deit_tiny_digits": "vit_digits"}
"""Registered models' former names: :func:`model_config` and :func:`create_model` still accept them, with a
:class:`DeprecationWarning`, until the next release."""


def model_config(name: str) -> ModelConfig:
    """The configuration registered as ``name`` (a copy: changing it changes nothing registered)."""
    return _registered(name)


def create_model(name: str, **overrides: Any) -> nn.Module:
    """The model ``name``: its builder called with the registered keyword arguments, updated by ``overrides``."""
    config = _registered(name)
    return config.builder(**{**config.kwargs, **overrides})


def _registered(name: str) -> ModelConfig:
    """A copy of the configuration registered as ``name`` or, with a warning to the caller's caller, as its new
    name."""
    name = renamed("model", name, RENAMED_MODELS, stacklevel=4)
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(map(repr, list_models()))}")
    return replace(_REGISTRY[name], kwargs=copy.deepcopy(_REGISTRY[name].kwargs))
