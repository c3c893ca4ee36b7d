"""ModelNet40 point clouds read from disk: OFF meshes sampled by area, or DeepSets' HDF5 clouds.

Nothing downloads: the loaders read the archives a user already has (``data.root=``). The offline
stand-in is :func:`~neuralode_tf.data.shapes3d.shapes3d`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ._util import existing, locate, point_cloud_class, require
from .errors import DatasetFormatError, DatasetNotFoundError
from .shapes3d import fan_triangles, sample_triangles
from .splits import Splits

__all__ = ["read_off", "load_modelnet40", "load_modelnet40_h5"]

_OFF_LAYOUT = "ModelNet40/<class>/{train,test}/*.off (the ModelNet40.zip archive of Princeton's ModelNet)"
_H5_LAYOUT = "ModelNet40_cloud.h5 with datasets tr_cloud, tr_labels, test_cloud, test_labels (DeepSets' file)"


def read_off(path: str | Path) -> tuple[Tensor, Tensor]:
    """Vertices ``(V, 3)`` float64 and triangles ``(F, 3)`` long of an OFF mesh.

    Polygons are split into triangle fans; ``#`` comments and blank lines are skipped; a header whose
    counts follow ``OFF`` on the same line (``OFF490 518 0``, as in some ModelNet files) is accepted.
    """
    path = Path(path)
    lines = [line.split("#", 1)[0].split() for line in path.read_text(encoding="latin-1").splitlines()]
    lines = [line for line in lines if line]
    if not lines or not lines[0][0].startswith("OFF"):
        raise DatasetFormatError(f"{path} is not an OFF file: the first line must start with 'OFF'")
    counts_on_first_line = [token for token in (lines[0][0][3:], *lines[0][1:]) if token]
    lines = [counts_on_first_line, *lines[1:]] if counts_on_first_line else lines[1:]
    try:
        num_vertices, num_faces = int(lines[0][0]), int(lines[0][1])
        vertex_lines, face_lines = lines[1 : 1 + num_vertices], lines[1 + num_vertices : 1 + num_vertices + num_faces]
        vertices = torch.tensor([[float(c) for c in line[:3]] for line in vertex_lines], dtype=torch.float64)
        sizes = [int(line[0]) for line in face_lines]
        polygons = [[int(v) for v in line[1 : 1 + k]] for line, k in zip(face_lines, sizes)]
    except (ValueError, IndexError) as err:
        raise DatasetFormatError(f"{path}: malformed OFF content ({err})") from err
    if (
        vertices.shape != (num_vertices, 3)
        or len(face_lines) != num_faces
        or any(len(polygon) != k for polygon, k in zip(polygons, sizes))
    ):
        raise DatasetFormatError(
            f"{path}: the header announces {num_vertices} vertices and {num_faces} faces, "
            "but the file has fewer lines or shorter ones"
        )
    faces = fan_triangles(polygons)
    if len(faces) and (faces.min() < 0 or faces.max() >= num_vertices):
        raise DatasetFormatError(f"{path}: a face refers to a vertex outside 0..{num_vertices - 1}")
    return vertices, faces


def load_modelnet40(root: str | Path, *, num_points: int = 1024, seed: int = 0) -> Splits:
    """ModelNet40 (or ModelNet10) meshes, each turned into ``num_points`` points sampled uniformly by area.

    Classes are the sorted sub-folder names; files are read in sorted order and all sampled from one
    generator, so a seed gives the same clouds. Coordinates are left as in the files (their scales
    differ); ``torch_geometric.transforms.NormalizeScale`` rescales them.

    Args:
        root: The ``ModelNet40`` folder (``<class>/{train,test}/*.off``) or its parent.
        num_points: Points per cloud.
        seed: Seed of the sampling.

    Returns:
        ``"points"`` splits: lists of ``torch_geometric.data.Data(pos=(num_points, 3) float32, y=(1,))``.
    """
    data_class = point_cloud_class()
    folder = locate(root, "ModelNet40", _OFF_LAYOUT)
    classes = tuple(sorted(p.name for p in folder.iterdir() if p.is_dir()))
    if not classes:
        raise DatasetNotFoundError(f"no class folders in {folder}; expected {_OFF_LAYOUT}")
    generator = torch.Generator().manual_seed(seed)
    splits: dict[str, list] = {"train": [], "test": []}
    for label, name in enumerate(classes):
        for split, clouds in splits.items():
            for path in sorted(existing(folder / name / split, _OFF_LAYOUT).glob("*.off")):
                vertices, faces = read_off(path)
                try:
                    pos = sample_triangles(vertices, faces, num_points, generator=generator)
                except ValueError as err:
                    raise DatasetFormatError(f"{path}: {err}") from err
                clouds.append(data_class(pos=pos.float(), y=torch.tensor([label])))
    return Splits(
        name="modelnet40",
        kind="points",
        train=splits["train"],
        test=splits["test"],
        description=(
            f"ModelNet meshes in {folder}, {num_points} points sampled per mesh, "
            f"{len(splits['train'])} train / {len(splits['test'])} test, {len(classes)} classes"
        ),
        classes=classes,
    )


def load_modelnet40_h5(root: str | Path, *, num_points: int | None = None) -> Splits:
    """ModelNet40 point clouds from the HDF5 file used by the Set Transformer code (10,000 points per cloud).

    Args:
        root: ``ModelNet40_cloud.h5`` or the folder that holds it.
        num_points: Keep every ``k``-th point, ``k = points // num_points``, up to ``num_points`` points
            (the reference code's ``[::k]`` down-sampling); ``None`` keeps all.

    Returns:
        ``"points"`` splits of ``Data(pos, y)``; classes are named by their index (the file has no names).
    """
    h5py = require("h5py", package="h5py", extra="data", purpose="load_modelnet40_h5")
    data_class = point_cloud_class()
    path = Path(root).expanduser()
    path = existing(path / "ModelNet40_cloud.h5" if path.is_dir() else path, _H5_LAYOUT)
    try:
        with h5py.File(path, "r") as f:
            arrays = {key: np.asarray(f[key]) for key in ("tr_cloud", "tr_labels", "test_cloud", "test_labels")}
    except (OSError, KeyError) as err:
        raise DatasetFormatError(f"{path}: cannot read it as {_H5_LAYOUT} ({err})") from err
    splits = {}
    for split, prefix in (("train", "tr"), ("test", "test")):
        clouds, labels = arrays[f"{prefix}_cloud"], arrays[f"{prefix}_labels"].reshape(-1)
        if clouds.ndim != 3 or clouds.shape[2] != 3 or len(labels) != len(clouds):
            raise DatasetFormatError(
                f"{path}: {prefix}_cloud of shape {clouds.shape} with {len(labels)} labels; expected (N, P, 3) and N"
            )
        if num_points is not None:
            clouds = clouds[:, :: max(clouds.shape[1] // num_points, 1)][:, :num_points]
        pos = torch.from_numpy(clouds.astype(np.float32))
        splits[split] = [data_class(pos=p, y=torch.tensor([int(c)])) for p, c in zip(pos, labels)]
    num_classes = int(max(arrays["tr_labels"].max(), arrays["test_labels"].max())) + 1
    return Splits(
        name="modelnet40_h5",
        kind="points",
        train=splits["train"],
        test=splits["test"],
        description=f"ModelNet40 clouds from {path}, {len(splits['train'])} train / {len(splits['test'])} test",
        classes=tuple(str(c) for c in range(num_classes)),
    )
