"""The run folder: checked writable before training, files replaced atomically, checkpoints safe to load.

A checkpoint holds only tensors, plain containers (dict, list, tuple) and primitives (int, float, str, bool,
None): the model, optimizer and scheduler state dicts, the number of steps taken, the metrics of every step and the
random state (:func:`random_state`, which dropout and stochastic depth draw from, so a resumed run draws what the
uninterrupted one drew; a checkpoint written before it was kept resumes without it).
It is loaded with ``torch.load(weights_only=True)``, which builds nothing else, so a tampered file cannot run
code: it is refused with :class:`CheckpointError`. Every file of the folder is written to a temporary file beside
it, flushed to disk and renamed over the old one (``os.replace`` is atomic), so a crash, a signal or a full disk
in the middle of a write leaves the previous version whole.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

__all__ = [
    "CHECKPOINT",
    "CheckpointError",
    "RunFolderError",
    "check_run_folder",
    "load_checkpoint",
    "save_checkpoint",
    "random_state",
    "restore_random_state",
    "write_atomically",
]

CHECKPOINT = "checkpoint.pt"
_ENTRIES = ("model", "optimizer", "scheduler", "step", "history")


class CheckpointError(RuntimeError):
    """A file is not a neuralode_tf checkpoint: it cannot be read, lacks a checkpoint's entries, or holds objects
    other than tensors, plain containers and primitives (unsafe to load; it was not loaded)."""


class RunFolderError(OSError):
    """The run folder cannot be created or written; ``errno`` is that of the failed operation."""


def check_run_folder(folder: Path) -> None:
    """Create ``folder`` if needed and check that files can be created in it (a probe file, removed at once).

    Raises:
        RunFolderError: ``folder`` cannot be created, or is not writable.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as error:
        message = f"cannot write to the run folder {folder} ({error}); choose another out_dir"
        raise _folder_error(message, error) from error


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Replace ``path`` by what ``write`` writes to a binary handle, atomically: through ``path.tmp``, flushed to disk
    and renamed over ``path``.

    Raises:
        RunFolderError: the write failed (e.g. ``ENOSPC``, a full disk); ``path`` is unchanged and ``path.tmp`` removed.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write as a RuntimeError
        message = f"could not write {path} ({error}); the previous {path.name} is unchanged"
        raise _folder_error(message, error) from error
    finally:
        tmp.unlink(missing_ok=True)  # gone already after a successful rename


def save_checkpoint(folder: Path, config: dict[str, Any], state: dict[str, Any]) -> None:
    """Write ``config.json`` (the run's settings) and then :data:`CHECKPOINT` (``state``: the entries listed in the
    module docstring) to ``folder``, each atomically. Written together, they describe the same run, and an earlier
    run's files in ``folder`` are only replaced once this run has a checkpoint of its own."""
    write_atomically(folder / "config.json", lambda handle: handle.write(json.dumps(config, indent=2).encode()))
    write_atomically(folder / CHECKPOINT, lambda handle: torch.save(state, handle))


def load_checkpoint(path: str | Path, map_location: str | torch.device | None = None) -> dict[str, Any]:
    """The state written by :func:`save_checkpoint`, loaded with ``torch.load(weights_only=True)``.

    Raises:
        CheckpointError: ``path`` holds objects other than tensors, plain containers and primitives (nothing in it
            is run), is corrupt (bytes that no pickle writes), is a directory or unreadable, cannot be read as a torch
            file, or lacks an entry of a checkpoint.
    """
    path = Path(path)
    refused = f"{path} is not a neuralode_tf checkpoint"
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except IsADirectoryError:
        raise CheckpointError(f"{refused}: it is a directory") from None
    except OSError as error:
        raise CheckpointError(f"{refused}: it cannot be read ({error.strerror or error})") from None
    except pickle.UnpicklingError as error:
        # torch's reason, up to its advice (which is to allow-list what the file names, or to load it unsafely)
        reason = re.search(r"WeightsUnpickler error:\s*(.*?)(?:\.\s|\n\n|$)", str(error), re.DOTALL)
        detail = f" ({' '.join(reason.group(1).split())})" if reason else ""
        if not re.search(r"Unsupported (global|class)|GLOBAL", str(error)):  # bytes no pickle writes: not a refusal
            raise CheckpointError(f"{refused}: it is corrupt, not a file torch.save writes{detail}") from error
        raise CheckpointError(
            f"{refused}: it holds something other than tensors, plain containers and numbers{detail}, which could run "
            "code when loaded, so it was not loaded"
        ) from error
    except (RuntimeError, EOFError, KeyError, ValueError) as error:
        raise CheckpointError(f"{refused}: torch cannot read it ({error})") from error
    missing = [entry for entry in _ENTRIES if entry not in state] if isinstance(state, dict) else list(_ENTRIES)
    if missing:
        raise CheckpointError(f"{refused}: it lacks {', '.join(missing)}")
    return state


def random_state(device: torch.device) -> dict[str, torch.Tensor]:
    """Torch's global random state: the CPU generator's, and the device's on CUDA."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_random_state(state: dict[str, Any], device: torch.device) -> None:
    """Put back what :func:`random_state` took (on the CPU, wherever the checkpoint was loaded to)."""
    if "random" not in state:  # a checkpoint from before the random state was kept
        return
    torch.set_rng_state(state["random"]["cpu"].cpu())
    if device.type == "cuda" and "cuda" in state["random"]:
        torch.cuda.set_rng_state(state["random"]["cuda"].cpu(), device)


def _folder_error(message: str, cause: OSError | RuntimeError) -> RunFolderError:
    """A :class:`RunFolderError` with ``message`` and the ``errno`` of ``cause`` (``None`` for a RuntimeError)."""
    error = RunFolderError(message)
    error.errno = getattr(cause, "errno", None)
    return error
