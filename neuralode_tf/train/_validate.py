"""Checks that a run's settings work, made before the run writes anything."""

from __future__ import annotations

import traceback
import warnings

import torch

from ._describe import data_keys, model_keys
from .config import ConfigError, TrainConfig
from .presets import PRESETS, Preset
from .tasks import Task, build_task

__all__ = ["ScheduleWarning", "checked_task", "run_length"]


class ScheduleWarning(UserWarning):
    """The learning-rate schedule does not fit the run: its warm-up is longer than the run."""


def checked_task(config: TrainConfig, device: torch.device) -> Task:
    """The task of ``config`` with its model on ``device``, after one forward pass on two training examples (in eval
    mode, without gradients, the CPU's random state put back), so that a ``model.*`` or ``data.*`` key that the
    dataset, the model or the ODE solve does not accept fails here and not at the first step.

    Raises:
        ConfigError: such a key (a ``TypeError`` of the dataset or the model that quotes it), named with what the
            dataset or the model accepts.
    """
    try:
        task = build_task(config)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            task.model.to(device).eval()
            inputs, _ = task.batch(task.train, torch.arange(min(2, len(task.train))), device)
            task.model(**inputs)
    except TypeError as error:
        in_data = any(frame.f_code is Preset.load_data.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))
        key = next((k for k in (config.data if in_data else config.model) if f"'{k}'" in str(error)), None)
        if key is None:
            raise
        preset = PRESETS[config.preset]
        if in_data:
            name, values = data_keys(preset, {"name": config.data["name"]} if "name" in config.data else {})
            raise _unknown(config, f"data.{key}", error, f"the dataset {name!r} takes {', '.join(values)}") from error
        accepted = model_keys(preset, preset.load_data(config.data), {}).accepted()
        raise _unknown(config, f"model.{key}", error, accepted) from error
    return task


def run_length(config: TrainConfig, examples: int, world: int) -> tuple[int, int]:
    """Steps per epoch and in the whole schedule for ``examples`` training examples on ``world`` processes.

    Raises:
        ConfigError: the batch is larger than the split, not divisible by ``world``, or a process's share not by
            ``grad_accumulation``.

    Warns:
        ScheduleWarning: the warm-up is longer than the schedule, so the learning rate never reaches ``lr``.
    """
    steps_per_epoch = examples // config.batch_size
    if steps_per_epoch == 0:
        raise ConfigError(f"batch_size={config.batch_size} exceeds the {examples} training examples")
    if config.batch_size % world:
        raise ConfigError(f"batch_size={config.batch_size} must be divisible by the {world} processes")
    if (config.batch_size // world) % config.grad_accumulation:
        raise ConfigError(
            f"each process's {config.batch_size // world} examples per step (batch_size={config.batch_size} over "
            f"{world} processes) must be divisible by grad_accumulation={config.grad_accumulation}"
        )
    total = steps_per_epoch * config.epochs
    if config.warmup_steps > total:
        warnings.warn(
            f"the warm-up ({config.warmup_steps} steps) is longer than the run ({total} steps: {config.epochs} "
            f"epoch(s) of {steps_per_epoch}), so the learning rate never reaches lr={config.lr}; lower warmup_steps "
            "or train more epochs",
            ScheduleWarning,
            stacklevel=3,
        )
    return steps_per_epoch, total


def _unknown(config: TrainConfig, key: str, error: TypeError, accepted: str) -> ConfigError:
    return ConfigError(
        f"unknown setting {key!r} for preset {config.preset!r} ({error}): {accepted} "
        f"(neuralode-tf train {config.preset} --describe lists them with their values)"
    )
