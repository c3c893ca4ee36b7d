"""Numerics: one :func:`solve` over a registry of backends (the built-in fixed-grid and splitting integrators,
torchdiffeq and torchode), with the gradient method ``gradient=`` of :data:`GRADIENTS`: backprop, checkpointing or
the adjoint.

A backend is a :class:`Backend` given to :func:`register_backend`; ``numerics/backends/`` holds the built-in
ones, registered on import; ``backend="auto"`` tries them by their declared ``priority``.

:func:`check_field`, :func:`check_times` and :func:`check_checkpoints` are checks ``solve`` makes, for a front end
that takes a field, times or a checkpoint budget before it has a state to solve from (as
:class:`~neuralode_tf.ContinuousDepth` does when built): it refuses them then, with ``solve``'s messages.
"""

from .._renamed import renamed_names
from . import backends
from ._compiled import COMPILE_OPTIONS
from ._field_checks import check_field
from ._registry import (
    BACKENDS,
    FIXED_GRID_METHODS,
    GRADIENTS,
    Backend,
    Settings,
    get_backend,
    methods,
    register_backend,
    unregister_backend,
)
from ._resolve import resolve_backend
from ._solve import solve
from ._validate import check_checkpoints, check_times
from .backends.builtin import register_splitting_scheme, register_tableau
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
from .fixed_grid import SPLITTING_SCHEMES, SplittingScheme
from .solution import Solution, Stats
from .tableaus import TABLEAUS, ButcherTableau

__all__ = [
    "solve",
    "resolve_backend",
    "methods",
    "check_field",
    "check_times",
    "check_checkpoints",
    "BACKENDS",
    "GRADIENTS",
    "FIXED_GRID_METHODS",
    "COMPILE_OPTIONS",
    "Backend",
    "Settings",
    "register_backend",
    "unregister_backend",
    "get_backend",
    "backends",
    "Solution",
    "Stats",
    "ButcherTableau",
    "TABLEAUS",
    "register_tableau",
    "SplittingScheme",
    "SPLITTING_SCHEMES",
    "register_splitting_scheme",
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

__getattr__ = renamed_names(__name__, {"GRADIENT_MODES": "GRADIENTS"}, globals())
"""``GRADIENT_MODES``, the deprecated old name of :data:`GRADIENTS`, with a ``DeprecationWarning``."""


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
