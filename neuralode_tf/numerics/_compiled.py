"""``solve(..., compile=True)``: the built-in march under :func:`torch.compile`, compiled once per field and grid."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .._dynamo import own_code
from .._typing import Field, State
from ._registry import Backend
from ._state import leaves
from .errors import SolverConfigError

__all__ = ["COMPILE_OPTIONS", "check_compile", "compiled"]

March = Callable[[Field, State], list[State]]
"""``(field, y0) -> [y0, y(t_1), ...]``: a march over a fixed grid."""

COMPILE_OPTIONS = {"cpp_wrapper": True}
"""Inductor options of ``solve(..., compile=True)`` for a state on the CPU. The C++ wrapper calls the generated
kernels without Python in between, which matters where Python overhead dominates (``benchmarks/suite.py``).
Other devices get torch.compile's defaults: on CUDA, ``cpp_wrapper`` given as an option broke the compilation
of backward graphs with torch 2.11 (``CudaKernelParamCache not populated``, pytorch/pytorch#178845)."""

_CPP_WRAPPER_CHECKPOINTS = torch.__version__ >= "2.14"  # a TorchVersion: compared as a version, not as text
"""Before torch 2.14, a checkpointed march (``gradient="checkpoint"``) compiled with ``cpp_wrapper`` failed: the
partitioner took CPU attention (tagged random even at ``dropout_p=0``) for a random op and wrapped its
recomputation in ``run_and_save_rng_state``, which the C++ wrapper cannot emit (``AssertionError:
RunAndSaveRngState`` in cpp_wrapper_cpu.py; seen with 2.9.0, 2.9.1, 2.10.0 and 2.13.0). There such a march keeps
the Python wrapper, unless ``compile`` asks for ``cpp_wrapper`` itself."""

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Compiled marches by field, then by (method, substep, grid, checkpoint, checkpoints, options), each with a code object
of its own (:func:`~neuralode_tf._dynamo.own_code`). A march takes the field as an argument rather than closing over it,
so the cache holds no reference to its key and a field and its compiled marches are freed together."""


def check_compile(compile: object, method: str, backend: Backend) -> None:
    """``compile`` is a bool or a dict of :func:`torch.compile` options, and only where ``backend`` takes it."""
    if not isinstance(compile, (bool, dict)):
        raise SolverConfigError(f"compile must be True, False or a dict of torch.compile options, got {compile!r}")
    if compile is not False and not backend.compile:
        raise SolverConfigError(
            f"compile=True applies to the built-in fixed-grid and splitting methods, not to {method!r} on "
            f"{backend.name!r}"
        )


def compiled(
    make_march: Callable[[], March],
    field: Field,
    y0: State,
    key: tuple,
    *,
    checkpoint: bool,
    compile: bool | dict[str, Any],
) -> Callable[[Field, State], tuple[list[State], Tensor]]:
    """The march ``make_march()`` compiled with ``compile``'s options on top of :data:`COMPILE_OPTIONS`, from the
    cache of ``field`` under ``key`` (which names the march: method, substep, grid, checkpointing) if compiled
    before. It returns the states after ``y0`` and a 0-dim bool tensor computed in the compiled graph: ``True`` if
    the sum of all the states' entries, ``y0``'s too, is finite (NaN and Inf propagate through it;
    :func:`~neuralode_tf.numerics._state.surely_finite` re-checks ``False`` entry by entry, as an overflowing sum of
    finite entries gives it too)."""
    device = leaves(y0)[0].device.type
    key = (*key, device, compile if isinstance(compile, bool) else _hashable(compile))
    cache = _COMPILED.get(field)
    if cache is None:
        cache = _COMPILED[field] = {}
    march = cache.get(key)
    if march is None:
        defaults = COMPILE_OPTIONS if device == "cpu" else {}
        if checkpoint and not _CPP_WRAPPER_CHECKPOINTS:
            defaults = {k: v for k, v in defaults.items() if k != "cpp_wrapper"}
        options = {**defaults, **(compile if isinstance(compile, dict) else {})}
        _hashable(options)
        march = cache[key] = torch.compile(own_code(_checked(make_march())), options=options)
    return march


def _checked(march: March) -> Callable[[Field, State], tuple[list[State], Tensor]]:
    def checked(field: Field, y0: State) -> tuple[list[State], Tensor]:
        states = march(field, y0)
        with torch.no_grad():
            sums = [leaf.sum() for state in states for leaf in leaves(state)]
            finite = torch.isfinite(sum(sums[1:], sums[0]))
        return states[1:], finite  # not y0, an input: an output that is an input costs autograd a view per call

    return checked


def _hashable(options: dict[str, Any]) -> tuple:
    try:
        key = tuple(sorted(options.items()))
        hash(key)
    except TypeError:
        raise SolverConfigError(f"compile options must be hashable values keyed by strings, got {options!r}") from None
    return key
