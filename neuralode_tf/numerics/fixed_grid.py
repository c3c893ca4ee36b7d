"""Built-in fixed-grid integrators: explicit Runge-Kutta and the Lie-Trotter / Strang splittings.

**Runge-Kutta.** One step of size ``h`` applies a :class:`~neuralode_tf.numerics.tableaus.ButcherTableau`
to the whole field.

**Splitting.** For a field that is a sum ``f = f_1 + ... + f_p`` of parts (``field.parts``), a
splitting method advances the parts one after another, each with one step of a sub-integrator
(``substep``: any built-in tableau, Euler by default). Writing ``Φ_i^h`` for that sub-step of part
``i`` over a time span of length ``h``,

* **Lie-Trotter** (Trotter 1959): ``y_{n+1} = Φ_p^h ∘ ... ∘ Φ_1^h (y_n)``;
* **Strang** (Strang 1968):
  ``y_{n+1} = Φ_1^{h/2} ∘ ... ∘ Φ_{p-1}^{h/2} ∘ Φ_p^h ∘ Φ_{p-1}^{h/2} ∘ ... ∘ Φ_1^{h/2} (y_n)``.

Orders, which researchers often get wrong:

* Lie-Trotter is **first order whatever the sub-step**: its splitting error
  ``h²/2 [f_1, f_2]`` per step does not depend on how accurately each part is advanced.
* Strang's splitting error is ``O(h³)`` per step, so it is second order **only if each sub-step is
  at least second order** (``substep="midpoint"`` or ``"rk4"``). With Euler sub-steps the
  ``O(h²)`` local error of the Euler sub-steps dominates and Strang is first order, but symmetric
  in the sense that it is the Macaron block (Lu et al. 2019): half MLP, attention, half MLP.
* With Euler sub-steps and ``h = 1``, Lie-Trotter on ``SplitField(attn, mlp)`` is exactly the
  standard pre-norm block ``x + attn(x)`` then ``+ mlp(.)``.

**Time.** Stage ``i`` of a sub-step over ``[a, a + h]`` sees ``t = a + c_i h``. A stage with
``c_i = 1`` sees the left limit, the largest number below ``a + h`` in the time's dtype, so a field that is
piecewise constant in time (weight sharing across depth) uses the piece of the current step at the step's
end, as torchdiffeq's ``perturb`` option does. Times are 0-dim CPU tensors in the state's dtype (the widest
of a tuple's; float32 for a 16-bit state, which is integrated in float32), as torchdiffeq gives them, so a
0-dim float32 state is not promoted by its time and reading a time never synchronises an accelerator; under
``solve(..., compile=True)`` they are Python floats, constants of the compiled graph. A field gets them as
``t`` and may ignore them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .._typing import Field, State
from ._checkpointing import Plan, Step, checkpointed, run
from ._state import axpy, check_like, leaves
from .tableaus import ButcherTableau

__all__ = ["SplittingScheme", "SPLITTING_SCHEMES", "rk_step", "splitting_step", "integrate", "time_dtype", "field_time"]

SubStep = tuple[int, float, float]
"""``(part, start, length)`` of one sub-step: part ``part`` advanced over ``[t + start h, t + (start + length) h]``."""


@dataclass(frozen=True)
class SplittingScheme:
    """A splitting method: the sub-steps one step takes, for a field of ``n`` parts.

    Attributes:
        name: The method's name in :func:`~neuralode_tf.solve`.
        sub_steps: ``n -> [(part, start, length), ...]``, in the order they are applied, as fractions of the step.
            The lengths of each part's sub-steps must sum to 1 (each part is advanced over the whole step).
        order: The scheme's order with exact sub-flows; with a sub-step of order ``p`` the method has order
            ``min(order, p)``, which the convergence tests check.
    """

    name: str
    sub_steps: Callable[[int], list[SubStep]]
    order: int


def _lie_trotter(n_parts: int) -> list[SubStep]:
    return [(i, 0.0, 1.0) for i in range(n_parts)]


def _strang(n_parts: int) -> list[SubStep]:
    first = [(i, 0.0, 0.5) for i in range(n_parts - 1)]
    last = [(i, 0.5, 0.5) for i in reversed(range(n_parts - 1))]
    return first + [(n_parts - 1, 0.0, 1.0)] + last


SPLITTING_SCHEMES: dict[str, SplittingScheme] = {
    "lie_trotter": SplittingScheme("lie_trotter", _lie_trotter, order=1),
    "strang": SplittingScheme("strang", _strang, order=2),
}
"""The splitting methods of the built-in backend, by name
(:func:`~neuralode_tf.numerics.backends.builtin.register_splitting_scheme` adds one)."""


def field_time(value: float, dtype: torch.dtype, left_limit: bool = False) -> Tensor:
    """The time ``value`` as a field sees it: a 0-dim CPU tensor of ``dtype``, or with ``left_limit`` the largest
    number of ``dtype`` below ``value``."""
    t = torch.tensor(value, dtype=dtype)
    return torch.nextafter(t, t.new_tensor(-math.inf)) if left_limit else t


def _time(value: float, dtype: torch.dtype, left_limit: bool) -> Tensor | float:
    """:func:`field_time`, or under ``torch.compile`` a Python float: a constant of the compiled graph (a tensor
    there would break the graph at every ``float(t)``)."""
    if torch.compiler.is_compiling():
        return math.nextafter(value, -math.inf) if left_limit else value
    return field_time(value, dtype, left_limit)


def time_dtype(y: State) -> torch.dtype:
    """The dtype of the times a field is given with state ``y``: the state's (the widest of a tuple's), at least
    float32 (:mod:`~neuralode_tf.numerics._precision`: a 16-bit state is integrated in float32)."""
    dtypes = [leaf.dtype for leaf in leaves(y)]
    return functools.reduce(torch.promote_types, dtypes, torch.float32)


def rk_step(
    field: Field, t: float, h: float, y: State, tableau: ButcherTableau, dtype: torch.dtype = torch.float64
) -> State:
    """One explicit Runge-Kutta step of size ``h`` from ``(t, y)``; the field gets times of ``dtype``."""
    ks: list[State] = []
    for a_row, c in zip(tableau.a, tableau.c):
        y_stage = axpy(y, [(h * a, k) for a, k in zip(a_row, ks)])
        ks.append(field(_time(t + c * h, dtype, c == 1.0), y_stage))
    return axpy(y, [(h * b, k) for b, k in zip(tableau.b, ks)])


def splitting_step(
    parts: Sequence[Field],
    t: float,
    h: float,
    y: State,
    sub_steps: Sequence[SubStep],
    substep: ButcherTableau,
    dtype: torch.dtype = torch.float64,
) -> State:
    """One step of size ``h`` over the parts of a split field: its scheme's ``sub_steps``, each one ``substep``."""
    for i, start, length in sub_steps:
        y = rk_step(parts[i], t + start * h, length * h, y, substep, dtype)
    return y


