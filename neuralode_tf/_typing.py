"""Types shared across the package."""

from __future__ import annotations

from torch import Tensor

State = Tensor | tuple[Tensor, ...]
"""An ODE state: a tensor of any shape, or a tuple of tensors (augmented states)."""
