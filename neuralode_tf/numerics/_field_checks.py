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
from torch.nn.modules.module import register_module_module_registration_hook

from ._state import State, leaves
from .errors import InvalidFieldError, InvalidStateError

__all__ = [
    "attribute",
    "check_field",
    "check_field_matches_state",
    "declared",
    "tree_edits",
    "warn_outside_domain",
    "watch",
]

_FIELD_FUNCTIONS: weakref.WeakSet[types.FunctionType] = weakref.WeakSet()
"""Functions already seen to take ``(t, y)``: :func:`check_field` reads a signature once per function, not per solve."""


def check_field(field: object, *, module: bool = False) -> None:
    """Raise :class:`~neuralode_tf.numerics.InvalidFieldError` (a ``TypeError``) unless ``field`` can be called as
    ``field(t, y) -> dy/dt``: a residual branch ``forward(x)`` is refused with how to make a field of it.

    With ``module``, for a caller that keeps the field as a submodule (:class:`~neuralode_tf.ContinuousDepth`), it
    must also be an ``nn.Module``: a plain callable is refused rather than wrapped, as the tensors it uses would not
    be registered, so they would neither train nor follow ``.to(device)``.
    """
    if module and not isinstance(field, nn.Module):
        raise InvalidFieldError(
            f"field must be an nn.Module with forward(t, x) -> dx/dt, got {type(field).__name__}: the tensors a "
            "plain callable uses are not registered, so they would neither train nor follow .to(device); "
            "subclass nn.Module"
        )
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
        f"(forward(x) -> increment) is not a field: pass {hint}, the autonomous field dy/dt = branch(y), or a "
        "SplitField of branches"
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
    first = _first_floating(field)
    if first is None or (first.dtype == state[0].dtype and first.device == state[0].device):
        return  # usually settled by the first tensor of the state: the checks below look at them all
    if any(first.dtype == x.dtype for x in state) and any(first.device == x.device for x in state):
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


def _first_floating(module: nn.Module) -> Tensor | None:
    """The first floating parameter or buffer of ``module``: the one found at the last walk while no submodule has
    been registered since (:func:`tree_edits`), else found by a walk that stops at it. Only a mismatch with the
    state is an error, and that is decided by a walk over all of them."""
    edits, found = _FIRST_FLOATING.get(module, (-1, None))
    first = found() if found is not None else None
    if edits == _TREE_EDITS[0] and first is not None:
        return first
    stack: list[nn.Module | None] = [module]
    while stack and first is None:
        current = stack.pop()
        if current is None:
            continue
        _WATCHED.add(current)
        tensors = itertools.chain(current._parameters.values(), current._buffers.values())
        first = next((x for x in tensors if x is not None and x.is_floating_point()), None)
        stack.extend(reversed(current._modules.values()))
    _FIRST_FLOATING[module] = (_TREE_EDITS[0], weakref.ref(first) if first is not None else None)
    return first


_FIRST_FLOATING: weakref.WeakKeyDictionary[nn.Module, tuple[int, weakref.ref[Tensor] | None]] = (
    weakref.WeakKeyDictionary()
)


def _floating_tensors(module: nn.Module) -> Iterator[Tensor]:
    return (x for x in itertools.chain(module.parameters(), module.buffers()) if x.is_floating_point())


