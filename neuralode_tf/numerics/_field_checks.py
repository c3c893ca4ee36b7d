"""What ``solve`` checks of its ``field`` before solving: that it is called as ``field(t, y)``, that its
parameters share a dtype and a device with the state, and whether the interval leaves where it is defined."""

from __future__ import annotations

import inspect
import itertools
import types
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from ._state import State, leaves
from .errors import InvalidFieldError, InvalidStateError

__all__ = ["check_field", "check_field_matches_state", "warn_outside_domain"]

_FIELD_FUNCTIONS: weakref.WeakSet[types.FunctionType] = weakref.WeakSet()
"""Functions already seen to take ``(t, y)``: :func:`check_field` reads a signature once per function, not per solve."""


def check_field(field: object) -> None:
    """Refuse anything that cannot be called as ``field(t, y)``, e.g. a residual branch ``forward(x)``."""
    if not callable(field):
        raise InvalidFieldError(f"field must be callable as field(t, y) -> dy/dt, got {type(field).__name__}")
    target = field.forward if isinstance(field, nn.Module) else field
    function = getattr(target, "__func__", target)  # a method's signature is its function's, less self
    if function in _FIELD_FUNCTIONS:
        return
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # no signature to read (e.g. a builtin): the first call will tell
    params = signature.parameters.values()
    required = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or (len(required) >= 2 and _binds(signature)):
        if isinstance(function, types.FunctionType):
            _FIELD_FUNCTIONS.add(function)
        return
    name = type(field).__name__ if isinstance(field, nn.Module) else getattr(field, "__name__", type(field).__name__)
    hint = f"{name}.as_field()" if hasattr(field, "as_field") else "neuralode_tf.fields.as_field(branch)"
    raise InvalidFieldError(
        f"field must be callable as field(t, y) -> dy/dt, but {name} takes {signature}. A residual branch "
        f"(forward(x) -> increment) is not a field: pass {hint}, the autonomous field dy/dt = branch(y)"
    )


def _binds(signature: inspect.Signature) -> bool:
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def check_field_matches_state(field: object, y0: State) -> None:
    """Refuse a state whose dtype, or device, the field's floating parameters and buffers do not share.

    Checked before solving, so that every device refuses the same inputs: a float32 layer fails on a
    float64 state on the CPU, but XLA promotes silently. Skipped under :func:`torch.autocast`, which runs
    float32 layers on lower-precision states by design.
    """
    if not isinstance(field, nn.Module):
        return
    state = leaves(y0)
    if torch.is_autocast_enabled(state[0].device.type):
        return
    wanted: dict[str, set[Any]] = {"dtype": {x.dtype for x in state}, "device": {x.device for x in state}}
    shared = {"dtype": False, "device": False}
    for x in _floating_tensors(field):  # usually the first settles it: the walk over all of them finds the error
        shared = {what: seen or getattr(x, what) in wanted[what] for what, seen in shared.items()}
        if all(shared.values()):
            return
    for what, ok in shared.items():
        own = {getattr(x, what) for x in _floating_tensors(field)}
        if own and not ok:
            raise InvalidStateError(
                f"y0 has {what} {', '.join(sorted(map(str, wanted[what])))} but the field's parameters have {what} "
                f"{', '.join(sorted(map(str, own)))}. Convert one to the other, "
                f"e.g. field.to(y0.{what}) or y0.to(<the field's {what}>)"
            )


def _floating_tensors(module: nn.Module) -> Iterator[Tensor]:
    return (x for x in itertools.chain(module.parameters(), module.buffers()) if x.is_floating_point())


def warn_outside_domain(field: object, t_first: float, t_last: float) -> None:
    """Warn if ``[t_first, t_last]`` leaves the ``domain`` ``(start, end)`` that the field, or a module of it, declares
    (e.g. a :class:`~neuralode_tf.fields.WeightSharedField` of several sets: where its layers are; beyond, it continues
    its end layers, a choice the stack it was read from does not make)."""
    modules = field.modules() if isinstance(field, nn.Module) else (field,)
    low, high = min(t_first, t_last), max(t_first, t_last)
    for module in modules:
        domain = getattr(module, "domain", None)
        if domain is not None and (low < domain[0] or high > domain[1]):
            warnings.warn(
                f"solving over [{t_first:g}, {t_last:g}], outside the depth [{domain[0]:g}, {domain[1]:g}] where "
                f"{type(module).__name__}'s layers are: beyond it the field continues its end layers",
                stacklevel=3,
            )
            return
