"""neuralode_tf: transformer layers as ODE vector fields.

Public API: :func:`solve`, :class:`Solution`, :class:`ContinuousDepth`, :func:`regularization`, and the subpackages
:mod:`neuralode_tf.numerics` (solver internals, errors, tableaus), :mod:`neuralode_tf.fields` and
:mod:`neuralode_tf.nn`.
"""

from . import fields, nn, numerics
from .continuous import ContinuousDepth, regularization
from .numerics import Solution, Stats, solve

__version__ = "0.1.0"

__all__ = ["solve", "Solution", "Stats", "ContinuousDepth", "regularization", "fields", "nn", "numerics", "__version__"]
