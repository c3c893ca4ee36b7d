"""The optimizer and the learning-rate schedule of a run, from its :class:`~neuralode_tf.train.TrainConfig`."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from ._validate import ScheduleWarning
from .config import TrainConfig

__all__ = ["optimizer_for", "schedule_for"]


def optimizer_for(config: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` (decoupled weight decay), or for ``optimizer="sgd"`` Wang et al.'s (2021, §4.1)
    ``torch.optim.SGD`` with ``momentum`` ``μ`` and the weight decay ``λ`` added to the gradient:
    ``b ← μ b + g + λ θ`` (``b = g + λ θ`` at the first step), ``θ ← θ - η_k b``."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), config.lr, config.momentum, weight_decay=config.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


def schedule_for(config: TrainConfig, steps_per_epoch: int, total: int) -> Callable[[int], float]:
    """The learning-rate factor of step ``k``: linear warm-up, ``(k + 1) / W`` over the ``W`` steps of
    ``warmup_steps`` or of ``warmup_epochs`` epochs, then a cosine decay over the run, or, with
    ``lr_decay_epochs``, ``0.1^m`` after ``m`` of those numbers of epochs are done. Wang et al.'s (2021, §4.1)
    ImageNet schedule is ``warmup_epochs=5, lr_decay_epochs=[30, 60, 80, 90]``. ``warmup_epochs`` beyond
    ``epochs`` warns with :class:`ScheduleWarning` (``warmup_steps`` beyond the run: :func:`run_length` warns)."""
    if config.warmup_epochs > config.epochs:
        message = f"the warm-up ({config.warmup_epochs} epochs) is longer than the run ({config.epochs} epoch(s))"
        warnings.warn(f"{message}, so the learning rate never reaches lr={config.lr}", ScheduleWarning, stacklevel=3)
    warmup = config.warmup_steps + config.warmup_epochs * steps_per_epoch  # one of them is 0 (TrainConfig)
    milestones = [epoch * steps_per_epoch for epoch in config.lr_decay_epochs]

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if milestones:
            return 0.1 ** sum(step >= milestone for milestone in milestones)
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return factor
