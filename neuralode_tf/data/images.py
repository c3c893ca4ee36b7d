"""Images and 1-D signals: the ``digits`` and ``mnist1d`` stand-ins and the MNIST and CIFAR-100 file loaders."""

from __future__ import annotations

import gzip
import pickle
import random
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ._util import existing, locate, require, stratified_split
from .errors import DatasetFormatError
from .splits import Splits, TensorSplit

__all__ = ["digits", "mnist1d", "load_mnist", "load_cifar100", "load_catsdogs", "read_idx"]


def digits(*, test_fraction: float = 0.2, seed: int = 0) -> Splits:
    """scikit-learn's handwritten digits (UCI ML, 1,797 images of 8x8 pixels, 10 classes) as images in ``[0, 1]``.

    Args:
        test_fraction: Share of each class that goes to the test split (0.2 gives 1,438 / 359).
        seed: Seed of the stratified split.

    Returns:
        ``"image"`` splits with ``x`` of shape ``(N, 1, 8, 8)``.
    """
    datasets = require("sklearn.datasets", package="scikit-learn", extra="data", purpose="digits")
    bunch = datasets.load_digits()
    x = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.as_tensor(bunch.target, dtype=torch.long)
    train, test = stratified_split(y, test_fraction, torch.Generator().manual_seed(seed))
    return Splits(
        name="digits",
        kind="image",
        train=TensorSplit(x=x[train], y=y[train]),
        test=TensorSplit(x=x[test], y=y[test]),
        description=f"sklearn.datasets.load_digits (UCI handwritten digits 8x8), {len(train)} train / {len(test)} test",
        classes=tuple(str(c) for c in range(10)),
    )


def mnist1d(*, num_samples: int = 5000, seed: int = 42) -> Splits:
    """MNIST-1D (Greydanus 2020): 10 digit templates turned into noisy length-40 signals, generated locally.

    Runs ``mnist1d.data.make_dataset`` (never ``get_dataset``, which downloads). The defaults give the
    published set: 4,000 train / 1,000 test signals. ``make_dataset`` seeds Python's and NumPy's global
    generators; their states are restored afterwards.

    Args:
        num_samples: Total number of signals, split 80/20; rounded down to a multiple of 10 (equal classes).
        seed: The generator's seed; 42 is the published dataset.

    Returns:
        ``"signal"`` splits with ``x`` of shape ``(N, 40)``, standardised over the whole set.
    """
    data = require("mnist1d.data", package="mnist1d", extra="data", purpose="mnist1d")
    args = data.get_dataset_args()
    args.num_samples, args.seed = num_samples, seed
    states = random.getstate(), np.random.get_state()
    try:
        raw = data.make_dataset(args)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
    train = TensorSplit(x=torch.as_tensor(raw["x"], dtype=torch.float32), y=torch.as_tensor(raw["y"]).long())
    test = TensorSplit(x=torch.as_tensor(raw["x_test"], dtype=torch.float32), y=torch.as_tensor(raw["y_test"]).long())
    return Splits(
        name="mnist1d",
        kind="signal",
        train=train,
        test=test,
        description=f"MNIST-1D via mnist1d.data.make_dataset (seed {seed}), {len(train)} train / {len(test)} test",
        classes=tuple(str(c) for c in range(10)),
    )


# --------------------------------------------------------------------------------------------
# MNIST IDX files
# --------------------------------------------------------------------------------------------

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_MNIST_LAYOUT = (
    "a folder (or its MNIST/raw/ subfolder) with train-images-idx3-ubyte, train-labels-idx1-ubyte, "
    "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each optionally gzipped (.gz)"
)


