"""The benchmark harness: per-round times, medians, paired ratios and CPU peak memory."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.harness import paired, paired_ratios, provenance, race, rounds

ROOT = Path(__file__).resolve().parents[1]


def _sleeper(seconds: float):
    return lambda: time.sleep(seconds)


@pytest.mark.cpu_only("times sleeps on the host")
def test_race_and_paired_ratios_measure_known_durations():
    steps = {"short": _sleeper(0.01), "long": _sleeper(0.03)}
    medians = race(steps, repeats=5)
    assert set(medians) == {"short", "long"}
    assert 0.01 <= medians["short"] < medians["long"]
    ratio = paired_ratios(steps, "short", repeats=5)
    assert set(ratio) == {"long"}
    assert 2.0 <= ratio["long"] <= 3.1  # 3x, less the overshoot of a sleep (up to 10 ms)
    both = paired(steps, "short", repeats=5)
    assert set(both["ratio"]) == {"long"} and set(both["seconds"]) == {"short", "long"}
    assert 2.0 <= both["ratio"]["long"] <= 3.1 and 0.01 <= both["seconds"]["short"] < both["seconds"]["long"]


@pytest.mark.cpu_only("times sleeps on the host")
def test_rounds_gives_every_round_of_every_step_after_the_warmup():
    calls = []

    def sleeper(name: str, seconds: float):
        return lambda: (calls.append(name), time.sleep(seconds))

    times = rounds({"short": sleeper("short", 0.01), "long": sleeper("long", 0.03)}, repeats=3, warmup=2)
    assert list(times) == ["short", "long"] and all(len(values) == 3 for values in times.values())
    assert calls.count("short") == calls.count("long") == 5  # 2 untimed warm-up calls each, then 3 rounds
    assert all(0.01 <= short < long for short, long in zip(times["short"], times["long"]))


@pytest.mark.cpu_only("measures CPU process memory (VmHWM)")
def test_rss_growth_counts_a_step_allocation_in_a_fresh_process():
    """The peak resident size is only meaningful in a fresh process (the module docstring): there, with
    glibc returning freed memory at once, a step that allocates 50 MB grows it by about 50 MB."""
    code = (
        "import torch\n"
        "from benchmarks.harness import rss_growth_of\n"
        "print(rss_growth_of(lambda: torch.ones(50 * 2**20 // 4).add_(1), warmup=True))\n"
    )
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    growth = int(out.stdout.strip().splitlines()[-1])
    assert 45 * 2**20 <= growth <= 60 * 2**20


@pytest.mark.cpu_only("reads the environment and the command line, no tensors")
def test_a_results_file_records_the_command_with_its_thread_count(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lm_training.py", "--quick"])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    recorded = provenance("benchmarks.lm_training")
    assert recorded["command"] == "OMP_NUM_THREADS=1 python -m benchmarks.lm_training --quick"
    assert recorded["date"] == datetime.date.today().isoformat()
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert provenance("benchmarks.lm_training")["command"] == "python -m benchmarks.lm_training --quick"
