"""Numerics: one :func:`solve` over the built-in fixed-grid and splitting integrators, torchdiffeq
and torchode, with backprop, checkpointing or adjoint gradients."""

from ._api import BACKENDS, COMPILE_OPTIONS, FIXED_GRID_METHODS, GRADIENTS, methods, resolve_backend, solve
from .causality import CausalityWarning, is_causal
from .errors import (
    FieldOutputError,
    InvalidFieldError,
    InvalidStateError,
    InvalidTimesError,
    MaxStepsExceededError,
    NonFiniteStateError,
    SolveError,
    SolverConfigError,
    StepSizeUnderflowError,
)
from .solution import Solution, Stats
from .tableaus import TABLEAUS, ButcherTableau

__all__ = [
    "solve",
    "resolve_backend",
    "methods",
    "BACKENDS",
    "GRADIENTS",
    "FIXED_GRID_METHODS",
    "COMPILE_OPTIONS",
    "Solution",
    "Stats",
    "ButcherTableau",
    "TABLEAUS",
    "SolveError",
    "InvalidTimesError",
    "InvalidStateError",
    "InvalidFieldError",
    "FieldOutputError",
    "SolverConfigError",
    "MaxStepsExceededError",
    "StepSizeUnderflowError",
    "NonFiniteStateError",
    "CausalityWarning",
    "is_causal",
]
