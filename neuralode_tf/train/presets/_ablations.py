"""The evolving-attention ablation shared by every family's presets (Wang et al. 2021, Tables 2, 4 and 6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ABLATIONS", "ablations"]

ABLATIONS: dict[str, dict[str, Any]] = {
    "ea": {},
    "no_convolution": {"beta": 0.0},
    "no_skip": {"alpha": 0.0},
    "kernel_1x1": {"kernel_size": 1},
    "kernel_5x5": {"kernel_size": 5},
}
"""Each evolving model of the ablation as its change to the evolving-attention settings: EA itself, without the
convolution (``β = 0``), without the skip (``α = 0``), with 1x1 and with 5x5 kernels."""


def ablations(ea: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """The ablation around the settings ``ea`` (``alpha``, ``beta``, ``kernel_size``): ``"vanilla"`` (``None``, no
    evolving attention), then each of :data:`ABLATIONS` applied to ``ea``."""
    return {"vanilla": None, **{name: {**ea, **change} for name, change in ABLATIONS.items()}}
