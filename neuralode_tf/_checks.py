"""Checks of what reaches :class:`~neuralode_tf.ContinuousDepth` and the fields' ``bind`` methods.

The field itself, the solve settings, the conditioning keywords and the padding masks: each check raises
``TypeError`` (a wrong kind of value) or ``ValueError`` (a wrong value or shape) with a message that names
the argument and says what is valid. None of them reads a tensor's values, so none synchronises with the device.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from .numerics import InvalidFieldError, InvalidTimesError, _validate, resolve_backend, solve

__all__ = [
    "required_positionals",
    "check_field",
    "check_times",
    "SOLVE_OPTIONS",
    "check_solve_settings",
    "backend_for",
    "bind_calls",
    "check_conditioning",
    "check_shape",
    "check_padding_mask",
    "check_context",
]

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

_REBIND = (
    ": bind() was called for a batch of another shape; bind this batch's conditioning "
    "(ContinuousDepth's forward does, from its keyword arguments)"
)


def required_positionals(function: Callable[..., Any]) -> int | None:
    """How many positional arguments ``function`` requires, or ``None`` if it takes ``*args`` (or has no signature)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in parameters)


def check_field(field: object) -> None:
    """Raise :class:`~neuralode_tf.numerics.InvalidFieldError` (a ``TypeError``, as :func:`~neuralode_tf.solve`
    raises for a field it cannot call) unless ``field`` is an ``nn.Module`` whose ``forward`` takes ``(t, x)``.

    A plain callable is refused rather than wrapped: tensors it closes over would not be registered, so
    they would neither train nor follow ``.to(device)``. A residual branch ``forward(x)`` is refused
    rather than wrapped, so that ``ContinuousDepth.field`` is the module given (with its ``state_dict`` keys).
    """
    if not isinstance(field, nn.Module):
        raise InvalidFieldError(
            f"field must be an nn.Module with forward(t, x) -> dx/dt, got {type(field).__name__}: the tensors a "
            "plain callable uses are not registered, so they would neither train nor follow .to(device); "
            "subclass nn.Module"
        )
    required = required_positionals(field.forward)
    name = type(field).__name__
    if required == 1:
        raise InvalidFieldError(
            f"field: {name}.forward(x) is a residual branch x -> dx, not a field (t, x) -> dx; pass "
            f"neuralode_tf.fields.as_field(branch) (the autonomous field f(t, x) = branch(x)) or a SplitField of "
            "branches"
        )
    if required is not None and required != 2:
        raise InvalidFieldError(f"field: {name}.forward requires {required} positional arguments; a field takes (t, x)")


