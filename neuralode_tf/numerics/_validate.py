"""Validation of :func:`~neuralode_tf.numerics.solve`'s arguments.

Each check raises a :class:`~neuralode_tf.numerics.errors.SolveError` subclass whose message names the
argument, says what is wrong and what would be right, before any backend sees the input.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence
from typing import Any, TypeGuard

import torch
from torch import Tensor, nn

from ._checkpointing import MAX_REPETITIONS, repetitions
from ._precision import rtol_floor
from ._registry import Backend, offering
from ._state import State, leaves
from .errors import InvalidStateError, InvalidTimesError, SolverConfigError

DEFAULT_RTOL, DEFAULT_ATOL = 1e-6, 1e-8
"""The tolerances of adaptive methods when ``rtol`` / ``atol`` are not given."""


def check_state(y0: object) -> None:
    """``y0`` is a real floating tensor or a non-empty tuple of them, on one device."""
    tensors = y0 if isinstance(y0, tuple) else (y0,)
    if not tensors or not all(isinstance(x, Tensor) for x in tensors):
        raise InvalidStateError(f"y0 must be a tensor or a non-empty tuple of tensors, got {type(y0).__name__}")
    if not all(x.is_floating_point() for x in tensors):
        raise InvalidStateError(f"y0 must be floating point, got dtypes {[x.dtype for x in tensors]}")
    if len({x.device for x in tensors}) > 1:
        raise InvalidStateError(f"the tensors of y0 must share one device, got {[str(x.device) for x in tensors]}")


def check_times(
    t: Sequence[object] | Tensor, y0: State | None = None, *, names: Sequence[str] | None = None
) -> list[float]:
    """``t`` as floats: real, 1-D, at least two, finite, strictly increasing and, given ``y0``, within the range of
    ``y0``'s dtype. Raises :class:`~neuralode_tf.numerics.InvalidTimesError`.

    ``names`` names the times one by one where a caller takes them as separate arguments (``t0`` and ``t1`` of
    :class:`~neuralode_tf.ContinuousDepth`): each must then be a real number itself, ``TypeError`` otherwise (not a
    string, a bool or a tensor, which a sequence ``t`` may hold), and the messages name them.
    """
    times = _numbers(t) if names is None else [_real(value, name) for name, value in zip(names, t, strict=True)]
    if len(times) < 2:
        raise InvalidTimesError(f"t needs at least two times (start and end), got {len(times)}")
    for i, time in enumerate(times):
        if not math.isfinite(time):
            what = f"{names[i]} must be finite, got {time!r}" if names else f"t must be finite, got {times}"
            raise InvalidTimesError(what)
    for i in range(1, len(times)):
        if times[i] > times[i - 1]:
            continue
        if names is not None:
            earlier, later = names[i - 1], names[i]
            raise InvalidTimesError(
                f"{later} must be greater than {earlier} (time runs forward), "
                f"got {earlier}={times[i - 1]!r}, {later}={times[i]!r}"
            )
        raise InvalidTimesError(
            f"t must be strictly increasing, but t[{i}]={times[i]} follows t[{i - 1}]={times[i - 1]}"
        )
    if y0 is None:
        return times
    largest = min(torch.finfo(x.dtype).max for x in leaves(y0))
    if max(abs(times[0]), abs(times[-1]), times[-1] - times[0]) > largest:
        raise InvalidTimesError(
            f"t from {times[0]:g} to {times[-1]:g} overflows y0's dtype {_dtypes(y0)} (largest {largest:g}): "
            "rescale time, or use a wider dtype for y0"
        )
    return times


def _numbers(t: Sequence[object] | Tensor) -> list[float]:
    """A sequence ``t`` (a 1-D tensor, or anything ``float`` takes each element of) as floats."""
    if isinstance(t, Tensor):
        if t.ndim != 1:
            raise InvalidTimesError(
                f"t must be 1-D (or a (batch, n) tensor of per-sample times), got shape {tuple(t.shape)}"
            )
        if t.is_complex() or t.dtype == torch.bool:
            raise InvalidTimesError(f"t must be real, got dtype {t.dtype}")
        return t.detach().double().tolist()
    if isinstance(t, (str, bytes)):
        raise InvalidTimesError(f"t must be a 1-D sequence of numbers, got {type(t).__name__} {t!r}")
    try:
        return [float(x) for x in t]  # type: ignore[arg-type]  # float() says what it cannot take
    except (TypeError, ValueError) as err:
        raise InvalidTimesError(f"t must be a 1-D sequence of numbers: {err}") from None


def _real(value: object, name: str) -> float:
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number (a time), got {value!r} of type {type(value).__name__}")
    return float(value)


def check_flags(seminorm: object, per_sample: object, max_steps: object) -> None:
    """Types of the switches and of ``max_steps``."""
    if not isinstance(seminorm, bool):
        raise SolverConfigError(f"seminorm must be True or False, got {seminorm!r}")
    if not isinstance(per_sample, bool):
        hint = ": a shape cannot tell a batch from one coupled state, so nothing guesses" if per_sample is None else ""
        raise SolverConfigError(f"per_sample must be True or False, got {per_sample!r}{hint}")
    if not _is_int(max_steps) or max_steps < 1:
        raise SolverConfigError(f"max_steps must be a positive integer, got {max_steps!r}")


def check_checkpoints(checkpoints: object, gradient: str, y0: State | None = None) -> int | None:
    """``checkpoints`` as an int (or None): a positive budget of stored states, for ``gradient="checkpoint"`` alone
    (the built-in backend's), and not on XLA, where checkpoints do not nest. ``y0=None`` skips the device."""
    if checkpoints is None:
        return None
    if not _is_int(checkpoints) or checkpoints < 1:
        raise SolverConfigError(
            f"checkpoints must be a positive integer (the most states kept for backward) or None, got {checkpoints!r}"
        )
    if gradient != "checkpoint":
        raise SolverConfigError(
            f"checkpoints={checkpoints} is the budget of gradient='checkpoint' (built-in backend), but "
            f"gradient={gradient!r}: pass gradient='checkpoint', or drop checkpoints"
        )
    if y0 is not None and leaves(y0)[0].device.type == "xla":
        raise SolverConfigError(
            f"checkpoints={checkpoints} nests checkpoints, which torch_xla's checkpoint cannot do: on XLA, "
            "gradient='checkpoint' checkpoints every step (drop checkpoints)"
        )
    return int(checkpoints)


def check_checkpoint_depth(checkpoints: int | None, n_steps: int) -> None:
    """Refuse a budget that recomputes some step more than ``MAX_REPETITIONS`` times, nesting checkpoints that deep
    (:data:`~neuralode_tf.numerics._checkpointing.MAX_REPETITIONS`): Python's recursion limit would stop it."""
    if checkpoints is None or checkpoints >= n_steps or repetitions(n_steps, checkpoints) <= MAX_REPETITIONS:
        return
    least = next(c for c in itertools.count(checkpoints + 1) if repetitions(n_steps, c) <= MAX_REPETITIONS)
    raise SolverConfigError(
        f"checkpoints={checkpoints} for {n_steps} steps would recompute some step "
        f"{repetitions(n_steps, checkpoints)} times, inside as many nested checkpoints, deeper than Python's "
        f"recursion limit allows (at most {MAX_REPETITIONS}): give checkpoints >= {least}"
    )


def check_state_for_backend(y0: State, backend: Backend, per_sample: bool) -> bool:
    """What ``backend`` needs of ``y0``; returns its ``per_sample`` (False where it has none).

    A backend that concatenates the tensors of a tuple state (torchdiffeq, torchode) needs one dtype, and
    at least one element. Per-sample stepping (torchode's, only when asked for) needs a batch dimension,
    the first of every tensor of ``y0`` and of one size.
    """
    tensors = leaves(y0)
    if backend.concatenates and len({x.dtype for x in tensors}) > 1:
        raise InvalidStateError(
            f"the tensors of y0 must share one dtype on the {backend.name} backend, got {_dtypes(y0)} "
            "(the built-in backend keeps a dtype per tensor)"
        )
    if backend.concatenates and sum(x.numel() for x in tensors) == 0:
        shapes = [tuple(x.shape) for x in tensors]
        raise InvalidStateError(f"y0 has no elements (shapes {shapes}); {backend.name} needs one")
    if not backend.per_sample:
        return False
    batched = all(x.ndim >= 1 for x in tensors) and len({x.shape[0] for x in tensors}) == 1
    if per_sample and not batched:
        raise InvalidStateError(
            f"per_sample=True steps each sample along dim 0 of y0, which needs every tensor of y0 to have that "
            f"dimension, of one size; got shapes {[tuple(x.shape) for x in tensors]}. Pass per_sample=False"
        )
    return per_sample


def step_size(method: str, fixed: bool, times: list[float], step_size: object, steps: object) -> float | None:
    """The step of a fixed-grid method from ``step_size`` or ``steps``; None for an adaptive one."""
    if not fixed:
        if step_size is not None or steps is not None:
            raise SolverConfigError(
                f"{method!r} is adaptive: it takes rtol/atol (and dt0 for its first step), not step_size or steps"
            )
        return None
    if (step_size is None) == (steps is None):
        raise SolverConfigError(f"fixed-grid method {method!r} needs exactly one of step_size= or steps=")
    if steps is not None:
        if not _is_int(steps) or steps < 1:
            raise SolverConfigError(f"steps must be a positive integer, got {steps!r}")
        return (times[-1] - times[0]) / int(steps)
    if not (_is_real(step_size) and math.isfinite(step_size) and step_size > 0):
        raise SolverConfigError(f"step_size must be a positive finite number, got {step_size!r}")
    return float(step_size)


def tolerances(
    method: str, backend: Backend, fixed: bool, rtol: object, atol: object, y0: State
) -> tuple[float, float, str | None]:
    """``(rtol, atol, warning)``: the tolerances with their defaults, for a method that uses them; refused for one
    that would ignore them. ``rtol`` is raised to :func:`~neuralode_tf.numerics._precision.rtol_floor` (under
    autocast, for 16-bit states); ``warning`` says so when the caller gave a finer one, else is ``None``."""
    if fixed and method not in backend.toleranced:
        given = [name for name, value in (("rtol", rtol), ("atol", atol)) if value is not None]
        if given:
            raise SolverConfigError(
                f"fixed-grid {method!r} has no error control, so {' and '.join(given)} would be ignored: give "
                "step_size= or steps= alone, or choose an adaptive method such as 'dopri5'"
            )
    given_rtol = rtol
    rtol = DEFAULT_RTOL if rtol is None else rtol
    atol = DEFAULT_ATOL if atol is None else atol
    if not (_is_real(rtol) and math.isfinite(rtol) and rtol >= 0):
        raise SolverConfigError(f"rtol must be a finite number >= 0, got {rtol!r}")
    if not (_is_real(atol) and math.isfinite(atol) and atol > 0):
        raise SolverConfigError(
            f"atol must be a finite number > 0, got {atol!r}: the error control divides by atol + rtol * |y|, "
            "which is 0 wherever a component of y is (and an adjoint's parameter gradients start at 0)"
        )
    if not fixed:
        # The error norm squares y / (atol + rtol * |y|), up to 1 / rtol where |y| is large (|y| / atol if
        # rtol = 0): that must not overflow the state's dtype (float16's largest, 65504, allows 1 / 256).
        finest = 1.0 / math.sqrt(min(torch.finfo(x.dtype).max for x in leaves(y0)))
        name, value = ("rtol", rtol) if rtol > 0 else ("atol", atol)
        if value < finest:
            raise SolverConfigError(
                f"{name}={value:g} is finer than y0's dtype {_dtypes(y0)} can resolve (the error norm squares "
                f"about 1 / {name}): use {name} >= {finest:.2g}, or a wider dtype for y0"
            )
    # A field computing in 16 bits (autocast, a 16-bit y0) is accurate to its unit roundoff alone: a finer rtol would
    # shrink the steps chasing rounding noise (_precision). The default rtol is raised quietly, a given one with a word.
    floor = rtol_floor(y0)
    warning = None
    if given_rtol is not None and float(rtol) < floor:
        warning = (
            f"rtol={rtol!r} is below {floor!r}, the unit roundoff of the 16-bit dtype the field computes in "
            f"(autocast, or a 16-bit state), which no error estimate resolves: the solve uses rtol={floor!r}"
        )
    return max(float(rtol), floor), float(atol), warning


def first_step(method: str, backend: Backend, dt0: object, options: object) -> dict[str, Any]:
    """Check ``dt0`` and ``options`` (torchdiffeq's, whose ``first_step`` is another ``dt0``); returns ``options``."""
    if options is not None and not isinstance(options, dict):
        kind = type(options).__name__
        raise SolverConfigError(f"options must be a dict of {offering('options')} options, got {kind}")
    options = options or {}
    if options and not backend.options:
        raise SolverConfigError(
            f"options are passed to {offering('options')}, but this solve runs on {backend.name!r}; "
            f"got options {sorted(options)}"
        )
    reserved = sorted({"step_size", "grid_constructor"} & set(options))
    if reserved:
        raise SolverConfigError(f"options {reserved} are set by solve: give step_size= or steps= instead")
    for name, value in (("dt0", dt0), ("options['first_step']", options.get("first_step"))):
        if value is None:
            continue
        if method not in backend.takes_dt0:
            raise SolverConfigError(f"{name} is the first step of an adaptive Runge-Kutta method, not of {method!r}")
        if not (_is_real(value) and math.isfinite(value) and value > 0):
            raise SolverConfigError(f"{name} must be a positive finite number, got {value!r}")
    if dt0 is not None and "first_step" in options:
        raise SolverConfigError("dt0 and options['first_step'] both set the first step: give one of them")
    return options


def check_gradients(method: str, backend: Backend, gradient: str, field: object, y0: State) -> None:
    """Refuse ``gradient="backprop"`` through a method that runs outside autograd when a gradient is wanted."""
    if method not in backend.outside_autograd or gradient != "backprop":
        return
    params = field.parameters() if isinstance(field, nn.Module) else ()
    if torch.is_grad_enabled() and any(x.requires_grad for x in itertools.chain(leaves(y0), params)):
        raise SolverConfigError(
            f"method {method!r} runs outside autograd, so gradient='backprop' would give no gradient: use "
            "gradient='adjoint', or solve under torch.no_grad()"
        )


def _dtypes(y0: State) -> str:
    return ", ".join(sorted({str(x.dtype) for x in leaves(y0)}))


def _is_int(value: object) -> TypeGuard[int]:
    """An integer other than a bool (``int``, a NumPy integer: any :class:`numbers.Integral`), typed as ``int``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> TypeGuard[float]:
    """A real number other than a bool (any :class:`numbers.Real`), typed as ``float``, which stands for them all."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
