"""The field contract and its optional capabilities, declared as :class:`typing.Protocol` s.

A **field** is anything callable as ``field(t, y) -> dy/dt`` (:data:`VectorField`); in practice an
``nn.Module`` whose ``forward(t, y)`` returns a state shaped like ``y``, where ``y`` is a tensor or a
tuple of tensors. Everything else is optional. Solvers, :class:`~neuralode_tf.ContinuousDepth` and the
fields that wrap other fields look for these capabilities with ``isinstance(field, Protocol)``; a field
gains one by defining the attribute, without inheriting from anything:

============================  ===================================================================
protocol                      what the library does with it
============================  ===================================================================
:class:`Splittable`           ``parts``: splitting methods (``lie_trotter``, ``strang``) step the
                              parts one after another; ``field(t, y)`` must equal their sum
:class:`HasJumpTimes`         ``jump_times``: depth-times where the field jumps (a new layer's
                              weights); fixed grids put a point there, adaptive solvers restart there
:class:`Conditioned`          ``bind(**conditioning)``: per-batch inputs (padding masks, memory)
                              that :meth:`ContinuousDepth.forward <neuralode_tf.ContinuousDepth.forward>`
                              hands to every submodule that names them
:class:`Augmented`            ``initial_state(x)`` / ``final_state(y)``: the field evolves a larger
                              state than the tokens (kinetic energy, carried attention logits), and
                              ``final_state`` returns the tokens and a **regularization** term (a scalar
                              tensor for the loss, or ``None``)
============================  ===================================================================

The library reads ``parts`` and ``jump_times`` through :func:`parts_of` and :func:`jump_times_of`, which
also accept a field whose ``parts`` property raises ``AttributeError`` (a wrapper that cannot be split this
time); ``bind`` and ``initial_state``/``final_state`` are found with ``isinstance``. Define capabilities on
the class (methods or properties): ``isinstance`` with a runtime-checkable protocol looks attributes up on
the class from Python 3.12, so one stored in an instance's submodules would not count. Only an attribute's
presence is checked, so each protocol's docstring states what it must satisfy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from ._typing import Field, State

__all__ = ["VectorField", "Splittable", "HasJumpTimes", "Conditioned", "Augmented", "parts_of", "jump_times_of"]


VectorField = Field
"""``dy/dt = f(t, y)``: called with the time ``t`` (a 0-d tensor, or a float inside a compiled march) and a state
``y``, returns a state shaped like ``y``. The same type as the numerics' ``Field``, under its public name."""


@runtime_checkable
class Splittable(Protocol):
    """A field that is a sum of parts, ``f = f_1 + ... + f_k``.

    ``parts`` is the sequence of fields ``f_i`` (each a :data:`VectorField` over the same state), or
    ``None`` when this instance cannot be split (e.g. a wrapper around an unsplittable field). A splitting
    method takes one sub-step per part (Lie-Trotter: ``f_1``, then ``f_2``, ...; Strang: symmetric halves).
    """

    @property
    def parts(self) -> Sequence[VectorField] | None: ...


@runtime_checkable
class HasJumpTimes(Protocol):
    """A field that is smooth in ``t`` except at ``jump_times`` (ascending depth-times, e.g. ``1, 2, ..., L-1``
    for ``L`` layers with their own weights). No step crosses them: fixed grids put a grid point on each (so a
    method keeps its order whatever ``steps`` is), adaptive solvers restart there. A stage at a step's end sees the
    left limit of its time, so the field should take the piece on the right at a jump time itself."""

    @property
    def jump_times(self) -> Sequence[float]: ...


@runtime_checkable
class Conditioned(Protocol):
    """A module that takes per-batch conditioning by keyword before a solve: ``bind(*, name=value, ...)``.

    Its keyword-only parameters name the conditioning it uses (``key_padding_mask``, ``memory``,
    ``memory_key_padding_mask``); calling ``bind()`` without them clears them.
    """

    def bind(self, **conditioning: Any) -> None: ...


@runtime_checkable
class Augmented(Protocol):
    """A field whose ODE state is larger than the model's tokens ``x``.

    ``initial_state(x)`` builds ``y(t0)``; ``final_state(y(t1))`` returns ``(x(t1), regularization)``, where
    ``regularization`` is a scalar tensor to add to the training loss (e.g. the transport cost
    ``λ/2 · mean e(T)`` of :class:`~neuralode_tf.fields.KineticEnergy`) or ``None``.
    """

    def initial_state(self, x: State) -> State: ...

    def final_state(self, y: State) -> tuple[State, Tensor | None]: ...


def parts_of(field: object) -> Sequence[VectorField] | None:
    """The :class:`Splittable` field's ``parts``, or ``None`` if it has none (or cannot be split: ``parts`` is empty,
    ``None`` or raises ``AttributeError``)."""
    parts = getattr(field, "parts", None)
    return parts if parts else None


def jump_times_of(field: object) -> Sequence[float]:
    """The :class:`HasJumpTimes` field's ``jump_times``, or ``()`` if it declares none."""
    return getattr(field, "jump_times", ())