def check_times(t0: object, t1: object) -> tuple[float, float]:
    """``(t0, t1)`` as floats; ``TypeError`` unless both are real numbers, ``InvalidTimesError`` unless ``t0 < t1``."""
    times = []
    for name, value in (("t0", t0), ("t1", t1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number (depth-time), got {value!r} of type {type(value).__name__}")
        if not math.isfinite(value):
            raise InvalidTimesError(f"{name} must be finite, got {value!r}")
        times.append(float(value))
    if not times[1] > times[0]:
        raise InvalidTimesError(f"t1 must be greater than t0 (depth-time runs forward), got t0={t0!r}, t1={t1!r}")
    return times[0], times[1]


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
    _validate.checkpoints(settings.get("checkpoints"), settings.get("gradient", "backprop"))


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
    _warn_if_all_padding(conditioning.get("key_padding_mask"), "key_padding_mask")
    memory = conditioning.get("memory")
    if memory is not None:
        check_context(memory, "memory", x)
        name = "memory_key_padding_mask"
        check_padding_mask(conditioning.get(name), name, memory.shape[:-1], "memory")
        _warn_if_all_padding(conditioning.get(name), name)


def _warn_if_all_padding(mask: Tensor | None, name: str) -> None:
    """Warn where a row of a padding mask is padding throughout: its queries may see no key, so their attention
    weights are all zero (``nn/_empty_rows.py``). It is well defined but rarely meant; the usual cause is a mask of
    the opposite convention (Hugging Face's ``attention_mask``, 1 at real tokens)."""
    if mask is None or mask.shape[-1] == 0:
        return
    rows = mask.all(dim=-1).flatten()
    if bool(rows.any()):
        which = rows.nonzero().flatten().tolist()
        warnings.warn(
            f"{len(which)} row(s) of {name} (index {which[:5]}{' ...' if len(which) > 5 else ''} of the flattened "
            f"batch) are padding throughout: no key is left to attend to, so their attention weights are zero. "
            f"{name} is True at padding; a Hugging Face attention_mask (1 at real tokens) becomes one as "
            f"~attention_mask.bool()",
            stacklevel=4,
        )


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


def check_shape(
    shape: Iterable[int], expected: Iterable[int], what: str, against: str, *, bound: bool = False, spec: str = ""
) -> None:
    """Raise ``ValueError`` unless ``shape == expected``, saying whether the batch dimensions (all but the last) differ.

    ``what`` names the checked argument, ``against`` where ``expected`` comes from, ``spec`` what ``what`` must
    be (default: of shape ``expected``); ``bound`` says the argument was bound earlier (``bind``), which is how a
    batch of another size usually gets there.
    """
    shape, expected = tuple(shape), tuple(expected)
    if shape == expected:
        return
    if len(shape) == len(expected) and shape[-1:] == expected[-1:]:
        raise ValueError(
            f"{what} has batch shape {shape[:-1]}, but {against} has batch shape {expected[:-1]}"
            + (_REBIND if bound else "")
        )
    spec = spec or f"of shape {expected} to match {against}"
    raise ValueError(f"{what} must be {spec}; got shape {shape}" + (_REBIND if bound else ""))


def check_padding_mask(mask: object, name: str, tokens: Iterable[int], against: str, *, bound: bool = False) -> None:
    """Raise unless ``mask`` is ``None`` or a bool tensor of shape ``tokens`` (``(*batch, n)``), True at padding.

    A non-tensor or non-bool mask raises ``TypeError``, a wrong shape ``ValueError``; the message names ``name``
    and gives the expected shape and dtype. Every attention kind checks its masks with it, at every evaluation
    (a few comparisons of shapes), so a mask bound for another batch is reported as such.
    """
    expected = tuple(tokens)
    if mask is None or (isinstance(mask, Tensor) and mask.dtype == torch.bool and tuple(mask.shape) == expected):
        return
    what = f"the bound {name}" if bound else name
    spec = f"a bool tensor of shape (*batch, n) = {expected} (from {against}), True at padding"
    if not isinstance(mask, Tensor):
        raise TypeError(f"{what} must be {spec}; got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{what} must be {spec}; got dtype {mask.dtype} (for a 0/1 mask pass mask.bool())")
    check_shape(mask.shape, expected, what, against, bound=bound, spec=spec)


def check_context(context: object, name: str, x: Tensor, *, bound: bool = False) -> None:
    """Raise unless ``context`` is a tensor ``(*batch, m, width)`` with the batch shape of ``x``, ``(*batch, n, d)``."""
    what = f"the bound {name}" if bound else name
    if not isinstance(context, Tensor):
        raise TypeError(f"{what} must be a tensor (*batch, m, width) of keys and values, got {type(context).__name__}")
    if context.ndim < 2:
        raise ValueError(
            f"{what} must be a tensor (*batch, m, width) of keys and values, got shape {tuple(context.shape)}"
        )
    if context.shape[:-2] != x.shape[:-2]:
        raise ValueError(
            f"{what} has batch shape {tuple(context.shape[:-2])}, but x has batch shape {tuple(x.shape[:-2])}"
            + (_REBIND if bound else "")
        )
