"""ImageNet (ILSVRC-2012) from its class folders, decoded when a batch is drawn: :func:`load_imagenet`.

Wang et al. (2021, §4.1) train their AA-ResNets and EA-AA-ResNets "by 1.28 million training images" and report the
accuracy "on 50k validation images": far too many to hold in memory (a 224 x 224 float image takes 0.6 MB), so the
splits hold the file names and the labels, and ``split.x[rows]`` reads, decodes and transforms those images only,
in ``workers`` threads. The files are listed by torchvision's ``ImageFolder`` and decoded by its loader; the
transforms are torchvision's standard ResNet ones (He et al. 2016, as in torchvision's ImageNet reference):

* train: ``RandomResizedCrop(S)`` (a crop of 8-100 % of the area and aspect ratio 3/4-4/3, resized to S x S),
  ``RandomHorizontalFlip()``, then normalised with the ImageNet mean and standard deviation;
* validation: ``Resize(S * 256 // 224)`` (the shorter side; 256 for S = 224), ``CenterCrop(S)``, normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ._util import require
from .errors import DatasetFormatError, DatasetNotFoundError
from .splits import Splits, TensorSplit

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "FolderImages", "load_imagenet"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
"""The per-channel mean of the ImageNet training images (RGB, in ``[0, 1]``), subtracted by the normalisation."""
IMAGENET_STD = (0.229, 0.224, 0.225)
"""Their per-channel standard deviation, which the normalisation divides by."""

_LAYOUT = (
    "root/train/<wnid>/*.JPEG and root/val/<wnid>/*.JPEG (torchvision's ImageFolder layout: one folder per class, "
    "e.g. n01440764, with the same classes in train/ and val/, the validation images sorted into them)"
)


class FolderImages:
    """The images of a torchvision ``ImageFolder``, read when indexed: ``images[rows]`` is a float tensor
    ``(len(rows), 3, S, S)`` (``images[i]``: ``(3, S, S)``), normalised with :data:`IMAGENET_MEAN` and
    :data:`IMAGENET_STD`; the ``x`` of :func:`load_imagenet`'s splits.

    With ``augment=True`` image ``row`` of a batch is ``Compose([RandomResizedCrop(S), RandomHorizontalFlip(),
    ToTensor(), Normalize(mean, std)])`` of its file after ``torch.manual_seed(b + row)``, where ``b`` is one number
    in ``[0, 2^62)`` drawn from torch's global generator per batch (and the global state is put back): bit for bit,
    however many threads decode the batch (a test). So the processes of a DDP run, whose generators are seeded
    alike, crop their different rows differently. Otherwise it is ``Resize(S * 256 // 224)``, ``CenterCrop(S)``,
    then the same two.

    Args:
        folder: A ``torchvision.datasets.ImageFolder`` (its ``samples`` and ``loader``).
        image_size: ``S``.
        augment: Random crops and flips (training) or the centre crop (evaluation).
        workers: Threads that decode a batch.
    """

    def __init__(self, folder: Any, image_size: int, *, augment: bool, workers: int) -> None:
        transforms = _vision("torchvision.transforms")
        self.paths: list[str] = [path for path, _ in folder.samples]
        self.loader = folder.loader
        self.image_size, self.augment, self.workers = image_size, augment, workers
        self._crop = transforms.RandomResizedCrop(image_size)
        self._center = transforms.Compose(
            [transforms.Resize(image_size * 256 // 224), transforms.CenterCrop(image_size)]
        )
        self._tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    @property
    def shape(self) -> torch.Size:
        """``(N, 3, S, S)``, the shape of ``images[:]``."""
        return torch.Size((len(self), 3, self.image_size, self.image_size))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int | slice | Sequence[int] | Tensor) -> Tensor:
        rows = torch.arange(len(self))[index]  # a tensor's indexing: ints, slices, lists, index and bool tensors
        if rows.ndim == 0:
            return self[rows.reshape(1)][0]
        paths = [self.paths[row] for row in rows.tolist()]
        batch = int(torch.randint(2**62, ())) if self.augment else 0
        draws = [self._draw(path, batch + row) for path, row in zip(paths, rows.tolist())]
        if self.workers == 1 or len(paths) < 2:
            images = list(map(self._image, paths, draws))
        else:
            with ThreadPoolExecutor(min(self.workers, len(paths))) as pool:
                images = list(pool.map(self._image, paths, draws))
        return torch.stack(images) if images else torch.empty(0, *self.shape[1:])

    def _draw(self, path: str, seed: int) -> tuple[tuple[int, int, int, int], bool] | None:
        """The crop ``(top, left, height, width)`` and the flip of an augmented image, drawn after
        ``torch.manual_seed(seed)`` as ``RandomResizedCrop`` then ``RandomHorizontalFlip`` draw them (from the file's
        size, read from its header)."""
        if not self.augment:
            return None
        try:
            with _vision("PIL.Image").open(path) as image, torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                return self._crop.get_params(image, self._crop.scale, self._crop.ratio), bool(torch.rand(1) < 0.5)
        except OSError as error:
            raise DatasetFormatError(f"{path} is not a readable image ({error}); expected {_LAYOUT}") from error

    def _image(self, path: str, draw: tuple[tuple[int, int, int, int], bool] | None) -> Tensor:
        try:
            image = self.loader(path)
        except OSError as error:
            raise DatasetFormatError(f"{path} is not a readable image ({error}); expected {_LAYOUT}") from error
        if draw is None:
            return self._tensor(self._center(image))
        (top, left, height, width), flip = draw
        functional, crop = _vision("torchvision.transforms.functional"), self._crop
        image = functional.resized_crop(
            image, top, left, height, width, crop.size, crop.interpolation, antialias=crop.antialias
        )
        return self._tensor(functional.hflip(image) if flip else image)

    def __repr__(self) -> str:
        kind = "augmented" if self.augment else "centre-cropped"
        return f"FolderImages({len(self)} {kind} images of {self.image_size}x{self.image_size})"


def load_imagenet(root: str | Path, *, image_size: int = 224, workers: int = 8) -> Splits:
    """ImageNet's training and validation images (1,281,167 and 50,000 in 1,000 classes for ILSVRC-2012) from
    ``root/train/<wnid>/`` and ``root/val/<wnid>/``, read lazily (see :class:`FolderImages`).

    The paper's setting (Wang et al. 2021, §4.1, following Bello et al. 2019): 224 x 224 crops, the standard ResNet
    augmentation for training (random-resized crops and horizontal flips), the resized centre crop for validation.
    The crops and flips depend on one draw of torch's global generator per batch, which
    :func:`~neuralode_tf.train.train` seeds with the run's ``seed``: a run is reproducible from its start, but the
    checkpoint does not hold the generator, so a resumed run draws other crops than the uninterrupted one would
    (the model and optimizer states are restored from the checkpoint as for every preset: tests/test_checkpoints.py).

    Args:
        root: The folder holding ``train/`` and ``val/`` (the validation images in class folders, e.g. sorted with
            the ``LOC_val_solution.csv`` of the Kaggle release or the usual ``valprep.sh``).
        image_size: ``S``: the side of the square crops.
        workers: Threads that decode a batch's images.

    Returns:
        ``"image"`` splits ``train`` and ``test`` (the validation images), whose ``x`` is a :class:`FolderImages`:
        ``x[rows]`` is float ``(len(rows), 3, S, S)``, normalised (not in ``[0, 1]``), and ``y`` the long labels;
        ``classes`` are the folder names (wnids) in sorted order, label ``k`` the ``k``-th.

    Raises:
        DatasetNotFoundError: ``root``, ``root/train`` or ``root/val`` is not a folder.
        DatasetFormatError: a split has no class folders or a class folder no image, or the splits' classes
            differ; on indexing, a file that is not a readable image. Each names the expected layout.
    """
    for name, value in (("image_size", image_size), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    datasets = _vision("torchvision.datasets")
    root = Path(root).expanduser()
    for split in ("train", "val"):  # both, before listing 1.28 million files
        if not (root / split).is_dir():
            raise DatasetNotFoundError(f"no folder {root / split}; expected {_LAYOUT}")
    folders = {split: _image_folder(datasets, root / split) for split in ("train", "val")}
    if folders["train"].classes != folders["val"].classes:
        only = sorted(set(folders["train"].classes) ^ set(folders["val"].classes))
        raise DatasetFormatError(
            f"{root}: train/ has {len(folders['train'].classes)} classes and val/ {len(folders['val'].classes)}, "
            f"which differ ({', '.join(only[:5]) or 'in order'}); expected {_LAYOUT}"
        )
    train, test = (
        TensorSplit(
            x=FolderImages(folder, image_size, augment=split == "train", workers=workers),  # type: ignore[arg-type]
            y=torch.tensor(folder.targets, dtype=torch.long),
        )
        for split, folder in folders.items()
    )
    return Splits(
        name="imagenet",
        kind="image",
        train=train,
        test=test,
        description=(
            f"ImageNet folders in {root}, {len(train)} train / {len(test)} validation images, "
            f"{len(folders['train'].classes)} classes, {image_size}x{image_size} crops, read lazily"
        ),
        classes=tuple(folders["train"].classes),
    )


def _vision(module: str) -> Any:
    """``module`` of torchvision (a dependency of timm) or of pillow, or the ``ImportError`` saying how to install
    it."""
    package = "pillow" if module.startswith("PIL") else "torchvision"
    return require(module, package=package, extra="vision", purpose="ImageNet")


def _image_folder(datasets: Any, folder: Path) -> Any:
    """``ImageFolder(folder)``, or the error naming the layout."""
    try:
        return datasets.ImageFolder(folder)
    except FileNotFoundError as error:  # no class folders, or a class folder without images
        raise DatasetFormatError(f"{folder}: {error}; expected {_LAYOUT}") from error
