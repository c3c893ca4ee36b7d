"""ImageNet from class folders (``load_imagenet``) and the paper presets of Wang et al. (2021, §4.1) on a fake folder:
the batches are torchvision's standard pipelines bit for bit, a missing or malformed folder names the layout, and
a preset trains through the command line with SGD, the warm-up and the step decays."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402  (after the skip: both come with the vision extra)
from torchvision import datasets, transforms  # noqa: E402

from neuralode_tf.data import (  # noqa: E402
    DATASETS,
    STAND_INS,
    DatasetFormatError,
    DatasetNotFoundError,
    Splits,
    TensorSplit,
    load,
    load_imagenet,
)
from neuralode_tf.data.imagenet import IMAGENET_MEAN, IMAGENET_STD, FolderImages  # noqa: E402
from neuralode_tf.train import PRESETS, VARIANTS, ScheduleWarning, TrainConfig, load_checkpoint  # noqa: E402
from neuralode_tf.train.cli import main  # noqa: E402
from neuralode_tf.train.presets.imagenet import IMAGENET_PRESETS, IMAGENET_VARIANTS  # noqa: E402

pytestmark = pytest.mark.cpu_only("reads image files and trains through the command line")

WNIDS = ("n01440764", "n01443537", "n01484850")
LAYOUT = r"root/train/<wnid>/\*\.JPEG and root/val/<wnid>/\*\.JPEG"
TINY_RESNET = [
    "model.layers=[1,1,1,1]",
    "model.channels=[8,16,32,64]",
    "model.num_heads=2",
    "model.min_key_dim_per_head=4",
    "model.small_images=true",
]


def fake_imagenet(root: Path, train: int = 4, val: int = 2) -> Path:
    """``root/{train,val}/<wnid>/*.JPEG``: random 40x48 JPEGs (one grey-scale per split), 3 classes."""
    rng = np.random.default_rng(0)
    for split, count in (("train", train), ("val", val)):
        for wnid in WNIDS:
            (root / split / wnid).mkdir(parents=True)
            for k in range(count):
                pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
                image = Image.fromarray(pixels[..., 0] if (wnid, k) == (WNIDS[1], 0) else pixels)
                image.save(root / split / wnid / f"{wnid}_{k}.JPEG", format="JPEG")
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return fake_imagenet(tmp_path_factory.mktemp("imagenet"))


def test_the_splits_hold_the_folders_images_and_labels(folder):
    data = load_imagenet(folder, image_size=32)
    assert isinstance(data, Splits) and (data.name, data.kind, data.classes) == ("imagenet", "image", WNIDS)
    assert isinstance(data.train, TensorSplit) and isinstance(data.train.x, FolderImages)
    assert (len(data.train), len(data.test)) == (12, 6) and data.num_classes == 3
    assert data.train.y.tolist() == [0] * 4 + [1] * 4 + [2] * 4 and data.test.y.tolist() == [0, 0, 1, 1, 2, 2]
    assert data.train.x.shape == (12, 3, 32, 32) and data.test.x.shape == (6, 3, 32, 32)
    batch = data.train.x[torch.tensor([5, 0, 11])]
    assert batch.shape == (3, 3, 32, 32) and batch.dtype == torch.float32
    assert data.test.x[4].shape == (3, 32, 32) and data.test.x[2:5].shape == (3, 3, 32, 32)
    assert data.test.x[torch.tensor([], dtype=torch.long)].shape == (0, 3, 32, 32)
    item = data.test[3]
    assert set(item) == {"x", "y"} and item["y"].item() == 1 and torch.equal(item["x"], data.test.x[3])
    assert "3 classes, 32x32 crops" in data.description and repr(data.train.x).startswith("FolderImages(12 augmented")
    assert load("imagenet", root=folder, image_size=32).classes == WNIDS
    assert DATASETS["imagenet"] is load_imagenet and "imagenet" not in STAND_INS


@pytest.mark.parametrize("workers", [1, 4])
def test_batches_are_torchvisions_standard_pipelines_bit_for_bit(folder, workers):
    """Training image ``row`` is ``RandomResizedCrop(S)``, ``RandomHorizontalFlip()``, ``ToTensor()``, ``Normalize``
    after ``torch.manual_seed(b + row)``, ``b`` drawn once per batch, whatever the threads; validation batches are
    ``Resize(S * 256 // 224)`` and ``CenterCrop(S)`` before the last two (72 and 64 pixels for S = 63 and 56)."""
    crops = transforms.RandomResizedCrop(8)
    assert (crops.scale, crops.ratio) == ((0.08, 1.0), (3 / 4, 4 / 3))  # 8-100 % of the area, aspect 3/4-4/3
    normalize = [transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    for size in (63, 56):
        data = load_imagenet(folder, image_size=size, workers=workers)
        rows = torch.tensor([3, 9, 0, 4, 4, 11])
        augmented = datasets.ImageFolder(
            folder / "train",
            transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), *normalize]),
        )
        torch.manual_seed(size)
        mine, state = data.train.x[rows], torch.get_rng_state()
        torch.manual_seed(size)
        batch = int(torch.randint(2**62, ()))
        assert torch.equal(torch.get_rng_state(), state)  # one draw of the global generator per batch
        expected = []
        for row in rows.tolist():
            torch.manual_seed(batch + row)
            expected.append(augmented[row][0])
        assert (mine - torch.stack(expected)).abs().max().item() == 0.0
        assert torch.equal(mine[3], mine[4]) and not torch.equal(mine[3], data.train.x[rows][3])  # new crops per batch
        centred = datasets.ImageFolder(
            folder / "val",
            transforms.Compose([transforms.Resize(size * 256 // 224), transforms.CenterCrop(size), *normalize]),
        )
        expected = torch.stack([centred[row][0] for row in range(6)])
        assert (data.test.x[:] - expected).abs().max().item() == 0.0 and torch.equal(data.test.x[:], data.test.x[:])
    grey = load_imagenet(folder, image_size=8).train.x[4]  # WNIDS[1]'s first image is grey-scale: 3 equal channels
    pixels = grey * torch.tensor(IMAGENET_STD)[:, None, None] + torch.tensor(IMAGENET_MEAN)[:, None, None]
    assert grey.shape == (3, 8, 8) and (pixels - pixels[0]).abs().max().item() < 1e-6


def test_a_missing_or_malformed_folder_names_the_layout(tmp_path, folder):
    with pytest.raises(DatasetNotFoundError, match=f"no folder {tmp_path / 'absent' / 'train'}; expected {LAYOUT}"):
        load_imagenet(tmp_path / "absent")
    (tmp_path / "no_val" / "train" / WNIDS[0]).mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match=f"no folder .*no_val/val; expected {LAYOUT}"):
        load_imagenet(tmp_path / "no_val")
    flat = tmp_path / "flat"
    fake_imagenet(flat)
    for image in (flat / "val").glob("*/*.JPEG"):  # the validation images as distributed: not in class folders
        image.rename(flat / "val" / image.name)
    for empty in (flat / "val").iterdir():
        if empty.is_dir():
            empty.rmdir()
    with pytest.raises(DatasetFormatError, match=f"val: Couldn't find any class folder.*expected {LAYOUT}"):
        load_imagenet(flat)
    fewer = tmp_path / "fewer"
    fake_imagenet(fewer)
    for image in (fewer / "val" / WNIDS[2]).iterdir():
        image.unlink()
    with pytest.raises(DatasetFormatError, match=f"Found no valid file for the classes {WNIDS[2]}.*{LAYOUT}"):
        load_imagenet(fewer)
    (fewer / "val" / WNIDS[2]).rmdir()
    with pytest.raises(DatasetFormatError, match=f"train/ has 3 classes and val/ 2, which differ \\({WNIDS[2]}\\)"):
        load_imagenet(fewer)
    broken = tmp_path / "broken"
    fake_imagenet(broken)
    (broken / "train" / WNIDS[0] / f"{WNIDS[0]}_0.JPEG").write_bytes(b"not a JPEG")
    data = load_imagenet(broken, image_size=8)
    for split in (data.train, data.test):  # the training images are opened to draw crops, the others to decode
        split.x[1]
    with pytest.raises(DatasetFormatError, match=f"{WNIDS[0]}_0.JPEG is not a readable image.*{LAYOUT}"):
        data.train.x[0]
    for name, value in (("image_size", 0), ("workers", True)):
        with pytest.raises(ValueError, match=f"{name} must be a positive int"):
            load_imagenet(folder, **{name: value})


