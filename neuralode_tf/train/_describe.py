"""What a run's settings are and which ``model.*`` and ``data.*`` keys its preset accepts, with their values:
``neuralode-tf train PRESET --describe``."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

import torch
from torch import nn

from ..data import DATASETS, Splits
from ..models import stack_encoder
from ..numerics import solve
from .config import ConfigError, TrainConfig
from .presets import Preset

__all__ = ["ModelKeys", "model_keys", "data_keys", "describe"]

_KEYWORDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class ModelKeys:
    """The keys that ``model.*`` settings may set for a preset, with the values its model is built with."""

    model: str
    """The class of the model."""
    values: dict[str, Any]
    """Each key with its value: the builder's own keywords first, then those of the model's ``__init__`` (and of
    the ``__init__`` s it passes its keywords on to) that the builder leaves to the settings."""
    passes_on: bool
    """Whether the model passes other keywords on to its encoder and the ODE solve."""

    def accepted(self) -> str:
        """``"ViT takes img_size, ..., and passes other keywords on to ..."``, for error messages."""
        encoder, solve_keys = ", ".join(_ENCODER), ", ".join(_SOLVE)
        passed = f", and passes other keywords on to its encoder ({encoder}) and the ODE solve ({solve_keys})"
        return f"{self.model} takes {', '.join(self.values)}{passed if self.passes_on else ''}"


def model_keys(preset: Preset, data: Splits, overrides: dict[str, Any]) -> ModelKeys:
    """The keys of ``preset``'s model, with the values it is built with from ``data`` and ``overrides``.

    The keys are the builder's own keywords (e.g. ``variant``), those of the model's ``__init__``, which the
    builder passes on (as :func:`~neuralode_tf.models.create_model` does: the data's shape is an override too),
    and those of the ``__init__`` s it calls in turn with ``super().__init__(..., **kwargs)``, less the ones such a
    call fixes itself. The values are the arguments each ``__init__`` receives as the builder runs (recorded,
    defaults included), so they are the preset's and not the class's defaults. The global random state is put back.
    """
    with torch.random.fork_rng(devices=[]):
        model, calls = _recorded(lambda: preset.build_model(data, overrides))
    values = {name: _default(p) for name, p in _parameters(preset.model)[1:]}
    passed: set[str] | None = None  # the keywords the __init__ before passes on (None: the builder passes all)
    passes_on = False
    for cls in type(model).__mro__[: type(model).__mro__.index(nn.Module)]:
        init = vars(cls).get("__init__")
        arguments = calls.get(getattr(init, "__code__", None))
        if init is None or arguments is None:  # (no __init__ of its own, or not called)
            continue
        named = _parameters(init)[1:]
        for name, parameter in named:
            if passed is None or name in passed or arguments[name] is parameter.default:
                values[name] = arguments[name]
        varkw = next((p.name for p in inspect.signature(init).parameters.values() if p.kind is p.VAR_KEYWORD), None)
        passes_on = varkw is not None  # the last __init__ with **keywords passes them on to the encoder
        values.update(arguments[varkw] if varkw else {})
        passed = {name for name, _ in named} | set(arguments[varkw] if varkw else {})
    return ModelKeys(type(model).__name__, values, passes_on)


def data_keys(preset: Preset, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The dataset of a run and its keys with their values: the loader's defaults, the preset's options (for
    its own dataset) and ``overrides``."""
    name = overrides.get("name", preset.dataset)
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    defaults = {key: _default(p) for key, p in _parameters(DATASETS[name])}
    options = preset.dataset_options if name == preset.dataset else {}
    return name, {"name": name, **defaults, **options, **overrides}


def describe(config: TrainConfig, preset: Preset) -> str:
    """The run of ``config``: its training settings, its model's keys and its dataset's keys with their values."""
    settings = {key: value for key, value in asdict(config).items() if key not in ("preset", "model", "data")}
    name, data_values = data_keys(preset, config.data)
    lines = [f"{config.preset}: {preset.description}", "", "training settings (--set KEY=VALUE):"]
    lines += _rows(settings)
    try:
        keys = model_keys(preset, preset.load_data(config.data), config.model)
    except TypeError as error:  # a data.* or model.* key that the dataset or the model does not take
        raise ConfigError(
            f"cannot build the model of {config.preset!r} with model={config.model}, data={config.data}: {error} "
            "(--describe without the key lists the keys)"
        ) from error
    except (ValueError, OSError) as error:  # e.g. a dataset read from files that are not given
        lines += ["", f"model settings (--set model.KEY=VALUE): the model could not be built: {error}"]
    else:
        lines += ["", f"model settings (--set model.KEY=VALUE) of {keys.model}:", *_rows(keys.values)]
        if keys.passes_on:
            encoder = ", ".join(name for name in _ENCODER if name not in keys.values)
            lines.append(f"  other keywords go to its encoder ({encoder}) and the ODE solve: {', '.join(_SOLVE)}")
    lines += ["", f"data settings (--set data.KEY=VALUE) of the dataset {name!r}:", *_rows(data_values)]
    return "\n".join(lines)


def _rows(values: dict[str, Any]) -> list[str]:
    """``  key   value`` lines, each value as ``--set`` reads it (JSON where it can be written so)."""
    width = max(map(len, values), default=0) + 2
    return [f"  {key:<{width}}{_shown(value)}" for key, value in values.items()]


def _shown(value: Any) -> str:
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def _recorded(build: Callable[[], nn.Module]) -> tuple[nn.Module, dict[Any, dict[str, Any]]]:
    """The model ``build()`` returns, and for each ``__init__`` (by code object) the arguments of its first call
    on that model, as the call began."""
    calls: list[tuple[Any, Any, dict[str, Any]]] = []

    def record(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "__init__" and "self" in frame.f_code.co_varnames[:1]:
            calls.append((frame.f_locals["self"], frame.f_code, dict(frame.f_locals)))

    previous = sys.getprofile()
    sys.setprofile(record)
    try:
        model = build()
    finally:
        sys.setprofile(previous)
    first: dict[Any, dict[str, Any]] = {}
    for owner, code, arguments in calls:
        if owner is model:
            first.setdefault(code, arguments)
    return model, first


class _Required:
    """The value of a keyword without a default."""

    def __repr__(self) -> str:
        return "(required)"


def _default(parameter: inspect.Parameter) -> Any:
    return _Required() if parameter.default is parameter.empty else parameter.default


def _parameters(function: Callable[..., Any]) -> list[tuple[str, inspect.Parameter]]:
    """The parameters of ``function`` that a keyword can set, in order."""
    return [(name, p) for name, p in inspect.signature(function).parameters.items() if p.kind in _KEYWORDS]


_SOLVE = [p.name for p in inspect.signature(solve).parameters.values() if p.kind is p.KEYWORD_ONLY]
"""The keywords of :func:`~neuralode_tf.solve` that a model passes on to it."""

_ENCODER = [
    name
    for name, p in inspect.signature(stack_encoder).parameters.items()
    if p.kind is p.KEYWORD_ONLY and name not in _SOLVE and name != "final_norm"  # a module: no setting
]
"""The keywords of :func:`~neuralode_tf.models.stack_encoder` besides the solve's, which a model passes on to it."""
