"""Turning residual branches into fields, and summing parts."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from torch import Tensor, nn

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
    required = _required_positionals(module.forward)
    if required == 1:
        return Autonomous(module)
    if required == 2:
        return module
    takes = "*args" if required is None else f"{required} required arguments"
    raise TypeError(
        f"{type(module).__name__}.forward takes {takes}; a part must be a branch forward(x) or a field forward(t, x)"
    )


def _required_positionals(function: Callable[..., Any]) -> int | None:
    """How many positional arguments ``function`` requires, or ``None`` if it takes ``*args`` (or has no signature)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in parameters)


def add(a: State, b: State) -> State:
    """Leaf-wise sum of two states of the same structure."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a + b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return tuple(x + y for x, y in zip(a, b))
    raise TypeError(f"parts returned states of different structures: {type(a).__name__} and {type(b).__name__}")


class SumOfParts(nn.Module):
    """Base of fields that are the sum of their parts: ``f(t, y) = Σ_i f_i(t, y)``.

    The parts are :attr:`parts`, so every such field is :class:`~neuralode_tf.protocols.Splittable`: the
    splitting methods of :func:`~neuralode_tf.solve` may step them one after another.
    """

    def __init__(self, *parts: nn.Module):
        super().__init__()
        if not parts:
            raise ValueError(f"{type(self).__name__} needs at least one part")
        super().__setattr__("parts", nn.ModuleList(as_field(p) for p in parts))  # the submodule ``parts``

    @property
    def parts(self) -> nn.ModuleList:
        """The parts as fields ``(t, y) -> dy``, in stepping order (state-dict keys ``parts.0...``).

        A property over the submodule, so that the capability is found on the class, where
        ``isinstance(field, Splittable)`` looks for it from Python 3.12.
        """
        return cast(nn.ModuleList, self._modules["parts"])

    def forward(self, t: Tensor, y: State) -> State:
        parts = iter(self.parts)  # not self.parts[1:], which builds a new ModuleList at every evaluation
        out = next(parts)(t, y)
        for part in parts:
            out = add(out, part(t, y))
        return out
