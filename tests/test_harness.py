"""The benchmark harness: medians, paired ratios and CPU peak memory."""

from __future__ import annotations

import time

import torch

from benchmarks.harness import paired_ratios, race, rss_growth_of


def _sleeper(seconds: float):
    return lambda: time.sleep(seconds)


def test_race_and_paired_ratios_measure_known_durations():
    steps = {"short": _sleeper(0.002), "long": _sleeper(0.006)}
    medians = race(steps, repeats=5)
    assert set(medians) == {"short", "long"}
    assert 0.002 <= medians["short"] < medians["long"]
    ratio = paired_ratios(steps, "short", repeats=5)
    assert set(ratio) == {"long"}
    assert 2.0 <= ratio["long"] <= 3.2  # 3x, less the fixed overhead of a sleep


def test_rss_growth_counts_a_step_allocation():
    """50 MB is above glibc's largest mmap threshold, so it is fresh resident memory at every step."""

    def step() -> None:
        torch.ones(50 * 2**20 // 4).add_(1)

    assert rss_growth_of(step, warmup=True) >= 40 * 2**20
