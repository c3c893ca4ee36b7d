"""What :func:`~neuralode_tf.solve` settles from its arguments before solving, once per configuration.

Checking every argument (the times, the method, the backend that runs it, the tolerances, the step) costs a compiled
solve of a small field a few percent of its time when done on every call. :func:`settle` does it and returns a
:class:`Plan`; :func:`remembered` gives the plan of an earlier call with the same configuration:

* the same field (the same object), the same arguments of the same types (``steps=2.0`` is refused where ``steps=2``
  is not), each a plain value (``None``, a bool, a number, a string, or a dict or tuple of them; anything else is
  settled afresh), and ``t`` a list or tuple of Python numbers;
* ``y0`` with the same structure, shapes, dtypes, devices and ``requires_grad``;
* the same autocast state and grad mode, no backend, tableau or splitting scheme registered since
  (:func:`~neuralode_tf.numerics._registry.registry_edits`), and no submodule registered in the field's tree
  since (:func:`~neuralode_tf.numerics._field_checks.tree_edits`: a field's ``parts`` come from its submodules).

What can change between calls with the same configuration is checked on every call by ``solve`` itself: that the
field's parameters share the state's dtype and device, the field's ``domain``, its step callbacks, and gradients
through a method outside autograd.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .._typing import Field, State
from . import _feature_checks, _validate
from ._compiled import check_compile
from ._field_checks import check_field_matches_state, tree_edits, watch
from ._registry import Backend, Settings, get_backend, registry_edits
from ._resolve import resolve_backend
from ._time_gradients import wants_time_gradients

__all__ = ["Plan", "settle", "remembered"]


@dataclass(frozen=True)
class Plan:
    """The settled arguments of a solve.

    Attributes:
        backend: The backend that runs it.
        times: The requested times, as floats (the first sample's with per-sample times).
        sample_times: Each sample's times (a 2-D ``t``), or ``None``.
        fixed: Whether the method steps on a fixed grid.
        step: The largest step of a fixed grid, ``None`` for an adaptive method.
        rtol_warning: What to warn when a given ``rtol`` was raised, or ``None``.
        time_gradients: ``t`` is a tensor that requires grad.
        settings: What the backend is asked to do, without a ``trajectory`` (``solve`` adds one for dense output and
            events); shared by the calls of the configuration, so its ``options`` are read-only.
    """

    backend: Backend
    times: tuple[float, ...]
    sample_times: list[list[float]] | None
    fixed: bool
    step: float | None
    rtol_warning: str | None
    time_gradients: bool
    settings: Settings


def settle(field: Field, y0: State, t: Sequence[float] | Tensor, arguments: dict[str, Any]) -> Plan:
    """Check ``solve``'s arguments (by keyword in ``arguments``) against each other, ``field`` and ``y0``, in the
    order its docstring gives them; raises on the first bad one."""
    a = arguments
    method, gradient, compile = a["method"], a["gradient"], a["compile"]
    _validate.check_state(y0)
    _feature_checks.check_dense_and_event(a["dense"], a["event"])
    check_field_matches_state(field, y0)
    sample_times = _feature_checks.sample_times(t, y0)
    times = sample_times[0] if sample_times else _validate.check_times(t, y0)
    _validate.check_flags(a["seminorm"], a["per_sample"], a["max_steps"])
    checkpoints = _validate.check_checkpoints(a["checkpoints"], gradient, y0)
    chosen = get_backend(
        resolve_backend(
            field,
            method,
            a["backend"],
            gradient=gradient,
            substep=a["substep"],
            seminorm=a["seminorm"],
            per_sample=a["per_sample"],
        )
    )
    per_sample = _validate.check_state_for_backend(y0, chosen, a["per_sample"])
    check_compile(compile, method, chosen)
    recording = a["dense"] or a["event"] is not None
    time_gradients = wants_time_gradients(t)
    _feature_checks.check_recording(recording, method, chosen, gradient, compile, times, a["event"])
    fixed = method in chosen.fixed_grid
    _feature_checks.check_sample_times(sample_times, chosen, per_sample, fixed, field, recording or time_gradients, y0)
    step = _validate.step_size(method, fixed, times, a["step_size"], a["steps"])
    rtol, atol, rtol_warning = _validate.tolerances(method, chosen, fixed, a["rtol"], a["atol"], y0)
    options = _validate.first_step(method, chosen, a["dt0"], a["options"])
    settings = Settings(
        method=method,
        step_size=step,
        substep=a["substep"],
        rtol=rtol,
        atol=atol,
        gradient=gradient,
        checkpoints=checkpoints,
        seminorm=a["seminorm"],
        per_sample=per_sample,
        max_steps=a["max_steps"],
        dt0=a["dt0"],
        options=types.MappingProxyType(options),
        compile=compile,
        sample_times=sample_times,
    )
    return Plan(
        backend=chosen,
        times=tuple(times),
        sample_times=sample_times,
        fixed=fixed,
        step=step,
        rtol_warning=rtol_warning,
        time_gradients=time_gradients,
        settings=settings,
    )


_PLANS: weakref.WeakKeyDictionary[Any, dict[tuple, Plan]] = weakref.WeakKeyDictionary()
"""Plans by field, then by configuration (:func:`_configuration`); the oldest are dropped past :data:`_PER_FIELD`."""

_PER_FIELD = 32


def remembered(field: Field, y0: State, t: Sequence[float] | Tensor, arguments: dict[str, Any]) -> Plan:
    """The plan of an earlier call with this configuration, or :func:`settle`'s, remembered if it can be."""
    key = _configuration(y0, t, arguments)
    try:
        plans = _PLANS.get(field) if key is not None else None
    except TypeError:  # a field that cannot be weakly referenced (a builtin function): settled every time
        plans, key = None, None
    plan = plans.get(key) if plans is not None and key is not None else None
    if plan is not None:
        return plan
    plan = settle(field, y0, t, arguments)
    if key is not None:
        watch(field)
        plans = _PLANS.setdefault(field, {})
        if len(plans) >= _PER_FIELD:
            del plans[next(iter(plans))]
        plans[key] = plan
    return plan


_PLAIN = frozenset({type(None), bool, int, float, str})


def _frozen(value: object) -> object:
    """``value`` with its type, as a hashable key, if it is plain (:data:`_PLAIN`, or a tuple or string-keyed dict of
    plain values); raises ``TypeError`` otherwise. Types are kept because equal values of other types (``1``, ``1.0``
    and ``True``) are not the same argument to a check."""
    if type(value) in _PLAIN:
        return type(value), value
    if type(value) is tuple:
        return tuple, tuple(map(_frozen, value))
    if type(value) is dict and all(type(k) is str for k in value):
        return dict, tuple((k, _frozen(v)) for k, v in sorted(value.items()))
    raise TypeError("not a plain value")


def _configuration(y0: State, t: object, arguments: dict[str, Any]) -> tuple | None:
    """The key of a solve's configuration, or ``None`` if it cannot have one (see the module's docstring)."""
    if type(t) not in (list, tuple):
        return None
    times: tuple = tuple(t)  # type: ignore[arg-type]
    if not _NUMBERS.issuperset(map(type, times)):
        return None
    state: tuple
    if isinstance(y0, Tensor):
        device, state = y0.device, (y0.shape, y0.dtype, y0.requires_grad)
    elif type(y0) is tuple and y0 and all(isinstance(x, Tensor) for x in y0):
        device, state = y0[0].device, tuple((x.shape, x.dtype, x.device, x.requires_grad) for x in y0)
    else:
        return None
    values: tuple = tuple(arguments.values())
    kinds = tuple(map(type, values))
    if not _PLAIN.issuperset(kinds):
        try:
            values = tuple(map(_frozen, values))
        except TypeError:
            return None
    autocast = torch.is_autocast_enabled(device.type) and torch.get_autocast_dtype(device.type)
    return (times, device, state, autocast, torch.is_grad_enabled(), registry_edits(), tree_edits(), kinds, values)


_NUMBERS = frozenset({int, float})
