"""Training: presets, the loop (checkpoints, exact resume, DDP), and the ``neuralode-tf`` command."""

from .config import TrainConfig, apply_overrides, load_config
from .loop import NonFiniteLossError, evaluate, train
from .presets import PRESETS, Preset
from .tasks import Task, build_task

__all__ = [
    "train",
    "evaluate",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "NonFiniteLossError",
    "PRESETS",
    "Preset",
    "Task",
    "build_task",
]
