"""The presets' registry: the :class:`Preset` record (a dataset, a model builder and the training settings),
:data:`PRESETS`, :data:`VARIANTS` and the functions that add to them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from torch import nn

from ..._renamed import RenamedKeys
from ...data import STAND_INS, Splits, load
from ..config import PRESET_CONFIGS, RENAMED_PRESETS, ConfigError, TrainConfig, base_settings

__all__ = ["by_preset", "Preset", "PRESETS", "VARIANTS", "register_preset", "register_variants", "config"]


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


T = TypeVar("T")


def by_preset(entries: Mapping[str, T]) -> dict[str, T]:
    """``entries`` keyed by preset name, in which a former name (:data:`~neuralode_tf.train.config.RENAMED_PRESETS`)
    still reads its preset's entry, with a :class:`DeprecationWarning`."""
    return RenamedKeys("preset", RENAMED_PRESETS, entries)


PRESETS: dict[str, Preset] = by_preset({})
"""Every preset by name (``neuralode-tf train --list``), in the order the family modules register them."""

VARIANTS: dict[str, dict[str, dict[str, Any]]] = by_preset({})
"""Model variants by preset, for ``neuralode-tf compare`` and :func:`~neuralode_tf.train.compare_variants`."""


def register_preset(
    name: str, description: str, dataset: str, model: Callable[..., nn.Module], **settings: Any
) -> Preset:
    """Add a training preset, so that ``TrainConfig(name)`` and ``neuralode-tf train name`` run it. Returns it.

    Args:
        name: The preset's name (not one of :data:`PRESETS`).
        description: One line for ``neuralode-tf train --list``.
        dataset: A dataset of :data:`~neuralode_tf.data.DATASETS`; ``settings["data"]`` holds its options.
        model: ``(data, **overrides) -> nn.Module``, e.g. ``registered("vit_digits", images)``: a model of
            :func:`~neuralode_tf.models.list_models` built on the data's shape (:mod:`neuralode_tf.train.presets`
            exports ``registered`` and the shapes ``images``, ``tokens``, ``classes`` and ``pairs``).
        **settings: :class:`~neuralode_tf.train.TrainConfig` fields (``epochs``, ``lr``, ...; the others take their
            base values, :func:`~neuralode_tf.train.config.base_settings`), and ``data``, the dataset's options.
    """
    if name in PRESETS:
        raise ValueError(f"a preset named {name!r} exists already")
    options = settings.pop("data", {})
    config = TrainConfig(**{**base_settings(name), **settings})
    PRESETS[name] = Preset(description, dataset, options, model, config)
    PRESET_CONFIGS[name] = config  # TrainConfig(name) reads it from there
    return PRESETS[name]


def register_variants(table: Mapping[str, dict[str, dict[str, Any]]]) -> None:
    """Add the models ``neuralode-tf compare PRESET`` trains: preset -> variant name -> model overrides; each preset
    registered and given its variants once."""
    taken = [name for name in table if name not in PRESETS or name in VARIANTS]
    if taken:
        raise ValueError(f"variants are given once, to registered presets; not to {taken}")
    VARIANTS.update(table)


def config(name: str, **overrides: Any) -> TrainConfig:
    """The run of the preset ``name`` with ``overrides`` of its :class:`~neuralode_tf.train.TrainConfig` fields:
    ``config("vit_digits", epochs=5)`` is ``TrainConfig("vit_digits", epochs=5)``."""
    return TrainConfig(name, **overrides)
