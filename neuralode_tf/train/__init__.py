"""Training: presets, the loop (checked settings, safe checkpoints, exact resume, signals, DDP), and the
``neuralode-tf`` command.

A preset's run from Python is its run from the command line (``neuralode-tf train vit_digits --set epochs=5``)::

    from neuralode_tf.train import TrainConfig, train
    result = train(TrainConfig("vit_digits", epochs=5))  # the fields not given are the preset's
    print(result["test_accuracy"])
"""

from .._renamed import renamed_names
from ._checkpoint import CheckpointError, RunFolderError, load_checkpoint
from ._signals import TrainingInterrupted
from ._validate import ScheduleWarning
from .compare import compare_variants, learning_curve, markdown_table, step_sweep, summarize
from .config import ConfigError, TrainConfig, apply_overrides, load_config
from .loop import NonFiniteLossError, evaluate, train
from .metrics import METRICS
from .presets import EA_VARIANTS, OT_VARIANTS, PRESETS, TRANSEVOLVE_LISTOPS_VARIANTS, VARIANTS, Preset, register_preset
from .runs import load_run
from .setup import ModelInputError, Setup, build_setup, check_model_inputs

__all__ = [
    "train",
    "evaluate",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "NonFiniteLossError",
    "ConfigError",
    "ScheduleWarning",
    "CheckpointError",
    "RunFolderError",
    "TrainingInterrupted",
    "load_checkpoint",
    "load_run",
    "PRESETS",
    "register_preset",
    "OT_VARIANTS",
    "EA_VARIANTS",
    "TRANSEVOLVE_LISTOPS_VARIANTS",
    "VARIANTS",
    "compare_variants",
    "summarize",
    "markdown_table",
    "step_sweep",
    "learning_curve",
    "METRICS",
    "Preset",
    "Setup",
    "build_setup",
    "check_model_inputs",
    "ModelInputError",
]

_RENAMED = {"Task": "Setup", "build_task": "build_setup"}
"""Names deprecated in 0.1.0, removed in the next release: old name -> new name. "Task" now means only the problem a
dataset poses (GLUE's tasks, the seq2seq toy tasks)."""

__getattr__ = renamed_names(__name__, _RENAMED, globals())
"""The deprecated names of :data:`_RENAMED`, with a :class:`DeprecationWarning` naming the new one."""


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
