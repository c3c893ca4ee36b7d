"""Training runs that fail safely: settings checked before anything is written, a schedule that does not fit,
checkpoints that are safe to load, signal handlers, an unwritable run folder and a full disk.

(Resuming after SIGTERM, SIGINT and SIGKILL is tested in ``test_train.py``, beside the other resume tests.)
"""

from __future__ import annotations

import errno
import os
import re
import signal
import warnings
from pathlib import Path

import pytest
import torch

from neuralode_tf.train import (
    CheckpointError,
    ConfigError,
    RunFolderError,
    ScheduleWarning,
    TrainConfig,
    load_checkpoint,
    load_config,
    step_sweep,
    train,
)
from neuralode_tf.train._signals import stop_requests
from neuralode_tf.train.cli import main
from neuralode_tf.train.setup import Setup
from tests.test_train import TINY, tiny

SMALL = ["epochs=1", "batch_size=32", "warmup_steps=0", "max_steps=2", "progress=false"]
SMALL += [f"model.{k}={v}" for k, v in TINY.items()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


class _RunsCode:
    """Unpickling this runs ``code`` (what a tampered checkpoint could hold)."""

    def __init__(self, code: str):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


@pytest.mark.cpu_only("CLI runs that write files")
def test_a_bad_setting_fails_before_anything_is_written(tmp_path, capsys):
    out = str(tmp_path)
    assert main(["train", "vit_digits", "--out-dir", out, "--set", *SMALL]) == 0
    before = snapshot(tmp_path)
    assert set(before) == {"checkpoint.pt", "config.json", "metrics.csv", "metrics.json"}
    capsys.readouterr()
    bad = {
        "model.foo=1": r"unknown setting 'model\.foo' for preset 'vit_digits' \(.*'foo'.*\): ViT takes .*dim.*steps",
        "data.bar=1": r"unknown setting 'data\.bar' .*: the dataset 'digits' takes name, .*seed",
        "epochs=abc": r"setting epochs='abc' must be int, not str",
        "learning_rate=1": r"unknown setting 'learning_rate'; valid: .*'lr'",
    }
    for setting, message in bad.items():
        for resume in ([], ["--resume"]):
            with pytest.raises(SystemExit) as exit_:
                main(["train", "vit_digits", "--out-dir", out, *resume, "--set", *SMALL, setting])
            assert exit_.value.code == 2
            assert re.search(message, capsys.readouterr().err)
    assert snapshot(tmp_path) == before  # byte for byte, and no other file
    assert set(step_sweep(tmp_path, steps=(1,))) == {1}  # the earlier run still evaluates
    with pytest.raises(ConfigError, match=r"unknown setting 'model\.foo'"):
        train(tiny(tmp_path / "direct", model={**TINY, "foo": 1}))
    assert not (tmp_path / "direct").exists()


@pytest.mark.cpu_only("parses config files; no tensors")
def test_config_files_and_fields_are_checked(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('preset = "vit_digits"\nlearning_rate = 0.1\n')
    with pytest.raises(ConfigError, match=r"unknown settings \['learning_rate'\] in .*run\.toml; valid: .*'lr'"):
        load_config(config)
    assert TrainConfig(preset="vit_digits", lr=1, max_steps=None).lr == 1  # an int is a float
    for wrong, message in [
        (dict(max_steps=1.5), "max_steps=1.5 must be int or None, not float"),
        (dict(progress=1), "progress=1 must be bool, not int"),
        (dict(lr=True), "lr=True must be float, not bool"),
        (dict(model=[1]), r"model=\[1\] must be dict, not list"),
    ]:
        with pytest.raises(ConfigError, match=message):
            TrainConfig(preset="vit_digits", **wrong)


@pytest.mark.cpu_only("short training runs on the CPU")
def test_a_warm_up_longer_than_the_run_warns(tmp_path):
    # digits: 1,437 training examples, so 44 steps of 32 per epoch
    with pytest.warns(ScheduleWarning, match=r"the warm-up \(100 steps\) is longer than the run \(44 steps"):
        train(tiny(tmp_path / "long", epochs=1, warmup_steps=100, max_steps=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScheduleWarning)
        train(tiny(tmp_path / "fits", epochs=3, warmup_steps=100, max_steps=1))


@pytest.mark.cpu_only("writes and loads checkpoint files")
def test_a_tampered_checkpoint_is_refused_and_its_code_not_run(tmp_path, capsys):
    train(tiny(tmp_path, max_steps=2))
    checkpoint, marker = tmp_path / "checkpoint.pt", tmp_path / "ran"
    state = load_checkpoint(checkpoint)
    state["history"].append(_RunsCode(f"open({str(marker)!r}, 'w').write('pwned')"))
    torch.save(state, checkpoint)

    refused = r"checkpoint\.pt is not a neuralode_tf checkpoint: it holds something other than tensors, plain "
    refused += r"containers and numbers \(Unsupported global: GLOBAL .*exec .*\), which could run code when loaded"
    with pytest.raises(CheckpointError, match=refused):
        train(tiny(tmp_path, max_steps=4, resume=True))
    with pytest.raises(CheckpointError, match=refused):
        step_sweep(tmp_path, steps=(1,))
    same = ["lr=0.001", "warmup_steps=50"]  # the first run's (tiny's), which a resume cannot change
    argv = ["train", "vit_digits", "--out-dir", str(tmp_path), "--resume", "--set", *SMALL, *same]
    assert main(argv) == 1 and "is not a neuralode_tf checkpoint" in capsys.readouterr().err
    assert not marker.exists()
    torch.load(checkpoint, weights_only=False)  # what the old loader did: it runs the code
    assert marker.read_text() == "pwned"

    checkpoint.write_bytes(checkpoint.read_bytes()[:100])  # a torn write
    with pytest.raises(CheckpointError, match=r"checkpoint\.pt is not a neuralode_tf checkpoint: torch cannot read"):
        load_checkpoint(checkpoint)
    torch.save({"model": {}}, checkpoint)
    with pytest.raises(CheckpointError, match="it lacks optimizer, scheduler, step, history"):
        load_checkpoint(checkpoint)


@pytest.fixture
def python_ctrl_c():
    """Python's own Ctrl-C handler during the test, whatever this process inherited (a shell runs a
    background job with SIGINT ignored)."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


@pytest.mark.cpu_only("signals to this process")
@pytest.mark.usefixtures("python_ctrl_c")
def test_stop_requests_records_the_first_signal_and_lets_a_second_ctrl_c_through():
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    with stop_requests() as request:
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
        signal.raise_signal(signal.SIGINT)
        assert request.signal == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    with stop_requests() as request:
        signal.raise_signal(signal.SIGTERM)
        assert request.signal == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is before[signal.SIGTERM]  # a second one would terminate
    assert {number: signal.getsignal(number) for number in before} == before


@pytest.mark.cpu_only("signals to this process")
@pytest.mark.usefixtures("python_ctrl_c")
def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stop_requests() as request:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
        assert request.signal is None


@pytest.mark.cpu_only("file permissions of a run folder")
def test_an_unwritable_run_folder_fails_before_training(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() == 0:  # root writes anyway: let the OS refuse the run folder as it would refuse a user
        real_open = os.open

        def refuse(path, flags, *args, **kwargs):
            if Path(path).parent == folder and flags & os.O_CREAT:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refuse)
    else:
        folder.chmod(0o500)  # undone below

    def no_training(self, logits, target):
        raise AssertionError("training started")

    monkeypatch.setattr(Setup, "loss", no_training)
    try:
        with pytest.raises(RunFolderError, match=r"cannot write to the run folder .*locked .*choose") as refused:
            train(tiny(folder, max_steps=2))
        assert refused.value.errno == errno.EACCES
        assert main(["train", "vit_digits", "--out-dir", str(folder), "--set", *SMALL]) == 1
        assert "cannot write to the run folder" in capsys.readouterr().err
    finally:
        folder.chmod(0o700)
    assert list(folder.iterdir()) == []


@pytest.mark.cpu_only("writes checkpoint files")
def test_a_failed_checkpoint_write_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    real_save, calls = torch.save, []

    def disk_full_on_the_second_save(state, handle, *args, **kwargs):
        calls.append(state["step"])
        if len(calls) == 2:
            handle.write(b"half a checkpoint")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(state, handle, *args, **kwargs)

    monkeypatch.setattr(torch, "save", disk_full_on_the_second_save)
    unchanged = r"could not write .*checkpoint\.pt .*the previous checkpoint\.pt is unchanged"
    with pytest.raises(RunFolderError, match=unchanged) as failed:
        train(tiny(tmp_path, max_steps=6, checkpoint_every=2))
    monkeypatch.undo()
    assert failed.value.errno == errno.ENOSPC
    assert calls == [2, 4]
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["checkpoint.pt", "config.json"]
