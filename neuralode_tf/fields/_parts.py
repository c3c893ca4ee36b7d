"""Turning residual branches into fields, and summing parts."""

from __future__ import annotations

from torch import Tensor, nn

from .._checks import required_positionals
from .._typing import State


class Autonomous(nn.Module):
    """The time-independent field ``f(t, x) = branch(x)`` of a residual branch."""

    def __init__(self, branch: nn.Module):
        super().__init__()
        self.branch = branch

    def forward(self, t: Tensor, y: State) -> State:
        return self.branch(y)


def as_field(module: nn.Module) -> nn.Module:
    """``module`` as a field ``(t, y) -> dy/dt``.

    A module whose ``forward`` takes one required positional argument is a residual branch and is
    wrapped in :class:`Autonomous`; one that takes two, ``(t, y)``, is already a field.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"parts must be nn.Modules (branches x -> dx or fields (t, x) -> dx), got {type(module).__name__}"
        )
    required = required_positionals(module.forward)
    if required == 1:
        return Autonomous(module)
    if required == 2:
        return module
    takes = "*args" if required is None else f"{required} required arguments"
    raise TypeError(
        f"{type(module).__name__}.forward takes {takes}; a part must be a branch forward(x) or a field forward(t, x)"
    )


def add(a: State, b: State) -> State:
    """Leaf-wise sum of two states."""
    return tuple(x + y for x, y in zip(a, b)) if isinstance(a, tuple) else a + b


class SumOfParts(nn.Module):
    """Base of fields that are the sum of their parts: ``f(t, y) = Σ_i f_i(t, y)``."""

    def __init__(self, *parts: nn.Module):
        super().__init__()
        if not parts:
            raise ValueError(f"{type(self).__name__} needs at least one part")
        self.terms = nn.ModuleList(as_field(p) for p in parts)

    def forward(self, t: Tensor, y: State) -> State:
        out = self.terms[0](t, y)
        for term in self.terms[1:]:
            out = add(out, term(t, y))
        return out
