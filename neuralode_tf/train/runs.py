"""Reloading a finished (or interrupted) run for evaluation: :func:`load_run`."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ._checkpoint import CHECKPOINT, CheckpointError, load_checkpoint
from .config import TrainConfig
from .setup import Setup, build_setup

__all__ = ["load_run"]


def load_run(out_dir: str | Path, device: str | torch.device = "cpu") -> tuple[TrainConfig, Setup]:
    """The settings and the trained setup of the run in ``out_dir``: its ``config.json`` as a :class:`TrainConfig`,
    and the setup it builds (dataset and model) with the model's weights from ``checkpoint.pt``, on ``device``, in
    eval mode. The two files are written together, so they describe the same run::

        config, setup = load_run("runs/vit_digits")
        scores = neuralode_tf.train.evaluate(setup.model, setup, torch.device("cpu"))  # the run's test accuracy

    Raises:
        CheckpointError: ``out_dir`` holds no run (no ``config.json`` or no ``checkpoint.pt``), or the checkpoint
            cannot be loaded safely (:func:`~neuralode_tf.train.load_checkpoint`).
        ConfigError: ``config.json`` names settings this version does not know.
    """
    folder = Path(out_dir)
    missing = [name for name in ("config.json", CHECKPOINT) if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(f"{folder} holds no run to load: it has no {' and no '.join(missing)}")
    config = TrainConfig(**{**json.loads((folder / "config.json").read_text()), "resume": False})
    setup = build_setup(config)
    setup.model.load_state_dict(load_checkpoint(folder / CHECKPOINT, device)["model"])
    setup.model.to(device).eval()
    return config, setup
