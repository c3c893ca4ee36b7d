"""A training run tells the truth about what it runs: every invalid value is a usage error (exit 2, one line, nothing
written), a resume refuses the settings it cannot honour and records the ones it applies, and a checkpoint that
cannot be loaded says why in one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neuralode_tf.train import CheckpointError, ConfigError, evaluate, load_checkpoint, load_run, train
from neuralode_tf.train._validate import FIXED_ON_RESUME
from tests.test_train import tiny

pytestmark = pytest.mark.cpu_only("command-line runs and checkpoint files on the CPU")

SMALL = ["epochs=1", "batch_size=32", "max_steps=2", "progress=false", "model.dim=16", "model.depth=2"]


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "neuralode_tf.train.cli", *argv]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


USAGE_ERRORS = {
    "model.steps=0": r"invalid model\.steps=0 for preset 'vit_digits': steps must be a positive integer",
    "model.method=rk45": r"invalid model\.method='rk45' .*unknown method 'rk45'; valid: .*'dopri5'",
    "lr=-1": r"setting lr=-1 must be a finite number > 0",
    "batch_size=0": r"setting batch_size=0 must be >= 1",
    "data.test_fraction=1.5": r"invalid data\.test_fraction=1\.5 .*test_fraction must lie in \(0, 1\)",
    "device=cuda:7": r"setting device='cuda:7', but torch finds no CUDA device: use device=auto or cpu",
    "device=gpu": r"setting device='gpu' must be 'auto', 'cpu', 'cuda' or 'cuda:N'",
    "threads=0": r"setting threads=0 must be None \(the CPUs available\) or >= 1",
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="device=cuda:7 is valid where CUDA is")
def test_every_invalid_value_is_a_usage_error_that_writes_nothing(tmp_path):
    """Each exits 2 with one line naming the key and what it accepts (no traceback), and leaves an earlier run's
    folder byte for byte as it was."""
    assert _cli("train", "vit_digits", "--out-dir", "run", "--set", *SMALL, cwd=tmp_path).returncode == 0
    before = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()}
    for setting, message in USAGE_ERRORS.items():
        done = _cli("train", "vit_digits", "--out-dir", "run", "--set", *SMALL, setting, cwd=tmp_path)
        assert done.returncode == 2, (setting, done.stderr)
        assert "Traceback" not in done.stderr and re.search(message, done.stderr), (setting, done.stderr)
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()} == before
    for argv, message in [
        (("train", "--config", "nope.toml"), r"cannot read the config file 'nope\.toml': No such file"),
        (
            ("compare", "ot_mnist_digits", "--variants", "otx"),
            r"unknown --variants \['otx'\] for ot_mnist_digits; valid: ",
        ),
    ]:
        done = _cli(*argv, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert re.search(message, done.stderr), done.stderr


def _first_run(folder: Path) -> dict:
    train(tiny(folder, max_steps=2))
    return {path.name: path.read_bytes() for path in folder.iterdir()}


@pytest.mark.parametrize(
    "change, named",
    [(dict(lr=0.05), "lr=0.05"), (dict(seed=1), "seed=1"), (dict(model={"dim": 16, "depth": 2, "num_heads": 2,
     "method": "rk4"}), "model=")],
)  # fmt: skip
def test_a_resume_refuses_what_it_cannot_honour_and_leaves_the_run_as_it_was(change, named, tmp_path):
    """The schedule, the optimizer, the model and the data order of a checkpoint follow these settings: a resume that
    changes one is refused, naming it and the checkpoint's value, before anything is written."""
    before = _first_run(tmp_path)
    with pytest.raises(ConfigError, match=rf"--resume cannot change {named}.*\(the checkpoint's: "):
        train(tiny(tmp_path, max_steps=4, resume=True, **change))
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    assert {"lr", "seed", "model", "batch_size", "data"} <= set(FIXED_ON_RESUME)


