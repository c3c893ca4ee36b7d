"""Timing and memory measurement shared by the benchmarks.

**Time.** :func:`rounds` runs each competitor's ``step()`` (a forward and a backward pass) ``warmup``
times, then ``repeats`` rounds of one call of each, and returns every round's wall time per
competitor: the samples that a statistical comparison needs. Competitors are timed in the same
process, interleaved round by round, so a ratio of two medians cancels most of the machine's noise.
The order within a round is shuffled (seeded): on a CPU a step runs up to 10% slower right after an
eager step that churned the caches and the allocator, and a fixed order would charge that to one
competitor. :func:`race` reduces the rounds to medians (:func:`median_time` for one step);
:func:`paired_ratios` takes the median of per-round ratios instead, which also cancels slow spells
(:func:`paired` gives both).

**Memory.** On a GPU, the peak of ``torch.cuda.max_memory_allocated`` over one step. On the CPU,
PyTorch keeps no allocator statistics, so :func:`peak_rss_in_subprocess` runs one step of a case
in a fresh Python process and reports the growth of its peak resident set size (``VmHWM`` in
``/proc/self/status``, Linux) over the resident size just before the step: the memory the step
itself needed, including the allocator's caching and fragmentation, plus about a megabyte of noise.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

__all__ = [
    "rounds",
    "median_time",
    "race",
    "paired_ratios",
    "paired",
    "peak_rss_in_subprocess",
    "rss_growth_of",
    "cuda_peak_of",
]


def provenance(module: str) -> dict[str, str]:
    """``{"date": ..., "command": ...}`` for a results file: today, and the command line that ran this benchmark
    (``python -m module`` and its arguments), with ``OMP_NUM_THREADS`` where set."""
    threads = os.environ.get("OMP_NUM_THREADS")
    line = shlex.join(["python", "-m", module, *sys.argv[1:]])
    return {
        "date": datetime.date.today().isoformat(),
        "command": f"OMP_NUM_THREADS={threads} {line}" if threads else line,
    }


def median_time(step: Callable[[], None], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``step()`` in seconds, after ``warmup`` untimed calls."""
    return race({"only": step}, repeats, warmup)["only"]


def race(steps: dict[str, Callable[[], None]], repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median wall time of each step, timed round-robin (one call of each per round, in a shuffled order)."""
    return {name: statistics.median(values) for name, values in rounds(steps, repeats, warmup).items()}


def paired_ratios(
    steps: dict[str, Callable[[], None]], baseline: str, repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """``time(step) / time(baseline)`` for each step: the median over rounds of the ratio within a round.

    A step and the baseline run within one round of each other, so a slow spell of the machine that
    lasts a round or more cancels out of the ratio, which a ratio of overall medians does not do.
    """
    return paired(steps, baseline, repeats, warmup)["ratio"]


def paired(
    steps: dict[str, Callable[[], None]], baseline: str, repeats: int = 5, warmup: int = 1
) -> dict[str, dict[str, float]]:
    """:func:`paired_ratios` (``["ratio"]``, the steps other than ``baseline``) with every step's median wall time
    in seconds (``["seconds"]``, all steps), from the same rounds: the side-by-side rows of a benchmark."""
    times = rounds(steps, repeats, warmup)
    return {
        "ratio": {
            name: statistics.median(a / b for a, b in zip(values, times[baseline]))
            for name, values in times.items()
            if name != baseline
        },
        "seconds": {name: statistics.median(values) for name, values in times.items()},
    }


def rounds(steps: dict[str, Callable[[], None]], repeats: int = 5, warmup: int = 1) -> dict[str, list[float]]:
    """Wall times (seconds) of each step in ``repeats`` rounds, after ``warmup`` untimed calls of each.

    A round calls every step once, in an order shuffled afresh each round (seeded, so reproducible);
    ``result[name][i]`` is the time of ``steps[name]`` in round ``i``, so lists of two steps pair up by round.
    """
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    order, shuffle = list(steps), random.Random(0).shuffle
    for _ in range(repeats):
        shuffle(order)
        for name in order:
            _sync()
            start = time.perf_counter()
            steps[name]()
            _sync()
            times[name].append(time.perf_counter() - start)
    return times


def cuda_peak_of(step: Callable[[], None]) -> int:
    """Peak CUDA memory (bytes) allocated during one ``step()``, above what was allocated before it."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def rss_growth_of(step: Callable[[], None], warmup: bool = False) -> int:
    """Growth of this process's peak resident set size (bytes) during one ``step()``.

    Meaningful only in a fresh process whose peak so far is the current size (see the module docstring).
    With ``warmup``, ``step()`` runs once first, so that libraries it loads on first use (torch's
    checkpoint initialises the CUDA runtime of a CUDA build, over 100 MB, even without a GPU) are not
    counted, and the peak is reset (``/proc/self/clear_refs``) before the measured call.
    """
    if warmup:
        step()
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # reset VmHWM to the current resident size
    before = _current_rss()
    step()
    return _status_kib("VmHWM") * 1024 - before


def peak_rss_in_subprocess(module: str, case: dict, release_freed: bool = False) -> int:
    """Run ``python -m <module> --memory-case '<json>'`` and return the bytes it prints.

    With ``release_freed``, glibc's malloc is told to serve every allocation above 64 KiB with its own
    ``mmap`` and to return freed memory at once (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``),
    so the resident size follows the live tensors instead of the allocator's cache.
    """
    command = [sys.executable, "-m", module, "--memory-case", json.dumps(case)]
    env = dict(os.environ)
    if release_freed:
        env.update(MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    return int(out.strip().splitlines()[-1])


def _current_rss() -> int:
    return _status_kib("VmRSS") * 1024


def _status_kib(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status``. ``VmHWM``, the peak resident size, starts afresh at ``exec``,
    unlike ``getrusage``'s ``ru_maxrss``, which a child inherits from its parent."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
