"""The built-in backends of :func:`~neuralode_tf.numerics.solve`, one module each, which registers its
:class:`~neuralode_tf.numerics.Backend` when imported. Each declares its ``priority``, the order in which
``backend="auto"`` tries them: the built-in integrators (0), then torchdiffeq (10), then torchode (20), whatever
the order of the imports.

A new backend is one more such module: a ``solve(field, y0, times, settings, stats)`` function and a
``register_backend(Backend(name=..., methods=..., fixed_grid=..., gradients=..., solve=...))`` call, the
capabilities it offers (``seminorm``, ``per_sample``, ...) set on the :class:`~neuralode_tf.numerics.Backend`.
"""

from . import builtin, torchdiffeq, torchode

__all__ = ["builtin", "torchdiffeq", "torchode"]
