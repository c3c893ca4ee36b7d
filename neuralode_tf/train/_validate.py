"""Checks that a run's settings work, made before the run writes anything."""

from __future__ import annotations

import json
import re
import sys
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ._checkpoint import CHECKPOINT, load_checkpoint
from ._describe import data_keys, model_keys
from .config import ConfigError, TrainConfig
from .presets import PRESETS, Preset
from .setup import ModelInputError, Setup, build_setup

__all__ = ["ScheduleWarning", "checked_setup", "run_length", "resumed_state", "FIXED_ON_RESUME"]

FIXED_ON_RESUME = (
    "preset", "batch_size", "lr", "weight_decay", "warmup_steps", "optimizer", "momentum", "warmup_epochs",
    "lr_decay_epochs", "grad_clip", "grad_accumulation", "seed", "model", "data",
)  # fmt: skip
"""Settings a resumed run cannot change: the checkpoint's model, optimizer, schedule and data order follow them.
The others (``epochs``, ``max_steps``, ``checkpoint_every``, ``eval_batch_size``, ``eval_every``, ``device``,
``threads``, ``progress``) take effect from the step the run resumes at (other threads or another device reorder float
reductions, so the resumed curve is then equal to rounding, not bit for bit)."""


class ScheduleWarning(UserWarning):
    """The learning-rate schedule does not fit the run: its warm-up is longer than the run."""


def checked_setup(config: TrainConfig, device: torch.device) -> Setup:
    """The setup of ``config`` with its model on ``device``, after one forward pass on two training examples (in eval
    mode, without gradients, the CPU's random state put back), so that a ``model.*`` or ``data.*`` key that the
    dataset, the model or the ODE solve does not accept fails here and not at the first step.

    Raises:
        ModelInputError: the model does not take the inputs of its dataset's kind.
        ConfigError: such a key (a ``TypeError`` of the dataset or the model that quotes it), named with what the
            dataset or the model accepts; or a value they refuse (a ``ValueError``, e.g. the solver's
            ``SolverConfigError`` for ``model.steps=0``), named with the refusal.
    """
    try:
        setup = build_setup(config)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            setup.model.to(device).eval()
            inputs, _ = setup.batch(setup.train, torch.arange(min(2, len(setup.train))), device)
            setup.model(**inputs)
    except ModelInputError:
        raise
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
    except ConfigError:
        raise
    except ValueError as error:
        in_data = any(frame.f_code is Preset.load_data.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))
        group, values = ("data", config.data) if in_data else ("model", config.model)
        named = [key for key in values if re.search(rf"\b{re.escape(key)}\b", str(error))]
        setting = ", ".join(f"{group}.{key}={values[key]!r}" for key in named) or f"the {group}.* settings"
        raise ConfigError(
            f"invalid {setting} for preset {config.preset!r}: {error} (neuralode-tf train {config.preset} --describe "
            "lists the settings with their values)"
        ) from error
    return setup


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


def resumed_state(config: TrainConfig, folder: Path, total: int, device: torch.device) -> dict[str, Any] | None:
    """With ``config.resume``: the checkpoint in ``folder`` to continue from, after checking that this run can
    continue it; ``None`` without ``resume``, or when ``folder`` has no checkpoint (a first run: said on stderr, and
    the run starts from scratch). Reads only: a refused resume leaves the folder as it was.

    Raises:
        ConfigError: a setting of :data:`FIXED_ON_RESUME` differs from the checkpoint's ``config.json`` (naming
            both values), or the checkpoint is past the end of this run (fewer ``epochs``).
        CheckpointError: the checkpoint cannot be loaded.
    """
    if not config.resume:
        return None
    if not (folder / CHECKPOINT).exists():
        print(f"neuralode-tf: no {CHECKPOINT} in {folder} to resume from: training from scratch", file=sys.stderr)
        return None
    saved_file = folder / "config.json"
    if saved_file.is_file():
        saved = json.loads(saved_file.read_text())
        now = json.loads(json.dumps(asdict(config)))  # as config.json holds it: tuples as lists
        changed = [name for name in FIXED_ON_RESUME if name in saved and saved[name] != now[name]]
        if changed:
            what = ", ".join(f"{name}={now[name]!r} (the checkpoint's: {saved[name]!r})" for name in changed)
            raise ConfigError(
                f"--resume cannot change {what}: the checkpoint was trained with the others. Drop the change, or "
                "train into another --out-dir"
            )
    state = load_checkpoint(folder / CHECKPOINT, device)
    if state["step"] > total:
        raise ConfigError(
            f"the checkpoint in {folder} is at step {state['step']}, past the {total} steps of epochs={config.epochs}: "
            "resume with epochs at least as many as it was trained with"
        )
    return state


def _unknown(config: TrainConfig, key: str, error: TypeError, accepted: str) -> ConfigError:
    return ConfigError(
        f"unknown setting {key!r} for preset {config.preset!r} ({error}): {accepted} "
        f"(neuralode-tf train {config.preset} --describe lists them with their values)"
    )
