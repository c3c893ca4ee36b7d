"""The CPU threads of a run: torch's default, bounded by the CPUs this process may actually use.

torch starts with one intra-op thread per core of the machine (or ``OMP_NUM_THREADS``). In a container or a batch
job the process may use fewer: its CPU affinity mask and its cgroup's CPU quota (``cpu.max``) bound it, and threads
beyond that share cores and wait on each other. ``train`` and ``demo`` therefore use the smallest of torch's
default, the CPUs of the affinity mask and the quota (rounded up), divided among the processes of a ``torchrun``
job on this machine. ``threads=N`` sets the number instead: on a machine that other work keeps busy, fewer threads
than cores is faster (the training guide gives the measurement).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from pathlib import Path

import torch

_CGROUP_QUOTAS = (
    ("/sys/fs/cgroup/cpu.max", None),  # cgroup v2: "<quota> <period>" or "max <period>"
    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),  # cgroup v1
)


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, bounded by its cgroup's CPU quota (rounded up)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cpus, math.ceil(quota))) if quota is not None else max(1, cpus)


def _cgroup_quota() -> float | None:
    """The cgroup's CPU quota in CPUs, or ``None`` where there is none (or it cannot be read)."""
    for quota_file, period_file in _CGROUP_QUOTAS:
        try:
            fields = Path(quota_file).read_text().split()
            period = fields[1] if period_file is None else Path(period_file).read_text().strip()
            if fields[0] in ("max", "-1"):
                return None
            return int(fields[0]) / int(period)
        except (OSError, ValueError, IndexError, ZeroDivisionError):
            continue
    return None


def default_threads(processes: int = 1) -> int:
    """torch's intra-op threads bounded by :func:`available_cpus`, shared among ``processes`` on this machine."""
    return max(1, min(torch.get_num_threads(), available_cpus() // max(1, processes)))


@contextlib.contextmanager
def cpu_threads(threads: int | None, processes: int = 1) -> Iterator[int]:
    """Run the block with ``threads`` intra-op threads (``None``: :func:`default_threads`); yields the number and
    restores torch's setting afterwards."""
    before = torch.get_num_threads()
    chosen = threads if threads is not None else default_threads(processes)
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)
