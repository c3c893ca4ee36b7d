"""Mixed precision: the dtypes :func:`~neuralode_tf.numerics.solve` computes in under :func:`torch.autocast`, and
for 16-bit states (bfloat16, float16).

* **The state** that the field gets, and the solution, have ``y0``'s dtype. Under autocast a float32 ``y0`` stays
  float32: the field's matmuls run in the autocast dtype and its output, whatever its dtype, is cast to the
  state's, as a discrete residual stack under autocast keeps its residual stream in float32 (``x + branch(x)``
  promotes). A 16-bit ``y0`` is stepped **in its own dtype on the built-in fixed grids**, so that one step per layer
  is the discrete stack in that dtype (a bfloat16 Hugging Face model read as an ODE gives its own logits), and
  **integrated in float32 by torchdiffeq and torchode**: the solver keeps a float32 copy of the state, calls the
  field on that copy rounded to ``y0``'s dtype, casts the field's output to float32, and rounds the solution to
  ``y0``'s dtype at the end. Summed in 16 bits, every increment under half a unit in the last place of the state is
  lost: a bfloat16 state of a small transformer field solved with rk4 drifted 24% from the same solve in float64
  over 64 steps, and 38% over 1024, so many small steps in bfloat16 want a float32 state under autocast.
* **Times** are float32 or wider: the field gets ``t`` in the dtype the state is integrated in (float32 for a
  16-bit state), fixed grids are built in float64, torchdiffeq steps in float64 and torchode in the integrated
  state's dtype. In bfloat16 (8 significant bits) a stage at ``t = 4.9875`` reads ``5.0``, in the next layer of a
  weight-shared stack, and ``[100, 101]`` holds three representable times (torchode stalled there).
* **The solver's own arithmetic** runs without autocast: torchdiffeq and torchode combine the stages (the steps,
  the error estimates, the interpolants) with ``matmul`` and ``einsum``, which autocast would run in bfloat16
  (torchode's tsit5 then missed the float32 solve by up to 20 ``u`` of the increment, against 2 without). The
  external backends turn autocast off around the solver and back on, as the solve began, around each evaluation
  of the field (:class:`Autocast`), in the backward pass too; the built-in backend's steps are sums, which
  autocast leaves alone.
* **Error control** of adaptive methods runs on the integrated (float32) state. Where the field computes in a
  16-bit dtype (the autocast dtype, or a 16-bit ``y0``'s), ``rtol`` is raised to that dtype's unit roundoff
  ``u``: ``2**-8`` for bfloat16, ``2**-11`` for float16 (:func:`rtol_floor`). The field's output is no more
  accurate than ``u``, so the error estimate has a floor of rounding noise, and a finer tolerance only shrinks
  the steps chasing it: dopri5 at ``rtol=1e-6`` took 319 steps instead of 11 under bfloat16 autocast, and was no
  more accurate. The adjoints' backward solves take the seminorm there (:func:`computes_in_16_bits`).
* **Gradients**: checkpointing recomputes under the forward's autocast state (torch's checkpoint restores it), so
  its gradients equal backprop's. A 16-bit field's parameter gradients are summed over its evaluations by autograd
  in the parameters' dtype, which this module cannot change: 32 evaluations in bfloat16 agreed with float32 to
  ``2 u``, 128 to ``11 u``; float32 parameters under autocast do not have this.

float32 and float64 states outside autocast are untouched: no cast, no floor, times in the state's dtype.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .._typing import Field, State
from ._state import check_like, leaves, rebuild

__all__ = [
    "is_reduced",
    "autocasting",
    "mixed",
    "integrated",
    "cast",
    "dtypes_of",
    "rtol_floor",
    "computes_in_16_bits",
    "InDtype",
    "Autocast",
    "solver_arithmetic",
]


def is_reduced(dtype: torch.dtype) -> bool:
    """A floating dtype of 16 bits or fewer (bfloat16, float16): one that states are not integrated in."""
    return dtype.is_floating_point and dtype.itemsize <= 2


def autocasting(y: State) -> bool:
    """Whether :func:`torch.autocast` is on for the device of ``y``."""
    return torch.is_autocast_enabled(leaves(y)[0].device.type)


def mixed(y: State) -> bool:
    """Whether a solve from ``y`` casts: ``y`` holds a 16-bit tensor, or autocast is on for its device."""
    return autocasting(y) or any(is_reduced(x.dtype) for x in leaves(y))


def integrated(y: State) -> State:
    """``y`` in the dtypes it is integrated in: 16-bit tensors as float32, the others as they are."""
    return rebuild(y, [x.float() if is_reduced(x.dtype) else x for x in leaves(y)])


def dtypes_of(y: State) -> tuple[torch.dtype, ...]:
    """The dtype of each tensor of ``y``."""
    return tuple(x.dtype for x in leaves(y))


def cast(y: State, dtypes: torch.dtype | Sequence[torch.dtype]) -> State:
    """``y`` with its tensors in ``dtypes`` (one dtype for all, or one per tensor); those already there as they are."""
    tensors = leaves(y)
    wanted = [dtypes] * len(tensors) if isinstance(dtypes, torch.dtype) else list(dtypes)
    if all(x.dtype == dtype for x, dtype in zip(tensors, wanted)):
        return y
    return rebuild(y, [x.to(dtype) for x, dtype in zip(tensors, wanted)])


def _narrowest(dtypes: Sequence[torch.dtype]) -> torch.dtype:
    return functools.reduce(lambda a, b: a if torch.finfo(a).eps >= torch.finfo(b).eps else b, dtypes)


def rtol_floor(y0: State) -> float:
    """The least ``rtol`` of an adaptive solve from ``y0``: the unit roundoff ``eps / 2`` of the dtype the field
    computes in, where that has 16 bits, else 0. That dtype is the narrowest of ``y0``'s, or, under autocast, the
    autocast dtype, which autocast gives the matmuls of a state that is not float64 (float64 it leaves alone)."""
    dtypes = [x.dtype for x in leaves(y0)]
    if autocasting(y0) and any(dtype != torch.float64 for dtype in dtypes):
        dtypes.append(torch.get_autocast_dtype(leaves(y0)[0].device.type))
    narrowest = _narrowest(dtypes)
    return torch.finfo(narrowest).eps / 2 if is_reduced(narrowest) else 0.0


def computes_in_16_bits(y0: State) -> bool:
    """Whether the field computes in a 16-bit dtype on a solve from ``y0`` (:func:`rtol_floor` is then positive).

    Then the adjoints leave the parameters' adjoints out of their error norm (the seminorm of Kidger, Chen & Lyons
    2021): those start at 0, so their tolerance is ``atol`` alone, below the rounding noise of their integrands
    (sums of products over the batch and tokens, rounded to 16 bits), and the backward solve would shrink its steps
    chasing it (torchdiffeq took 2612 evaluations instead of 62 under bfloat16 autocast, torchode 524 for 50)."""
    return rtol_floor(y0) > 0


class InDtype:
    """The field as a solver integrating in other dtypes calls it: on the state cast to ``dtypes`` (``y0``'s), with
    its output cast to the integrated state's dtypes.

    The first output is checked against the state the field got (:func:`~neuralode_tf.numerics._state.check_like`):
    its dtypes too, except under autocast, where an output in any floating dtype is cast. The parts of a split
    field are wrapped alike.
    """

    def __init__(self, field: Field, dtypes: Sequence[torch.dtype], what: str = "the field"):
        self.field, self.dtypes, self.what = field, tuple(dtypes), what
        self.checked = False

    def __call__(self, t: Tensor | float, y: State) -> State:
        y_field = cast(y, self.dtypes)
        out = self.field(t, y_field)
        if not self.checked:
            check_like(out, y_field, self.what, any_dtype=autocasting(y_field))
            self.checked = True
        return cast(out, dtypes_of(y))

    @property
    def parts(self) -> list[InDtype]:
        parts = self.field.parts  # type: ignore[attr-defined]
        return [InDtype(p, self.dtypes, f"part {i} of the split field") for i, p in enumerate(parts)]


@dataclass(frozen=True)
class Autocast:
    """The :func:`torch.autocast` state a solve began in, for the external backends: the field runs in it
    (:meth:`field`), the solver's own arithmetic without it (:func:`solver_arithmetic`)."""

    device_type: str
    dtype: torch.dtype
    cache_enabled: bool

    @staticmethod
    def of(y: State) -> Autocast | None:
        """The autocast state on ``y``'s device, or ``None`` where autocast is off."""
        if not autocasting(y):
            return None
        device_type = leaves(y)[0].device.type
        return Autocast(device_type, torch.get_autocast_dtype(device_type), torch.is_autocast_cache_enabled())

    def field(self) -> torch.autocast:
        """A context that turns this autocast state on again, for an evaluation of the field."""
        return torch.autocast(self.device_type, dtype=self.dtype, cache_enabled=self.cache_enabled)


def solver_arithmetic(autocast: Autocast | None) -> contextlib.AbstractContextManager:
    """A context without autocast on its device, for a solver's own arithmetic (a no-op where autocast is off)."""
    return contextlib.nullcontext() if autocast is None else torch.autocast(autocast.device_type, enabled=False)