def nfe_per_step(scheme: str | None, tableau: ButcherTableau, n_parts: int) -> int:
    """Field (or part) evaluations per step."""
    if scheme is None:
        return tableau.stages
    return len(SPLITTING_SCHEMES[scheme].sub_steps(n_parts)) * tableau.stages


def _checked(field: Field, what: str) -> Field:
    def call(t: Tensor | float, y: State) -> State:
        out = field(t, y)
        check_like(out, y, what)
        return out

    return call


def make_step(
    field: Field, scheme: str | None, tableau: ButcherTableau, *, check: bool, dtype: torch.dtype = torch.float64
) -> Step:
    """The step function ``(t, h, y) -> y_next`` of a Runge-Kutta (``scheme=None``) or splitting method, whose
    field gets times of ``dtype`` (:func:`time_dtype` of the state).

    With ``check=True`` every field output is compared with the state's metadata (no device sync);
    the integrator uses it for the first step only.
    """
    if scheme is None:
        f = _checked(field, "the field") if check else field
        return lambda t, h, y: rk_step(f, t, h, y, tableau, dtype)
    parts = list(field.parts)  # type: ignore[attr-defined]
    if check:
        parts = [_checked(p, f"part {i} of the split field") for i, p in enumerate(parts)]
    sub_steps = SPLITTING_SCHEMES[scheme].sub_steps(len(parts))
    return lambda t, h, y: splitting_step(parts, t, h, y, sub_steps, tableau, dtype)


def integrate(
    first_step: Step,
    step: Step,
    y0: State,
    grid: Sequence[Sequence[float]],
    *,
    checkpoint: bool,
    checkpoints: int | None = None,
) -> list[State]:
    """March over ``grid`` (one list of grid times per requested interval) and return the state at
    the end of every interval, preceded by ``y0``.

    With ``checkpoint=True`` the steps are checkpointed (:mod:`~neuralode_tf.numerics._checkpointing`):
    recursively halved for ``checkpoints=None``, binomially with at most ``checkpoints`` stored states
    otherwise; ``stats.nfe_backward`` counts the recomputations.
    """
    plan: Plan = []
    for interval in grid:
        pairs = list(zip(interval[:-1], interval[1:]))
        for j, (t, t_next) in enumerate(pairs):
            plan.append((step if plan else first_step, t, t_next - t, j == len(pairs) - 1))
    _, ends = checkpointed(plan, y0, checkpoints) if checkpoint else run(plan, y0)
    return [y0, *ends]
