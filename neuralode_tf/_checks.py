"""Checks of what a depth module (:class:`~neuralode_tf.ContinuousDepth`, or its baseline
:class:`~neuralode_tf.models.DiscreteStack`) is given besides its field: its solve settings, and the conditioning
keywords of a forward that it hands to the fields' ``bind`` methods.

Each check raises ``TypeError`` (a wrong kind of value) or ``ValueError`` (a wrong value or shape) with a message
that names the argument and says what is valid. The field and the depth-times are checked by
:func:`~neuralode_tf.numerics.check_field` and :func:`~neuralode_tf.numerics.check_times`, as ``solve`` checks
them; the masks and the memory by ``neuralode_tf/nn/_conditioning.py``, as attention checks them.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from torch import Tensor, nn

from .nn._conditioning import check_context, check_padding_mask, warn_if_all_padding
from .numerics import check_checkpoints, resolve_backend, solve

__all__ = ["SOLVE_OPTIONS", "check_solve_settings", "backend_for", "bind_calls", "check_conditioning"]

_SET_BY_CONTINUOUS_DEPTH = ("field", "y0", "t")
"""Parameters of :func:`~neuralode_tf.solve` that ContinuousDepth fills in itself."""

_NOT_A_MODULE_SETTING = {
    "dense": "a forward returns x(t1) alone: ContinuousDepth.trajectory(x, t) reads the solve at any depth",
    "event": "a forward stops at t1: call neuralode_tf.solve(module.field, x, [t0, t_max], event=...) to stop earlier",
}
"""Parameters of :func:`~neuralode_tf.solve` that a forward could not honour, with what to use instead."""

SOLVE_OPTIONS = tuple(
    name
    for name in inspect.signature(solve).parameters
    if name not in _SET_BY_CONTINUOUS_DEPTH and name not in _NOT_A_MODULE_SETTING
)
"""The keywords of :func:`~neuralode_tf.solve` that a ContinuousDepth keeps as its solve options."""


def check_solve_settings(field: nn.Module, settings: Mapping[str, Any]) -> None:
    """Refuse now what :func:`~neuralode_tf.solve` would refuse at the first forward and can be told without a state.

    Keywords that are not parameters of ``solve`` raise ``TypeError``; an unknown method, backend or gradient
    method, or a combination no backend supports, raises :class:`~neuralode_tf.numerics.SolverConfigError`
    (:func:`~neuralode_tf.numerics.resolve_backend`), as does a bad ``checkpoints``. Values that need the state or
    the grid (``steps``, ``step_size``, tolerances) are checked by ``solve`` itself.
    """
    for name in settings:
        if name in _SET_BY_CONTINUOUS_DEPTH:
            raise TypeError(f"{name!r} is not a solve setting: ContinuousDepth passes the field, x and [t0, t1]")
        if name in _NOT_A_MODULE_SETTING:
            raise TypeError(f"{name!r} is not a ContinuousDepth setting: {_NOT_A_MODULE_SETTING[name]}")
        if name not in SOLVE_OPTIONS:
            hint = _did_you_mean(name, SOLVE_OPTIONS)
            raise TypeError(f"unknown solve setting {name!r}{hint}; valid: {', '.join(SOLVE_OPTIONS)}")
    backend_for(field, settings)
    check_checkpoints(settings.get("checkpoints"), settings.get("gradient", "backprop"))


def backend_for(field: nn.Module, settings: Mapping[str, Any]) -> str:
    """The backend that :func:`~neuralode_tf.solve` picks for ``field`` with these solve settings
    (:func:`~neuralode_tf.numerics.resolve_backend`, which raises if there is none)."""
    options = {k: settings[k] for k in ("gradient", "substep", "seminorm", "per_sample") if k in settings}
    return resolve_backend(field, settings["method"], settings.get("backend", "auto"), **options)


def bind_calls(field: nn.Module, conditioning: Mapping[str, Any]) -> list[tuple[Callable[..., Any], dict[str, Any]]]:
    """The ``bind`` of every submodule of ``field`` that has one, each with the keywords of ``conditioning`` it names.

    A ``bind`` with ``**kwargs`` receives every keyword, but only named parameters make a keyword valid. A keyword
    that no ``bind`` names raises ``TypeError`` (unless its value is ``None``, which conditions nothing): a
    misspelt ``key_padding_mask`` would otherwise leave the mask unapplied.
    """
    calls: list[tuple[Callable[..., Any], dict[str, Any]]] = []
    named: set[str] = set()
    for module in field.modules():
        # Not isinstance(module, Conditioned), nor getattr(module, "bind", None): a module without a bind would go
        # through nn.Module.__getattr__ (its parameters, buffers and submodules) to an AttributeError, at every
        # forward for every submodule (3x the cost of the walk). A bind is a method of the class or an attribute.
        if "bind" not in module.__dict__ and not hasattr(type(module), "bind"):
            continue
        bind = module.bind
        if not callable(bind):
            continue
        keywords, takes_any = _bind_keywords(bind)
        named |= keywords
        calls.append(
            (bind, dict(conditioning) if takes_any else {k: conditioning[k] for k in keywords & conditioning.keys()})
        )
    unknown = [k for k, v in conditioning.items() if v is not None and k not in named]
    if unknown:
        hint = "".join(_did_you_mean(k, named) for k in unknown[:1])
        takes = ", ".join(sorted(named)) or "none (no submodule has a bind method that names a keyword)"
        raise TypeError(
            f"conditioning keyword {', '.join(map(repr, unknown))} is taken by no bind() of the field "
            f"{type(field).__name__}{hint}; its submodules take: {takes}"
        )
    return calls


def check_conditioning(x: object, conditioning: Mapping[str, Any]) -> None:
    """The library's conditioning keywords against a tensor state ``x`` ``(*batch, n, d)``, before they are bound.

    ``key_padding_mask`` must be bool ``(*batch, n)``, ``memory`` a tensor ``(*batch, m, d_m)`` and
    ``memory_key_padding_mask`` bool ``(*batch, m)``. (The modules check them again against each state they get,
    which catches conditioning bound for another batch.)
    """
    if not isinstance(x, Tensor) or x.ndim < 2:
        return
    check_padding_mask(conditioning.get("key_padding_mask"), "key_padding_mask", x.shape[:-1], "x")
    warn_if_all_padding(conditioning.get("key_padding_mask"), "key_padding_mask")
    memory = conditioning.get("memory")
    if memory is not None:
        check_context(memory, "memory", x)
        name = "memory_key_padding_mask"
        check_padding_mask(conditioning.get(name), name, memory.shape[:-1], "memory")
        warn_if_all_padding(conditioning.get(name), name)


def _bind_keywords(bind: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    function = getattr(bind, "__func__", None)  # a bound method: cache by its function
    return (
        _method_keywords(function) if function is not None else _keywords(inspect.signature(bind).parameters.values())
    )


@functools.cache
def _method_keywords(function: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    return _keywords(list(inspect.signature(function).parameters.values())[1:])  # after self


def _keywords(parameters: Iterable[inspect.Parameter]) -> tuple[frozenset[str], bool]:
    """The names a call can pass by keyword, and whether ``**kwargs`` takes any other."""
    parameters = list(parameters)
    names = frozenset(p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    return names, any(p.kind is p.VAR_KEYWORD for p in parameters)


def _did_you_mean(name: str, valid: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
