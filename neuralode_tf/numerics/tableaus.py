"""Butcher tableaus of the built-in explicit Runge-Kutta methods.

An explicit ``s``-stage Runge-Kutta method for ``dy/dt = f(t, y)`` with step ``h`` is

.. math::

    k_i = f\\Big(t_n + c_i h,\\; y_n + h \\sum_{j<i} a_{ij} k_j\\Big), \\qquad
    y_{n+1} = y_n + h \\sum_i b_i k_i

(Hairer, Nørsett & Wanner, *Solving ODEs I*, §II.1, eq. 1.8). A tableau is the triple
``(a, b, c)``; its classical order is stored alongside and checked by the convergence tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ButcherTableau", "EULER", "MIDPOINT", "HEUN", "RK4", "RK4_38", "TABLEAUS"]


@dataclass(frozen=True)
class ButcherTableau:
    """Coefficients of an explicit Runge-Kutta method.

    Attributes:
        name: The method's name in :func:`neuralode_tf.solve`.
        a: Row ``i`` holds ``a_{i,0..i-1}`` (strictly lower triangular, so row 0 is empty).
        b: Weights of the stages in the update.
        c: Nodes: stage ``i`` is evaluated at ``t_n + c_i h``.
        order: Classical order of convergence.
    """

    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int

    def __post_init__(self) -> None:
        stages = len(self.b)
        if len(self.a) != stages or len(self.c) != stages:
            raise ValueError(f"tableau {self.name!r}: a, b and c must all have {stages} stages")
        for i, row in enumerate(self.a):
            if len(row) != i:
                raise ValueError(f"tableau {self.name!r}: row {i} of a must have {i} entries")
            # The row-sum condition c_i = sum_j a_ij makes every stage consistent in time.
            if not math.isclose(sum(row), self.c[i], abs_tol=1e-14):
                raise ValueError(f"tableau {self.name!r}: c[{i}] must equal the sum of row {i} of a")
        if not math.isclose(sum(self.b), 1.0, abs_tol=1e-14):
            raise ValueError(f"tableau {self.name!r}: the weights b must sum to 1")

    @property
    def stages(self) -> int:
        """Number of field evaluations per step."""
        return len(self.b)


EULER = ButcherTableau("euler", a=((),), b=(1.0,), c=(0.0,), order=1)
"""Forward Euler: ``y + h f(t, y)``. One step of size 1 is a residual block."""

MIDPOINT = ButcherTableau("midpoint", a=((), (0.5,)), b=(0.0, 1.0), c=(0.0, 0.5), order=2)
"""Explicit midpoint rule (Runge 1895)."""

HEUN = ButcherTableau("heun", a=((), (1.0,)), b=(0.5, 0.5), c=(0.0, 1.0), order=2)
"""Heun's method, the explicit trapezoidal rule (torchdiffeq calls it ``heun2``)."""

RK4 = ButcherTableau(
    "rk4",
    a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
    c=(0.0, 0.5, 0.5, 1.0),
    order=4,
)
"""The classical fourth-order Runge-Kutta method (Kutta 1901)."""

RK4_38 = ButcherTableau(
    "rk4_38",
    a=((), (1 / 3,), (-1 / 3, 1.0), (1.0, -1.0, 1.0)),
    b=(1 / 8, 3 / 8, 3 / 8, 1 / 8),
    c=(0.0, 1 / 3, 2 / 3, 1.0),
    order=4,
)
"""Kutta's 3/8 rule: what torchdiffeq runs under the name ``rk4``."""

TABLEAUS: dict[str, ButcherTableau] = {t.name: t for t in (EULER, MIDPOINT, HEUN, RK4, RK4_38)}
"""The built-in fixed-grid methods, by name."""
