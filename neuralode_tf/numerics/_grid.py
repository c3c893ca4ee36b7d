"""The step grid of fixed-grid methods."""

from __future__ import annotations

import math

# A step count n is rounded down to an integer when the interval is within this relative tolerance
# of n steps, so that 1.0 / 0.1 is ten steps and not eleven.
_ROUNDING = 1e-9


def fixed_grid(t: list[float], step_size: float) -> list[list[float]]:
    """Grid times for each requested interval ``[t[i], t[i+1]]``.

    Each interval is split into ``n = ceil(length / step_size)`` equal steps, so every requested
    time is a grid point and no step is longer than ``step_size``. Decreasing times (torchdiffeq's
    adjoint integrates backwards) give a decreasing grid.
    """
    grid = []
    for a, b in zip(t[:-1], t[1:]):
        n = max(1, math.ceil(abs(b - a) / step_size - _ROUNDING))
        grid.append([a + (b - a) * k / n for k in range(n)] + [b])
    return grid
