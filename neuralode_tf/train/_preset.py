"""The :class:`Preset` record: a dataset, a model builder and the default training settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..data import STAND_INS, Splits, load
from .config import PRESET_CONFIGS, ConfigError, TrainConfig, base_settings

__all__ = ["Preset", "make_preset"]


@dataclass(frozen=True)
class Preset:
    """A dataset (name and options), a model builder, and the training settings.

    ``config`` is the preset's run: ``TrainConfig(name)`` equals it, and ``TrainConfig(name, **settings)`` is it
    with those settings replaced. ``model(data, **overrides)`` builds the model for the dataset's splits, with the
    ``model.*`` settings as ``overrides`` (the preset's own model settings are the builder's defaults, so
    ``config.model`` is empty).
    """

    description: str
    dataset: str
    dataset_options: dict[str, Any]
    model: Callable[..., nn.Module]
    config: TrainConfig

    def load_data(self, overrides: dict[str, Any]) -> Splits:
        """The preset's dataset, or with ``name`` in ``overrides`` another one of
        :data:`~neuralode_tf.data.DATASETS` (e.g. ``data.name=mnist data.root=...`` for the real data;
        the preset's options for its own dataset are then left out).

        Raises:
            ConfigError: the dataset is read from files and ``root`` is not given (the command line reports it as a
                usage error, exit code 2)."""
        overrides = dict(overrides)
        name = overrides.pop("name", self.dataset)
        if name not in STAND_INS and "root" not in overrides:
            raise ConfigError(f"dataset {name!r} is read from files: give their folder with --set data.root=PATH")
        options = self.dataset_options if name == self.dataset else {}
        return load(name, **{**options, **overrides})

    def build_model(self, data: Splits, overrides: dict[str, Any]) -> nn.Module:
        return self.model(data, **overrides)


def make_preset(description: str, dataset: str, model: Callable[..., nn.Module], name: str, **settings: Any) -> Preset:
    """A :class:`Preset`; ``settings`` are :class:`TrainConfig` fields (the others take their base values, see
    :func:`~neuralode_tf.train.config.base_settings`), and ``data`` the dataset's options."""
    options = settings.pop("data", {})
    preset = Preset(description, dataset, options, model, TrainConfig(**{**base_settings(name), **settings}))
    PRESET_CONFIGS[name] = preset.config  # TrainConfig(name) reads it from there
    return preset
