"""The notebooks' setup helper: the preamble shared by ``tutorials/*.py`` and ``paper_repro/*.py``, in one call.

Each notebook starts with ``NB = setup(...)`` (``from neuralode_tf.notebook import setup``), which

* reads the size preset from ``NEURALODE_TF_FULL``: ``1`` selects the full settings; unset, empty or ``0``
  the quick ones, which CI runs; any other value is refused, rather than read as quick;
* runs torch on one thread, for bit-for-bit reproducible reductions (the recordings ran with
  ``OMP_NUM_THREADS=1``), and seeds torch's generator when the notebook asks;
* silences the third-party warnings listed in ``_THIRD_PARTY_NOISE``, each by its message and the module
  that issues it, and nothing else. A warning from ``neuralode_tf`` (a ``CausalityWarning``, a
  ``ScheduleWarning``, a non-finite probe) tells the reader that something is off, so it stays visible;
* makes an empty scratch folder ``<tmp>/<work>/<full|quick>`` for the runs the notebook writes;
* checks that a reproduction notebook finds its recordings, ``../experiments/<experiment>``, which holds
  only when it runs from ``paper_repro/``;
* prints one line: the versions of ``neuralode_tf``, ``torch`` and the packages the notebook names, and
  the preset.

``import neuralode_tf`` does not import this module: only the notebooks need it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["NotebookSettings", "setup"]

_FULL_VARIABLE = "NEURALODE_TF_FULL"

# (message, category, issuing module) of each third-party warning seen in the executed notebooks that says
# nothing about the notebook's own code, so that its reader can do nothing about it. Both patterns are
# regular expressions matched from the start (the message case-insensitively).
_THIRD_PARTY_NOISE: tuple[tuple[str, type[Warning], str], ...] = (
    # torch_geometric applies torch.jit.script to its pooling outputs when torch_geometric.nn is imported (by the
    # point-cloud presets), and torch deprecates torch.jit.script; seen in paper_repro/ot_transformer.
    (r"`torch\.jit\.script` is deprecated", FutureWarning, r"torch\.jit\._script\Z"),
)


@dataclass(frozen=True)
class NotebookSettings:
    """What a notebook's preamble set up.

    Attributes:
        full: Whether the full-size preset runs (``NEURALODE_TF_FULL=1``) rather than the quick one.
        start: ``time.perf_counter()`` at setup, for the notebook's closing "ran in" line.
        work: The notebook's scratch folder, empty at setup; ``None`` if it asked for none.
        recorded: The reproduction's recordings, ``../experiments/<experiment>``; ``None`` if it named none.
    """

    full: bool
    start: float
    work: Path | None
    recorded: Path | None


def setup(
    *,
    versions: Sequence[str] = (),
    seed: int | None = None,
    work: str | None = None,
    experiment: str | None = None,
) -> NotebookSettings:
    """Run a notebook's preamble (see the module docstring) and return its settings.

    Args:
        versions: Importable names of the packages, besides ``neuralode_tf`` and ``torch``, whose
            ``__version__`` the versions line shows.
        seed: Seed for torch's generator; ``None`` leaves it alone.
        work: Name of the scratch folder under the temporary directory (``tempfile.gettempdir()``, which
            honours ``TMPDIR``). Whatever a previous run left in ``<work>/<full|quick>`` is deleted.
        experiment: Name of the folder of ``../experiments`` that holds the notebook's recordings.

    Raises:
        ValueError: ``NEURALODE_TF_FULL`` is set to something other than ``0``, ``1`` or nothing.
        FileNotFoundError: ``experiment`` is given and ``../experiments/<experiment>`` is not a folder.
    """
    start = time.perf_counter()
    for message, category, module in _THIRD_PARTY_NOISE:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
    full = _full_preset()
    torch.set_num_threads(1)
    if seed is not None:
        torch.manual_seed(seed)
    recorded = None if experiment is None else _recordings(experiment)
    folder = None if work is None else _fresh_folder(Path(tempfile.gettempdir()) / work / ("full" if full else "quick"))
    names = ("neuralode_tf", "torch", *versions)
    print(", ".join(f"{name} {importlib.import_module(name).__version__}" for name in names) + f", FULL={full}")
    return NotebookSettings(full=full, start=start, work=folder, recorded=recorded)


def _full_preset() -> bool:
    value = os.environ.get(_FULL_VARIABLE, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{_FULL_VARIABLE}={value!r}: 1 selects the full preset, 0 or unset the quick one")
    return value == "1"


def _recordings(experiment: str) -> Path:
    folder = Path("..") / "experiments" / experiment
    if not folder.is_dir():
        raise FileNotFoundError(f"no recordings at {folder.resolve()}: run this notebook from paper_repro/")
    return folder


def _fresh_folder(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder
