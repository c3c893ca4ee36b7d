"""``eval_every``: the test split evaluated every few epochs during training, recorded in ``metrics.csv`` and the
learning curves of ``compare_variants``, without changing the training by a bit."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from neuralode_tf.train import ConfigError, TrainConfig, _history, compare_variants, train
from neuralode_tf.train.cli import main
from neuralode_tf.train.compare import learning_curve
from neuralode_tf.train.setup import build_setup

TINY = {"dim": 16, "depth": 2, "num_heads": 2}
STEPS_PER_EPOCH = 5  # 1,437 training digits in batches of 256


def tiny(out_dir: Path, device: torch.device, **settings) -> TrainConfig:
    """Three epochs of five steps of a small ViT on digits, with dropout, so that training draws random numbers."""
    base = TrainConfig(
        preset="vit_digits", epochs=3, batch_size=256, warmup_steps=0, out_dir=str(out_dir), progress=False,
        device=str(device), model={**TINY, "dropout": 0.1},
    )  # fmt: skip
    return replace(base, **settings)


def _skip_training_on_xla(device: torch.device) -> None:
    if device.type == "xla":
        pytest.skip("XLA: a training run syncs with the host every step; test_train.py runs the loop on CUDA")


def _history_of(out_dir: Path) -> list[dict]:
    return torch.load(out_dir / "checkpoint.pt", weights_only=True)["history"]


def _csv(out_dir: Path) -> list[dict[str, str]]:
    with open(out_dir / "metrics.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_evaluating_every_epoch_changes_nothing_of_the_training(tmp_path, device, monkeypatch):
    """Bit for bit: the training curve, the final accuracy and the weights, with dropout drawing random numbers and an
    evaluation that draws some too (the random state is put back) and leaves the model in eval mode (put back)."""
    _skip_training_on_xla(device)
    plain = train(tiny(tmp_path / "plain", device))
    scores = _history.scores

    def noisy_scores(model, *args, **kwargs):
        torch.rand(7, device=device)  # an evaluation that consumed random numbers must not shift the dropout masks
        return scores(model, *args, **kwargs)

    monkeypatch.setattr(_history, "scores", noisy_scores)
    evaluated = train(tiny(tmp_path / "evaluated", device, eval_every=1))
    assert evaluated["test_accuracy"] == plain["test_accuracy"]
    kept = ("loss", "accuracy", "nfe", "lr", "regularization")
    a, b = _history_of(tmp_path / "plain"), _history_of(tmp_path / "evaluated")
    assert [[r[k] for k in kept] for r in a] == [[r[k] for k in kept] for r in b]
    assert learning_curve(tmp_path / "plain") == {k: learning_curve(tmp_path / "evaluated")[k] for k in kept[:2]}
    weights = [
        torch.load(tmp_path / run / "checkpoint.pt", weights_only=True)["model"] for run in ("plain", "evaluated")
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert "test_accuracy" not in _csv(tmp_path / "plain")[0]  # off by default: metrics.csv as before


def test_the_test_curve_has_a_point_per_evaluated_epoch_and_ends_at_the_final_score(tmp_path, device):
    _skip_training_on_xla(device)
    every = train(tiny(tmp_path / "every", device, eval_every=1))
    rows = _csv(tmp_path / "every")
    ends = [int(row["step"]) % STEPS_PER_EPOCH == 0 for row in rows]
    assert all(math.isnan(float(row["test_accuracy"])) != end for row, end in zip(rows, ends, strict=True))
    curve = learning_curve(tmp_path / "every")
    assert len(curve["test_accuracy"]) == len(curve["test_loss"]) == len(curve["loss"]) == 3
    assert curve["test_accuracy"][-1] == every["test_accuracy"]
    assert all(0 < loss < 5 for loss in curve["test_loss"])
    # every second epoch: the second, and the end of the run (the third)
    second = train(tiny(tmp_path / "second", device, eval_every=2))
    curve = learning_curve(tmp_path / "second")
    assert curve["test_accuracy"][0] is None and curve["test_loss"][0] is None
    assert curve["test_accuracy"][2] == second["test_accuracy"] == every["test_accuracy"]
    assert curve["test_accuracy"][1] == learning_curve(tmp_path / "every")["test_accuracy"][1]


def test_the_test_curve_survives_a_resume(tmp_path, device):
    """A run stopped mid-epoch and resumed records the curve of the uninterrupted run; a resume that switches
    ``eval_every`` on records NaN for the steps before it."""
    _skip_training_on_xla(device)
    on = {"device": device, "model": TINY}  # without dropout: its random state is not checkpointed
    train(tiny(tmp_path / "whole", eval_every=1, **on))
    train(tiny(tmp_path / "split", eval_every=1, max_steps=7, **on))
    train(tiny(tmp_path / "split", eval_every=1, resume=True, **on))
    assert learning_curve(tmp_path / "split") == learning_curve(tmp_path / "whole")
    train(tiny(tmp_path / "late", max_steps=7, **on))
    train(tiny(tmp_path / "late", eval_every=1, resume=True, **on))
    curve = learning_curve(tmp_path / "late")
    assert curve["test_accuracy"][0] is None
    assert curve["test_accuracy"][1:] == learning_curve(tmp_path / "whole")["test_accuracy"][1:]


def test_an_evaluation_puts_back_the_mode_and_the_random_state(device):
    setup = build_setup(TrainConfig("vit_digits", model={**TINY, "dropout": 0.1}))
    model = setup.model.to(device).train()
    state = torch.get_rng_state()
    test = _history.epoch_test(model, setup, device, 256, eval_every=2, epoch_end=4)
    assert model.training and torch.equal(torch.get_rng_state(), state)
    assert set(test) == set(_history.TEST_COLUMNS) and 0 <= test["test_accuracy"] <= 1
    assert all(math.isnan(v) for v in _history.epoch_test(model, setup, device, 256, 2, epoch_end=3).values())
    assert all(math.isnan(v) for v in _history.epoch_test(model, setup, device, 256, 2, epoch_end=None).values())
    assert _history.epoch_test(model, setup, device, 256, 0, epoch_end=4) == {}


@pytest.mark.cpu_only("checks settings; no tensors")
@pytest.mark.parametrize("value", [-1, 1.5, True, "1"])
def test_eval_every_is_a_non_negative_int(value):
    with pytest.raises(ConfigError, match="eval_every"):
        TrainConfig("vit_digits", eval_every=value)
    assert TrainConfig("vit_digits").eval_every == 0
    assert TrainConfig("vit_digits", eval_every=3).eval_every == 3


@pytest.mark.cpu_only("the command line and compare_variants on the CPU")
def test_the_command_line_setting_reaches_the_comparison_rows(tmp_path):
    out = tmp_path / "compare"
    settings = ["epochs=2", "batch_size=256", "warmup_steps=0", "eval_every=1"]
    assert (
        main(
            [
                "compare",
                "ot_mnist_digits",
                "--variants",
                "ot",
                "--seeds",
                "0",
                "--out-dir",
                str(out),
                "--set",
                *settings,
            ]
        )
        == 0
    )
    (row,) = json.loads((out / "rows.json").read_text())
    assert len(row["curve"]["test_accuracy"]) == 2 and row["curve"]["test_accuracy"][-1] == row["test_accuracy"]
    assert json.loads((out / "ot" / "seed0" / "config.json").read_text())["eval_every"] == 1
    # and from Python, with a model override
    (row,) = compare_variants("vit_digits", {"tiny": TINY}, (0,), tmp_path / "py", epochs=1, eval_every=1,
                              batch_size=256, warmup_steps=0, progress=False, device="cpu")  # fmt: skip
    assert row["curve"]["test_accuracy"] == [row["test_accuracy"]] and row["curve"]["test_loss"][0] > 0


@pytest.mark.cpu_only("two gloo processes on the CPU under torchrun")
def test_torchrun_records_the_test_curve(tmp_path):
    """Every process evaluates the whole test split (as the final evaluation does); rank 0 writes the curve."""
    settings = ["epochs=2", "batch_size=256", "warmup_steps=0", "eval_every=1", "progress=false", "device=cpu"]
    settings += [f"model.{k}={v}" for k, v in TINY.items()]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += ["-m", "neuralode_tf", "train", "vit_digits", "--out-dir", str(tmp_path), "--set", *settings]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, timeout=300)
    curve = learning_curve(tmp_path)
    assert len(curve["test_accuracy"]) == 2 and all(value is not None for value in curve["test_accuracy"])
    assert curve["test_accuracy"][-1] == json.loads((tmp_path / "metrics.json").read_text())["test_accuracy"]
