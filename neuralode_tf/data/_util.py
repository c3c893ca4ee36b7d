"""Helpers shared by the dataset modules: optional imports, dataset folders, stratified splits."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import torch
from torch import Tensor

from .errors import DatasetNotFoundError


def require(module: str, *, package: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or raise an ``ImportError`` that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{purpose} needs the {package!r} package: pip install {package} (or neuralode-tf[{extra}])"
        ) from err


def point_cloud_class() -> type:
    """``torch_geometric.data.Data``, the class of a point cloud (``pos=(n, 3)``, ``y=(1,)``)."""
    return require("torch_geometric.data", package="torch-geometric", extra="graph", purpose="point clouds").Data


def locate(root: str | Path, folder: str, layout: str) -> Path:
    """``root/folder`` if that folder exists, else ``root`` itself, which must exist.

    Loaders accept both the folder an archive extracts to and its parent.
    """
    root = Path(root).expanduser()
    if (root / folder).is_dir():
        return root / folder
    if not root.is_dir():
        raise DatasetNotFoundError(f"no folder {root}; expected {layout}")
    return root


def existing(path: Path, layout: str) -> Path:
    """``path`` if it exists, else a :class:`DatasetNotFoundError` naming the expected layout."""
    if not path.exists():
        raise DatasetNotFoundError(f"missing {path}; expected {layout}")
    return path


def stratified_split(labels: Tensor, test_fraction: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Indices of a random train/test split that puts ``round(test_fraction * n_c)`` of each class ``c`` in test.

    Both index tensors are in random order.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    order = torch.randperm(len(labels), generator=generator)
    shuffled = labels[order]
    is_test = torch.zeros(len(labels), dtype=torch.bool)
    for c in shuffled.unique():
        members = order[shuffled == c]
        is_test[members[: round(test_fraction * len(members))]] = True
    return order[~is_test[order]], order[is_test[order]]