def declared(field: object, name: str) -> list[tuple[object, Any]]:
    """``(module, value)`` for ``field`` and each of its submodules that declares attribute ``name``, on its class
    or as an instance attribute, e.g. ``domain`` or ``causal``.

    ``solve`` asks on every call, and a walk over a 12-layer field's 158 modules cost a compiled solve 3% of its
    time. So the modules found are kept per field, and walked for again once a submodule has been registered
    in its tree (``module.sub = ...``, ``add_module``, ``ModuleList.append``: :func:`tree_edits`). The values are
    read afresh on every call. Not noticed until the next registration in the tree: a module put in with
    ``ModuleList.insert``, which bypasses registration, and a class attribute ``name`` added to a class later.
    """
    if not isinstance(field, nn.Module):
        return [(field, getattr(field, name))] if hasattr(field, name) else []
    found = _DECLARING.get(field)
    if found is None:
        found = _DECLARING[field] = {}
    edits, modules = found.get(name, (-1, []))
    if edits != _TREE_EDITS[0]:
        modules = [weakref.ref(module) for module in _walk(field, name)]
        found[name] = (_TREE_EDITS[0], modules)
    return [(module, getattr(module, name)) for ref in modules if (module := ref()) is not None]


def _walk(root: nn.Module, name: str) -> Iterator[nn.Module]:
    """The modules of ``root`` (itself first, in the order of ``modules()``) that declare ``name``."""
    stack: list[nn.Module | None] = [root]
    while stack:
        module = stack.pop()
        if module is None:
            continue
        _WATCHED.add(module)
        if name in module.__dict__ or _class_declares(type(module), name):
            yield module
        stack.extend(reversed(module._modules.values()))


def watch(field: object) -> None:
    """Count a submodule registered anywhere in ``field``'s tree from now on into :func:`tree_edits`."""
    if isinstance(field, nn.Module):
        _WATCHED.update(field.modules())


def tree_edits() -> int:
    """How many submodules have been registered into a watched module (:func:`watch`) in this process so far:
    a tree read while it had a count is the same tree while the count is unchanged."""
    return _TREE_EDITS[0]


_TREE_EDITS = [0]
_WATCHED: weakref.WeakSet[nn.Module] = weakref.WeakSet()
"""The modules of the trees walked: a registration into another module (a wrapper built per solve) changes none."""


def _count_registration(module: nn.Module, name: str, submodule: nn.Module | None) -> None:
    if module in _WATCHED:
        _TREE_EDITS[0] += 1


register_module_module_registration_hook(_count_registration)

_DECLARING: weakref.WeakKeyDictionary[nn.Module, dict[str, tuple[int, list[weakref.ref[nn.Module]]]]] = (
    weakref.WeakKeyDictionary()
)
"""By field, then attribute name: the value of :data:`_TREE_EDITS` at the walk, and the declaring modules found."""


def attribute(obj: object, name: str, default: Any = None) -> Any:
    """``getattr(obj, name, default)`` for an attribute declared on the class or the instance, which on a module that
    lacks it skips :meth:`nn.Module.__getattr__`'s search of its parameters, buffers and submodules."""
    if isinstance(obj, nn.Module) and name not in obj.__dict__ and not _class_declares(type(obj), name):
        return default
    return getattr(obj, name, default)


_DECLARES: dict[str, dict[type, bool]] = {}
"""Whether a class declares an attribute, by attribute name then class."""


def _class_declares(cls: type, name: str) -> bool:
    declares = _DECLARES.setdefault(name, {})
    on_class = declares.get(cls)
    if on_class is None:
        on_class = declares[cls] = hasattr(cls, name)
    return on_class


def warn_outside_domain(field: object, t_first: float, t_last: float) -> None:
    """Warn if ``[t_first, t_last]`` leaves the ``domain`` ``(start, end)`` that the field, or a module of it, declares
    (e.g. a :class:`~neuralode_tf.fields.WeightSharedField` of several sets: where its layers are; beyond, it continues
    its end layers, a choice the stack it was read from does not make)."""
    low, high = min(t_first, t_last), max(t_first, t_last)
    for module, domain in declared(field, "domain"):
        if domain is not None and (low < domain[0] or high > domain[1]):
            warnings.warn(
                f"solving over [{t_first:g}, {t_last:g}], outside the depth [{domain[0]:g}, {domain[1]:g}] where "
                f"{type(module).__name__}'s layers are: beyond it the field continues its end layers",
                stacklevel=3,
            )
            return