def test_the_presets_have_the_papers_settings():
    """Wang et al. (2021, §4.1): 100 epochs, 32 images per worker on 8 GPUs, SGD with momentum 0.9, weight decay
    1e-4, a linear warm-up over 5 epochs to 0.128, divided by 10 at epochs 30, 60, 80 and 90."""
    names = [f"{prefix}aa_resnet{depth}_imagenet" for depth in (34, 50, 101, 152) for prefix in ("", "ea_")]
    assert list(IMAGENET_PRESETS) == names and set(names) <= set(PRESETS)
    for name in names:
        preset, config = PRESETS[name], TrainConfig(name)
        assert preset.description.startswith("not here: ImageNet, 8 GPUs") and "data.root" in preset.description
        assert (preset.dataset, preset.dataset_options) == ("imagenet", {"image_size": 224})
        assert (config.epochs, config.batch_size, config.batch_size // 8) == (100, 256, 32)
        assert (config.optimizer, config.momentum, config.lr, config.weight_decay) == ("sgd", 0.9, 0.128, 1e-4)
        assert (config.warmup_epochs, config.warmup_steps, config.lr_decay_epochs) == (5, 0, [30, 60, 80, 90])
        assert (config.grad_clip, config.grad_accumulation, config.checkpoint_every) == (0.0, 1, 5000)
        with pytest.raises(ValueError, match=r"dataset 'imagenet' is read from files: give their folder"):
            preset.load_data({})
    assert 1_281_167 // 256 == 5004  # the steps of an ImageNet epoch, of which checkpoint_every is about one
    assert VARIANTS["ea_aa_resnet34_imagenet"] is IMAGENET_VARIANTS["ea_aa_resnet34_imagenet"]
    assert list(IMAGENET_VARIANTS["ea_aa_resnet34_imagenet"]) == [
        "aa",
        "ea",
        "no_convolution",
        "no_skip",
        "kernel_1x1",
        "kernel_5x5",
    ]
    assert all(list(IMAGENET_VARIANTS[f"ea_aa_resnet{depth}_imagenet"]) == ["aa", "ea"] for depth in (50, 101, 152))


@pytest.mark.parametrize(("depth", "count"), [(34, "20.7M"), (50, "25.8M"), (101, "45.4M"), (152, "61.6M")])
def test_the_presets_models_have_table_1s_parameters(depth, count):
    """On 224 x 224 crops of 1,000 classes, both presets of a depth build Table 1's model (the count in their
    descriptions, at its printed precision); the evolving one has the paper's α = 0.5, β = 1."""
    crop = TensorSplit(x=torch.zeros(1, 3, 224, 224), y=torch.zeros(1))
    placeholder = Splits("imagenet", "image", crop, crop, "one crop", classes=tuple(map(str, range(1000))))
    for prefix in ("", "ea_"):
        preset = PRESETS[f"{prefix}aa_resnet{depth}_imagenet"]
        model = preset.build_model(placeholder, {})
        parameters = sum(p.numel() for p in model.parameters())
        assert f"{parameters / 1e6:.1f}M" == count and f"-{depth} ({count}" in preset.description
        evolutions = [m.evolution for m in model.modules() if getattr(m, "evolution", None) is not None]
        assert bool(evolutions) == (prefix == "ea_")
    assert "α=0.5, β=1" in preset.description


def test_a_preset_trains_an_epoch_through_the_cli_on_a_fake_folder(folder, tmp_path, capsys):
    """``ea_aa_resnet34_imagenet`` shrunk: 2 steps of 6 images, SGD with momentum, the warm-up's learning rates
    ``0.128 (k + 1) / 10`` (5 epochs of 2 steps; longer than the run: a ScheduleWarning), and the validation
    accuracy on the 6 validation images."""
    out = tmp_path / "run"
    argv = ["train", "ea_aa_resnet34_imagenet", "--out-dir", str(out), "--set", f"data.root={folder}"]
    argv += ["data.image_size=32", "epochs=1", "batch_size=6", "progress=false", *TINY_RESNET]
    with pytest.warns(ScheduleWarning, match=r"the warm-up \(5 epochs\) is longer than the run \(1 epoch"):
        assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 2 and result["test_accuracy"] in {k / 6 for k in range(7)}
    with open(out / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [float(row["lr"]) for row in rows] == [0.128 * (2 / 10), 0.128 * (3 / 10)]  # after steps 1 and 2
    state = load_checkpoint(out / "checkpoint.pt")
    (group,) = state["optimizer"]["param_groups"]
    assert (group["momentum"], group["weight_decay"], group["nesterov"], group["dampening"]) == (0.9, 1e-4, False, 0)
    assert all("momentum_buffer" in entry for entry in state["optimizer"]["state"].values())
    saved = json.loads((out / "config.json").read_text())
    assert (saved["optimizer"], saved["warmup_epochs"], saved["data"]["image_size"]) == ("sgd", 5, 32)


def test_every_variant_is_the_discrete_network_it_reads(folder):
    """Each model of Table 2's comparison, shrunk, through the preset's builder: ``continuous_resnet`` with one
    Lie-Trotter Euler step per block computes the timm network's forward (float64, eval mode, to 1e-10)."""
    data = load_imagenet(folder, image_size=16)
    preset = PRESETS["ea_aa_resnet34_imagenet"]
    small = dict(layers=[1, 2, 2, 2], channels=[8, 16, 32, 64], num_heads=2, min_key_dim_per_head=4, small_images=True)
    images = data.test.x[:2].double()
    for name, overrides in IMAGENET_VARIANTS["ea_aa_resnet34_imagenet"].items():
        torch.manual_seed(0)
        model = preset.build_model(data, {**small, **overrides}).double().eval()
        with torch.no_grad():
            logits, discrete = model(images=images), model.resnet(images)
        assert logits.shape == (2, 3) and (logits - discrete).abs().max().item() <= 1e-10, name
