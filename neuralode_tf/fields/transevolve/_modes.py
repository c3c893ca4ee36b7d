"""The modes of TransEvolve attention, and which exact path serves each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import torch
from torch import Tensor

from ._paths import _factored, _fidelity, _fused
from ._state import TransEvolveState

TransEvolveMode = Literal["auto", "fidelity", "factored", "fused"]
"""How :class:`TransEvolveAttention` evaluates eq. 9: ``"fidelity"`` (eq. 6 as written), ``"factored"``
or ``"fused"`` (both exact rewrites), or ``"auto"`` (one of the last two, by sequence length)."""

_MODES: tuple[str, ...] = get_args(TransEvolveMode)

AUTO_FACTORED_MAX_TOKENS: dict[str, int] = {"cpu": 4096, "cuda": 256}
"""Longest sequence (queries or keys) for which ``mode="auto"`` picks ``"factored"`` (else ``"fused"``), by device type.

CPU, measured by ``python -m benchmarks.transevolve`` (``benchmarks/results/transevolve_cpu.json``, d = 256,
8 heads, depth 6, forward + backward; 2026-11-24): ``factored`` is the faster exact path at every measured
length (1.05x / 1.05x / 1.02x / 1.04x / 0.92x the standard stack's speed at n = 256 / 1k / 2k / 3k / 4k, against
0.95x / 0.84x / 0.63x / 0.67x / 0.65x for ``fused``), but it holds ``n × n``
weights per head (2 GB against 0.6 GB at n = 4k, batch 1), so beyond the measured range ``auto`` switches
to ``fused``, whose memory stays ``O(n)``.
CUDA: a placeholder, not yet measured on a GPU. Other devices use the CUDA value."""

_PATHS: dict[str, Callable[[TransEvolveState, Tensor, Tensor], Tensor]] = {
    "fidelity": _fidelity,
    "factored": _factored,
    "fused": _fused,
}


def _exact_path(mode: TransEvolveMode, tokens: int, device: torch.device) -> str:
    """The path that serves ``mode``: itself, or for ``"auto"`` factored or fused by the longer sequence, ``tokens``."""
    if mode != "auto":
        return mode
    limit = AUTO_FACTORED_MAX_TOKENS.get(device.type, AUTO_FACTORED_MAX_TOKENS["cuda"])
    return "factored" if tokens <= limit else "fused"
