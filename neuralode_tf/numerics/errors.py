"""Exceptions raised by :func:`neuralode_tf.solve`.

Every exception derives from :class:`SolveError`, and also from the built-in exception a caller
would expect (``ValueError`` for bad arguments, ``TypeError`` for a field of the wrong kind,
``RuntimeError`` for a solve that failed), so both ``except SolveError`` and ``except ValueError`` work.
"""

from __future__ import annotations

__all__ = [
    "SolveError",
    "InvalidTimesError",
    "InvalidStateError",
    "InvalidFieldError",
    "FieldOutputError",
    "SolverConfigError",
    "MaxStepsExceededError",
    "StepSizeUnderflowError",
    "NonFiniteStateError",
]


class SolveError(Exception):
    """Base class of every error raised by ``solve``."""


class InvalidTimesError(SolveError, ValueError):
    """The requested times are not a finite, strictly increasing 1-D sequence of length >= 2."""


class InvalidStateError(SolveError, ValueError):
    """The initial state is not a floating tensor or a non-empty tuple of them on one device."""


class InvalidFieldError(SolveError, TypeError):
    """The field is not callable as ``field(t, y) -> dy/dt`` (e.g. a residual branch ``forward(x)``)."""


class FieldOutputError(SolveError, ValueError):
    """The field returned something whose structure, shape, dtype or device differs from the state."""


class SolverConfigError(SolveError, ValueError):
    """Unknown method, backend or gradient method, or a combination of them that does not exist."""


class MaxStepsExceededError(SolveError, RuntimeError):
    """An adaptive solve needed more than ``max_steps`` steps."""


class StepSizeUnderflowError(SolveError, RuntimeError):
    """An adaptive solve shrank its step size until it no longer advanced time."""


class NonFiniteStateError(SolveError, FloatingPointError):
    """NaN or Inf appeared in the state."""
