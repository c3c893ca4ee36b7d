"""neuralode_tf: transformer layers as ODE vector fields.

Public API: :func:`solve`, :class:`Solution`, :class:`ContinuousDepth`, :func:`set_solve_options` (change a trained
model's solver), :func:`regularization`, and the subpackages :mod:`neuralode_tf.numerics` (solver internals, errors,
tableaus), :mod:`neuralode_tf.fields`, :mod:`neuralode_tf.nn` and :mod:`neuralode_tf.protocols` (the field contract).
Start with tutorial 01 (``tutorials/01_transformer_is_an_ode``).
"""

from . import fields, nn, numerics, protocols
from .continuous import ContinuousDepth, regularization, set_solve_options
from .numerics import Solution, Stats, solve

__version__ = "0.1.0"

__all__ = [
    "solve",
    "Solution",
    "Stats",
    "ContinuousDepth",
    "set_solve_options",
    "regularization",
    "fields",
    "nn",
    "numerics",
    "protocols",
    "__version__",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
