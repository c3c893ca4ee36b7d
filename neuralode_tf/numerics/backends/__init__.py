"""The built-in backends of :func:`~neuralode_tf.numerics.solve`, one module each, which registers its
:class:`~neuralode_tf.numerics.Backend` when imported. They are imported in the order ``backend="auto"`` tries
them: the built-in integrators, then torchdiffeq, then torchode.

A new backend is one more such module: a ``solve(field, y0, times, settings, stats)`` function and a
``register_backend(Backend(name=..., methods=..., fixed_grid=..., gradients=..., solve=...))`` call, the
capabilities it offers (``seminorm``, ``per_sample``, ...) set on the :class:`~neuralode_tf.numerics.Backend`.
"""

from . import builtin, torchdiffeq, torchode

__all__ = ["builtin", "torchdiffeq", "torchode"]