def read_idx(path: str | Path) -> Tensor:
    """The array in an IDX file (the format of MNIST and Fashion-MNIST), gzipped if the name ends in ``.gz``."""
    path = Path(path)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DatasetFormatError(f"{path} is not a valid gzip file: {err}") from err
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in _IDX_DTYPES:
        raise DatasetFormatError(f"{path} is not an IDX file: it must start with 0x00 0x00 <type code> <ndim>")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw[4:header], dtype=">u4"))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    if len(raw) != header + dtype.itemsize * int(np.prod(shape)):
        raise DatasetFormatError(f"{path}: the header says shape {shape} of {dtype}, but the file has {len(raw)} bytes")
    return torch.from_numpy(
        np.frombuffer(raw, dtype=dtype, offset=header).astype(dtype.newbyteorder("=")).reshape(shape)
    )


def load_mnist(root: str | Path) -> Splits:
    """MNIST (or Fashion-MNIST) from its IDX files: 60,000 train / 10,000 test images of 28x28, 10 classes.

    Args:
        root: Folder with the four IDX files (or with ``MNIST/raw/``, torchvision's layout).

    Returns:
        ``"image"`` splits with ``x`` float ``(N, 1, 28, 28)`` in ``[0, 1]``.
    """
    folder = locate(root, "MNIST/raw", _MNIST_LAYOUT)
    splits = {}
    for split, (image_name, label_name) in _MNIST_FILES.items():
        images, labels = (read_idx(_idx_path(folder, name)) for name in (image_name, label_name))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DatasetFormatError(
                f"{folder}: {split} images of shape {tuple(images.shape)} and labels of shape "
                f"{tuple(labels.shape)} do not match; expected (N, H, W) and (N,)"
            )
        splits[split] = TensorSplit(x=images.unsqueeze(1).float() / 255.0, y=labels.long())
    return Splits(
        name="mnist",
        kind="image",
        train=splits["train"],
        test=splits["test"],
        description=f"MNIST IDX files in {folder}, {len(splits['train'])} train / {len(splits['test'])} test",
        classes=tuple(str(c) for c in range(10)),
    )


def _idx_path(folder: Path, name: str) -> Path:
    plain = folder / name
    return plain if plain.exists() else existing(folder / f"{name}.gz", _MNIST_LAYOUT)


# --------------------------------------------------------------------------------------------
# CIFAR-100 python pickles
# --------------------------------------------------------------------------------------------

