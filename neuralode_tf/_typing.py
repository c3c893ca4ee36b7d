"""Types shared across the package."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

State = Tensor | tuple[Tensor, ...]
"""An ODE state: a tensor of any shape, or a tuple of tensors (augmented states)."""

Field = Callable[[Tensor, State], State]
"""A vector field ``(t, y) -> dy/dt``: returns a state of ``y``'s structure, shapes, dtypes and devices."""
