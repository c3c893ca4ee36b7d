"""The CPU threads of ``train`` and ``demo``: torch's default bounded by the CPUs the process may use (affinity
mask, cgroup quota), or the ``threads`` setting; torch's own setting is restored afterwards."""

from __future__ import annotations

import json

import pytest
import torch

from neuralode_tf.train import _threads, train
from neuralode_tf.train.cli import main
from tests.test_train import tiny

pytestmark = pytest.mark.cpu_only("CPU threads")


@pytest.fixture
def quota_files(tmp_path, monkeypatch):
    """Point the cgroup files at ``tmp_path``; returns a function writing the v2 ``cpu.max``."""
    v2 = tmp_path / "cpu.max"
    monkeypatch.setattr(_threads, "_CGROUP_QUOTAS", ((str(v2), None),))
    return v2.write_text


@pytest.mark.parametrize(
    ("cpu_max", "cpus"), [("150000 100000", 2), ("100000 100000", 1), ("50000 100000", 1), ("max 100000", 4)]
)
def test_the_cgroup_quota_bounds_the_cpus(quota_files, monkeypatch, cpu_max, cpus):
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    quota_files(cpu_max)
    assert _threads.available_cpus() == cpus


def test_the_affinity_mask_bounds_the_cpus(quota_files, monkeypatch):
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    quota_files("400000 100000")
    assert _threads.available_cpus() == 1


def test_an_unreadable_quota_is_no_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(_threads, "_CGROUP_QUOTAS", ((str(tmp_path / "missing"), None),))
    (tmp_path / "garbage").write_text("what")
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert _threads.available_cpus() == 3
    monkeypatch.setattr(_threads, "_CGROUP_QUOTAS", ((str(tmp_path / "garbage"), None),))
    assert _threads.available_cpus() == 3


def test_the_default_is_torchs_bounded_and_shared_among_processes(monkeypatch):
    monkeypatch.setattr(_threads, "available_cpus", lambda: 8)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        assert _threads.default_threads() == 4  # torch's (or OMP_NUM_THREADS) when the CPUs allow it
        assert _threads.default_threads(processes=4) == 2
        assert _threads.default_threads(processes=16) == 1
        monkeypatch.setattr(_threads, "available_cpus", lambda: 2)
        assert _threads.default_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_run_uses_its_threads_records_them_and_restores_torchs(tmp_path):
    before = torch.get_num_threads()
    assert train(tiny(tmp_path, max_steps=1, threads=1))["threads"] == 1
    assert json.loads((tmp_path / "metrics.json").read_text())["threads"] == 1
    assert torch.get_num_threads() == before
    assert train(tiny(tmp_path / "auto", max_steps=1))["threads"] == _threads.default_threads()


@pytest.mark.parametrize("argv", [[], ["--threads", "3"]])
def test_the_demo_runs_with_the_default_threads_unless_told(argv, monkeypatch, capsys):
    expected = int(argv[1]) if argv else _threads.default_threads()
    used = []
    monkeypatch.setattr(_threads.torch, "set_num_threads", lambda n: used.append(n))
    assert main(["demo", "--dim", "8", "--tokens", "4", "--batch", "1", *argv]) == 0
    assert used[0] == expected
