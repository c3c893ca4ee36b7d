"""Types shared across the package."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

State = Tensor | tuple[Tensor, ...]
"""An ODE state: a tensor of any shape, or a tuple of tensors (augmented states)."""

Field = Callable[[Tensor | float, State], State]
"""A vector field ``(t, y) -> dy/dt``: returns a state of ``y``'s structure, shapes, dtypes and devices. ``t`` is a
0-dim tensor, or a Python float inside a march compiled by ``solve(..., compile=True)`` (a constant of the graph)."""