def test_a_resume_applies_what_it_can_and_records_what_ran(tmp_path):
    """More steps and another evaluation batch take effect, and ``config.json`` says so; fewer epochs than the
    checkpoint has run are refused by name."""
    _first_run(tmp_path)
    train(tiny(tmp_path, max_steps=4, eval_batch_size=64, resume=True))
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["max_steps"] == 4 and saved["eval_batch_size"] == 64
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 4
    train(tiny(tmp_path / "long", epochs=3, max_steps=46, warmup_steps=0))  # digits: 44 steps of 32 per epoch
    before = (tmp_path / "long" / "checkpoint.pt").read_bytes()
    with pytest.raises(ConfigError, match=r"is at step 46, past the 44 steps of epochs=1: resume with epochs"):
        train(tiny(tmp_path / "long", epochs=1, warmup_steps=0, resume=True))
    assert (tmp_path / "long" / "checkpoint.pt").read_bytes() == before


def test_the_command_line_resume_refuses_by_name_and_records_what_ran(tmp_path):
    """Through the CLI: a changed lr, seed or method, or fewer epochs than run, exit 2 with one line and leave the
    folder as it was; more steps run and ``config.json`` records them; a folder with no checkpoint says so."""
    assert _cli("train", "vit_digits", "--out-dir", "run", "--set", *SMALL, cwd=tmp_path).returncode == 0
    before = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()}
    refused = {
        "lr=0.05": r"--resume cannot change lr=0\.05 \(the checkpoint's: ",
        "seed=3": r"--resume cannot change seed=3 \(the checkpoint's: 0\)",
        "model.method=rk4": r"--resume cannot change model=.*'method': 'rk4'",
    }
    for setting, message in refused.items():
        done = _cli("train", "vit_digits", "--out-dir", "run", "--resume", "--set", *SMALL, setting, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (setting, done.stderr)
        assert re.search(message, done.stderr.strip().splitlines()[-1]), (setting, done.stderr)
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()} == before
    longer = [*SMALL[:2], "max_steps=3", *SMALL[3:]]
    done = _cli("train", "vit_digits", "--out-dir", "run", "--resume", "--set", *longer, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "config.json").read_text())["max_steps"] == 3
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 3
    done = _cli("train", "vit_digits", "--out-dir", "typo", "--resume", "--set", *SMALL, cwd=tmp_path)
    assert done.returncode == 0 and "no checkpoint.pt in typo to resume from: training from scratch" in done.stderr


def test_a_resume_with_no_checkpoint_says_so_and_starts_afresh(tmp_path, capsys):
    train(tiny(tmp_path / "typo", max_steps=1, resume=True))
    assert f"no checkpoint.pt in {tmp_path / 'typo'} to resume from: training from scratch" in capsys.readouterr().err
    assert load_checkpoint(tmp_path / "typo" / "checkpoint.pt")["step"] == 1


def test_a_checkpoint_that_cannot_be_loaded_says_why_in_one_line(tmp_path):
    """A directory, garbage bytes and a torn write are unreadable or corrupt, not "could run code when loaded";
    through the CLI each is exit 1 with one line."""
    (tmp_path / "folder" / "checkpoint.pt").mkdir(parents=True)
    with pytest.raises(CheckpointError, match=r"checkpoint\.pt is not a neuralode_tf checkpoint: it is a directory"):
        load_checkpoint(tmp_path / "folder" / "checkpoint.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(CheckpointError, match=r"it is corrupt, not a file torch\.save writes"):
        load_checkpoint(garbage)
    done = _cli("train", "vit_digits", "--out-dir", "folder", "--resume", "--set", *SMALL, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("is not a neuralode_tf checkpoint: it is a directory"), done.stderr


def test_a_finished_run_reloads_for_evaluation(tmp_path):
    """``load_run`` gives the run's settings and its trained model: evaluated, the test accuracy the run reported."""
    result = train(tiny(tmp_path, max_steps=3))
    config, task = load_run(tmp_path)
    assert config == tiny(tmp_path, max_steps=3) and not task.model.training
    assert evaluate(task.model, task, torch.device("cpu")) == result["test_accuracy"]
    with pytest.raises(CheckpointError, match=r"holds no run to load: it has no config\.json and no checkpoint\.pt"):
        load_run(tmp_path / "nothing")
