"""Helpers for states that are a tensor or a tuple of tensors (augmented states); their structure (``leaves``,
``rebuild``, ``stack``, ``unstack``) is ``neuralode_tf/_tree.py``'s, imported from here too."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor

from .._tree import leaves, rebuild
from .._tree import stack as stack
from .._tree import unstack as unstack
from .._typing import State
from .errors import FieldOutputError


def tree_map(fn: Callable[..., Tensor], *states: State) -> State:
    """Apply ``fn`` leaf by leaf to states of the same structure."""
    if isinstance(states[0], tuple):
        return tuple(fn(*xs) for xs in zip(*states))
    return fn(*states)


def axpy(y: State, terms: list[tuple[float, State]]) -> State:
    """``y + sum(coef * k)``, skipping zero coefficients, leaf by leaf."""
    nonzero = [(coef, leaves(k)) for coef, k in terms if coef != 0.0]
    if not nonzero:
        return y
    return rebuild(y, [_axpy_leaf(y_i, [(coef, k[i]) for coef, k in nonzero]) for i, y_i in enumerate(leaves(y))])


def _axpy_leaf(y: Tensor, terms: list[tuple[float, Tensor]]) -> Tensor:
    out = torch.add(y, terms[0][1], alpha=terms[0][0])
    for coef, k in terms[1:]:
        out = out.add(k, alpha=coef)
    return out


def all_finite(y: State) -> Tensor:
    """A 0-dim bool tensor, on the state's device (no host synchronisation)."""
    flags = [torch.isfinite(leaf).all() for leaf in leaves(y)]
    out = flags[0]
    for flag in flags[1:]:
        out = out & flag
    return out


class CheckedStates(list):
    """States whose finiteness was found where they were computed (a compiled march): ``finite``, a 0-dim bool tensor,
    ``True`` if the sum of all their entries is finite. :func:`surely_finite` reads it instead of summing again."""

    def __init__(self, states: list[State], finite: Tensor):
        super().__init__(states)
        self.finite = finite


def surely_finite(states: list[State]) -> bool:
    """``True`` if every entry of ``states`` is finite, found from one sum: NaN and Inf propagate through it.

    A sum that overflows is re-checked entry by entry, so the answer is exact. One reduction per tensor
    instead of :func:`all_finite`'s elementwise test (five kernels on a CPU) for the common, finite case.
    """
    if isinstance(states, CheckedStates):
        if bool(states.finite):
            return True
    else:
        with torch.no_grad():
            sums = [leaf.sum() for state in states for leaf in leaves(state)]
            if math.isfinite(float(sum(sums[1:], sums[0]))):
                return True
    return all(bool(all_finite(state)) for state in states)


def describe(y: State) -> str:
    """Shapes, dtypes and devices of a state, for error messages."""
    parts = [f"{tuple(x.shape)} {x.dtype} on {x.device}" for x in leaves(y)]
    return parts[0] if not isinstance(y, tuple) else "(" + ", ".join(parts) + ")"


def check_like(out: object, y: State, what: str, *, any_dtype: bool = False) -> None:
    """Raise :class:`FieldOutputError` unless ``out`` has the structure, shapes, dtypes and devices of ``y``; with
    ``any_dtype`` (under :func:`torch.autocast`) any floating dtype.

    Only metadata is compared, so this never synchronises with the device.
    """
    if isinstance(y, tuple):
        ok = isinstance(out, tuple) and len(out) == len(y) and all(isinstance(o, Tensor) for o in out)
    else:
        ok = isinstance(out, Tensor)
    if ok:  # out is a state: the checks above prove it
        ok = all(
            o.shape == s.shape and (o.is_floating_point() if any_dtype else o.dtype == s.dtype) and o.device == s.device
            for o, s in zip(leaves(cast(State, out)), leaves(y))
        )
    if not ok:
        got = (
            describe(out)
            if isinstance(out, (Tensor, tuple)) and all(isinstance(o, Tensor) for o in leaves(out))
            else type(out).__name__
        )
        dtypes = "floating dtypes (under autocast)" if any_dtype else "dtypes"
        raise FieldOutputError(
            f"{what} returned {got}, but the state is {describe(y)}. A field must return dy/dt with "
            f"the same structure (tensor or tuple of tensors), shapes, {dtypes} and devices as y."
        )
