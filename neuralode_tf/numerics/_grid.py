"""The step grid of fixed-grid methods."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

Grid = tuple[tuple[float, ...], ...]
"""The grid times of each requested interval, its ends included."""

# A step count n is rounded down to an integer when the interval is within this relative tolerance
# of n steps, so that 1.0 / 0.1 is ten steps and not eleven.
_ROUNDING = 1e-9


def fixed_grid(t: list[float], step_size: float, jumps: Iterable[float] = ()) -> Grid:
    """Grid times for each requested interval ``[t[i], t[i+1]]``.

    The breakpoints are the requested times and the field's ``jumps`` strictly inside the span (a
    layer boundary, where the field's weights change). Each stretch between consecutive breakpoints
    is split into ``n = ceil(length / step_size)`` equal steps, so every breakpoint is a grid point
    and no step is longer than ``step_size``. A step never straddles a jump, which would cost a
    method its order (the field is discontinuous there). Decreasing times (torchdiffeq's adjoint
    integrates backwards) give a decreasing grid.

    Computed once per ``(t, step_size, jumps)``: ``solve`` asks on every call.
    """
    return _grid(tuple(t), step_size, tuple(jumps))


@functools.lru_cache(maxsize=256)
def _grid(t: tuple[float, ...], step_size: float, jumps: tuple[float, ...]) -> Grid:
    lo, hi = min(t[0], t[-1]), max(t[0], t[-1])
    inner = sorted({float(x) for x in jumps if lo < x < hi}, reverse=t[-1] < t[0])
    grid: list[tuple[float, ...]] = []
    for a, b in zip(t[:-1], t[1:]):
        stops = [a, *(x for x in inner if min(a, b) < x < max(a, b)), b]
        interval = [a]
        for start, end in zip(stops[:-1], stops[1:]):
            n = max(1, math.ceil(abs(end - start) / step_size - _ROUNDING))
            interval += [start + (end - start) * k / n for k in range(1, n)] + [end]
        grid.append(tuple(interval))
    return tuple(grid)


def n_grid_steps(grid: Grid) -> int:
    """The number of steps a march over ``grid`` takes."""
    return sum(len(interval) - 1 for interval in grid)