_CIFAR_LAYOUT = "cifar-100-python/ with the pickles train, test and optionally meta (the python version's archive)"


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, numbers, strings and NumPy arrays, and refuses everything else.

    Pickles can run arbitrary code; the CIFAR files need nothing beyond NumPy's array reconstruction.
    """

    _ALLOWED = {
        ("_codecs", "encode"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        *((f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")),
        *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self._ALLOWED:
            raise DatasetFormatError(f"refusing to unpickle {module}.{name}: not part of a CIFAR pickle")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            content = _ArrayUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as err:
        raise DatasetFormatError(f"{path} is not a CIFAR python pickle ({err}); expected {_CIFAR_LAYOUT}") from err
    if not isinstance(content, dict):
        raise DatasetFormatError(f"{path} holds a {type(content).__name__}, expected a dict; {_CIFAR_LAYOUT}")
    return content


def load_cifar100(root: str | Path) -> Splits:
    """CIFAR-100 from the python pickles: 50,000 train / 10,000 test images of 32x32, 100 fine classes.

    The pickles are read with an unpickler that only accepts NumPy arrays and plain containers.

    Args:
        root: The ``cifar-100-python`` folder or its parent.

    Returns:
        ``"image"`` splits with ``x`` float ``(N, 3, 32, 32)`` in ``[0, 1]``; class names from ``meta`` if present.
    """
    folder = locate(root, "cifar-100-python", _CIFAR_LAYOUT)
    splits = {}
    for split in ("train", "test"):
        path = existing(folder / split, _CIFAR_LAYOUT)
        content = _unpickle(path)
        if b"data" not in content or b"fine_labels" not in content:
            raise DatasetFormatError(f"{path} has keys {sorted(content)}, expected b'data' and b'fine_labels'")
        data, labels = np.asarray(content[b"data"]), np.asarray(content[b"fine_labels"])
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
            raise DatasetFormatError(
                f"{path}: data of shape {data.shape} with {len(labels)} labels; expected (N, 3072) uint8 and N labels"
            )
        x = torch.from_numpy(data.astype(np.float32) / 255.0).reshape(-1, 3, 32, 32)
        splits[split] = TensorSplit(x=x, y=torch.from_numpy(labels.astype(np.int64)))
    meta = folder / "meta"
    names = _unpickle(meta).get(b"fine_label_names") if meta.exists() else None
    classes = tuple(n.decode() for n in names) if names else tuple(str(c) for c in range(100))
    return Splits(
        name="cifar100",
        kind="image",
        train=splits["train"],
        test=splits["test"],
        description=f"CIFAR-100 python pickles in {folder}, {len(splits['train'])} train / {len(splits['test'])} test",
        classes=classes,
    )


_CATSDOGS_LAYOUT = "Kaggle dogs-vs-cats: a folder train/ (or the folder itself) with cat.<k>.jpg and dog.<k>.jpg"


def load_catsdogs(
    root: str | Path, *, image_size: int = 224, test_fraction: float = 0.2, max_images: int | None = None, seed: int = 0
) -> Splits:
    """Kaggle's dogs-vs-cats ``train/`` images (25,000 JPEGs), resized, with a seeded stratified split.

    Sinkformers' and Kan et al.'s Cats & Dogs experiment splits this folder 80/20 (without a seed;
    here it is seeded). Images are resized to ``image_size`` x ``image_size`` with bilinear
    filtering and held in memory as float32 in ``[0, 1]``: 0.6 MB each at 224, so use
    ``image_size`` or ``max_images`` to fit the memory at hand.

    Args:
        root: The ``train`` folder or its parent.
        image_size: Side of the resized square images.
        test_fraction: Share of each class in the test split.
        max_images: Keep a seeded random subset of this many files (before the split).
        seed: Seed of the subset and the split.

    Returns:
        ``"image"`` splits with ``x`` float ``(N, 3, image_size, image_size)``; classes ``("cat", "dog")``.
    """
    image = require("PIL.Image", package="pillow", extra="vision", purpose="reading the Cats & Dogs JPEGs")
    folder = locate(root, "train", _CATSDOGS_LAYOUT)
    files = sorted(
        p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg") and p.name[:4] in ("cat.", "dog.")
    )
    if not files:
        raise DatasetFormatError(f"{folder} has no cat.*.jpg or dog.*.jpg files; expected {_CATSDOGS_LAYOUT}")
    generator = torch.Generator().manual_seed(seed)
    if max_images is not None:
        files = [files[i] for i in torch.randperm(len(files), generator=generator)[:max_images].tolist()]
    pixels = np.empty((len(files), image_size, image_size, 3), dtype=np.uint8)
    for i, path in enumerate(files):
        try:
            with image.open(path) as img:
                pixels[i] = np.asarray(img.convert("RGB").resize((image_size, image_size), image.BILINEAR))
        except OSError as err:
            raise DatasetFormatError(f"{path} is not a readable image ({err}); expected {_CATSDOGS_LAYOUT}") from err
    x = torch.from_numpy(pixels).permute(0, 3, 1, 2).float() / 255.0
    y = torch.tensor([int(p.name.startswith("dog.")) for p in files])
    train, test = stratified_split(y, test_fraction, generator)
    return Splits(
        name="catsdogs",
        kind="image",
        train=TensorSplit(x=x[train], y=y[train]),
        test=TensorSplit(x=x[test], y=y[test]),
        description=f"dogs-vs-cats in {folder} at {image_size}x{image_size}, {len(train)} train / {len(test)} test",
        classes=("cat", "dog"),
    )
