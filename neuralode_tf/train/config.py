"""Training configuration: a preset's defaults, a config file, and command-line overrides."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

__all__ = ["TrainConfig", "apply_overrides", "load_config"]


@dataclass
class TrainConfig:
    """Everything a run needs. ``model`` and ``data`` hold keyword arguments for the preset's
    model constructor and dataset; the other fields drive the loop.

    Attributes:
        preset: Name of the task preset (see ``neuralode-tf train --list``).
        epochs: Passes over the training split.
        batch_size: Global batch size (split across processes under torchrun).
        lr, weight_decay, warmup_steps: AdamW with linear warm-up then cosine decay.
        grad_clip: Gradient-norm clipping (0 disables it).
        seed: Seeds the model's initialisation and the data order of every epoch.
        out_dir: Where ``checkpoint.pt``, ``metrics.csv``, ``metrics.json`` and ``config.json`` go.
        checkpoint_every: Write a checkpoint every this many steps (0: only at the end).
        max_steps: Stop after this many steps in total (for quick runs and tests).
        resume: Continue from ``out_dir/checkpoint.pt`` if it exists.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        progress: Show the tqdm bar and print the result.
    """

    preset: str
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 0
    grad_clip: float = 1.0
    seed: int = 0
    out_dir: str = "runs/default"
    checkpoint_every: int = 0
    max_steps: int | None = None
    resume: bool = False
    device: str = "auto"
    eval_batch_size: int = 256
    progress: bool = True
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a JSON or TOML config file into a dict of :class:`TrainConfig` fields."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix == ".json":
        return json.loads(text)
    raise ValueError(f"config files must be .json or .toml, got {path.name}")


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides; dotted keys reach into ``model`` and ``data`` (``model.dim=64``).

    Values are parsed as JSON where possible (numbers, booleans, null, lists), else kept as strings.
    """
    known = {f.name for f in fields(TrainConfig)}
    values = {**values, "model": dict(values.get("model", {})), "data": dict(values.get("data", {}))}
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep:
            raise ValueError(f"override {override!r} must look like key=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        head, dot, rest = key.partition(".")
        if dot:
            if head not in ("model", "data"):
                raise ValueError(f"dotted overrides must start with model. or data., got {key!r}")
            values[head][rest] = value
        elif key in known:
            values[key] = value
        else:
            raise ValueError(f"unknown setting {key!r}; valid: {sorted(known)} or model.<arg>, data.<arg>")
    return values
