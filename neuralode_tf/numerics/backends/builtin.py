"""The built-in backend: the fixed-grid Runge-Kutta methods of :data:`~neuralode_tf.numerics.TABLEAUS` and the
Lie-Trotter and Strang splittings (:mod:`~neuralode_tf.numerics.fixed_grid`), with backprop or checkpointed
gradients (:mod:`~neuralode_tf.numerics._checkpointing`), eager or compiled (:mod:`~neuralode_tf.numerics._compiled`).

The grid is known before stepping (:func:`~neuralode_tf.numerics._grid.fixed_grid`: a grid point on every
requested time and on every ``jump_times`` of the field inside the span), and so are the steps and evaluations
that ``stats`` counts. Under ``gradient="checkpoint"`` every evaluation after the forward march is a
recomputation of checkpointing's, counted into ``stats.nfe_backward`` as backward runs.

The march runs in ``y0``'s dtype, a 16-bit one too, so that one step per layer is the discrete stack in that dtype
(a Hugging Face model in bfloat16 read as an ODE gives its logits exactly), with times in float32 or wider. Under
autocast the field's output is cast to the state's dtype
(:class:`~neuralode_tf.numerics._precision.InDtype`), as a discrete residual stream promotes ``x + branch(x)``.
"""

from __future__ import annotations

import functools

import torch

from ..._typing import Field, State
from ...protocols import jump_times_of, parts_of
from .._checkpointing import BackwardCounter
from .._compiled import March, compiled
from .._grid import Grid, fixed_grid, n_grid_steps
from .._precision import InDtype, autocasting, cast, dtypes_of
from .._registry import Backend, Settings, quoted, register_backend
from .._state import CheckedStates
from .._validate import check_checkpoint_depth
from ..dense import Trajectory
from ..errors import SolverConfigError
from ..fixed_grid import SPLITTING_SCHEMES, SplittingScheme, integrate, make_step, nfe_per_step, time_dtype
from ..solution import Stats
from ..tableaus import TABLEAUS, ButcherTableau

__all__ = ["solve_builtin", "register_tableau", "register_splitting_scheme"]


def solve_builtin(field: Field, y0: State, times: list[float], settings: Settings, stats: Stats) -> list[State]:
    """March over the grid of ``times`` with ``settings.method``; returns ``y0`` and the state at each later time."""
    method, substep, checkpoints = settings.method, settings.substep, settings.checkpoints
    scheme = method if method in SPLITTING_SCHEMES else None
    tableau = TABLEAUS[substep or "euler"] if scheme else TABLEAUS[method]
    n_parts = len(field.parts) if scheme else 1  # type: ignore[attr-defined]
    jumps = tuple(jump_times_of(field))
    grid, n_steps, per_step = _layout(tuple(times), settings.grid_step, jumps, scheme, tableau, n_parts)
    stats.n_accepted = n_steps
    stats.nfe = n_steps * per_step
    if settings.trajectory is not None:
        return _march_recorded(field, y0, grid, scheme, tableau, settings.trajectory, stats, per_step)
    check_checkpoint_depth(checkpoints, n_steps)
    # A budget of N states or more keeps every step's activations: that is backprop.
    checkpoint = settings.gradient == "checkpoint" and (checkpoints is None or checkpoints < n_steps)
    if settings.compile is not False:
        key = (method, substep, grid, checkpoint, checkpoints)
        checked = compiled(
            lambda: _march(scheme, tableau, grid, checkpoint, checkpoints),
            field,
            y0,
            key,
            checkpoint=checkpoint,
            compile=settings.compile,
        )
        states, finite = checked(field, y0)
        return CheckedStates([y0, *states], finite)
    march = _march(scheme, tableau, grid, checkpoint, checkpoints)
    recomputed = BackwardCounter(field, stats) if checkpoint else None
    out = march(recomputed or field, y0)
    if recomputed is not None:
        recomputed.armed[0] = True  # from here on, evaluations are checkpointing's recomputations
    return out


@functools.lru_cache(maxsize=256)
def _layout(
    times: tuple[float, ...],
    step: float,
    jumps: tuple[float, ...],
    scheme: str | None,
    tableau: ButcherTableau,
    n_parts: int,
) -> tuple[Grid, int, int]:
    """The grid, its number of steps and the evaluations per step (``solve`` asks on every call, with the same
    arguments for every call of a configuration)."""
    grid = fixed_grid(list(times), step, jumps)
    return grid, n_grid_steps(grid), nfe_per_step(scheme, tableau, n_parts)


def _march_recorded(
    field: Field,
    y0: State,
    grid: Grid,
    scheme: str | None,
    tableau: ButcherTableau,
    trajectory: Trajectory,
    stats: Stats,
    nfe_per_step: int,
) -> list[State]:
    """The eager march, recording every grid state in ``trajectory``; stops where it says (an event fired), and then
    counts in ``stats`` the steps taken."""
    field, y, dtypes = _in_dtype(field, y0)
    dtype = time_dtype(y)
    step = make_step(field, scheme, tableau, check=True, dtype=dtype)
    rest = make_step(field, scheme, tableau, check=False, dtype=dtype)
    stats.n_accepted = 0
    trajectory.add(grid[0][0], y0)
    states = [y0]
    for interval in grid:
        for t, t_next in zip(interval[:-1], interval[1:]):
            y = step(t, t_next - t, y)
            stats.n_accepted += 1
            if trajectory.add(t_next, cast(y, dtypes)):
                stats.nfe = nfe_per_step * stats.n_accepted
                return [y0, cast(y, dtypes)]
            step = rest
        states.append(cast(y, dtypes))
    return states


def _in_dtype(field: Field, y0: State) -> tuple[Field, State, tuple[torch.dtype, ...]]:
    """The field, the state and the dtypes of ``y0`` to march in: ``y0``'s own dtypes, the field's output cast to
    them under autocast (:mod:`~neuralode_tf.numerics._precision`)."""
    dtypes = dtypes_of(y0)
    return (InDtype(field, dtypes), y0, dtypes) if autocasting(y0) else (field, y0, dtypes)


def _march(
    scheme: str | None, tableau: ButcherTableau, grid: Grid, checkpoint: bool, checkpoints: int | None
) -> March:
    """``(field, y0) -> [y0, y(t_1), ...]``: the built-in march over ``grid``."""

    def march(field: Field, y0: State) -> list[State]:
        field, y, dtypes = _in_dtype(field, y0)
        dtype = time_dtype(y)
        first = make_step(field, scheme, tableau, check=True, dtype=dtype)
        rest = make_step(field, scheme, tableau, check=False, dtype=dtype)
        states = integrate(first, rest, y, grid, checkpoint=checkpoint, checkpoints=checkpoints)
        return states if y is y0 else [y0, *(cast(state, dtypes) for state in states[1:])]

    return march


def _backend() -> Backend:
    """The built-in backend as the tableau and splitting-scheme registries define it now."""
    names = (*TABLEAUS, *SPLITTING_SCHEMES)
    return Backend(
        name="builtin",
        methods=names,
        fixed_grid=frozenset(names),
        gradients=("backprop", "checkpoint"),
        solve=solve_builtin,
        compile=True,
        dense=frozenset(names),
        counts_ahead=True,
        priority=0,
        substep=frozenset(SPLITTING_SCHEMES),
        check=_check,
    )


def _check(field: Field, method: str, substep: str | None) -> None:
    """The built-in backend's :attr:`~neuralode_tf.numerics.Backend.check`: ``substep`` is a tableau, and a splitting
    method's field has ``parts``."""
    if substep is not None and substep not in TABLEAUS:
        raise SolverConfigError(f"unknown substep {substep!r}; valid: {quoted(TABLEAUS)}")
    if method in SPLITTING_SCHEMES and parts_of(field) is None:
        raise SolverConfigError(
            f"method {method!r} steps the parts of a split field one after another, but "
            f"{type(field).__name__} has no non-empty `parts`; build the field with SplitField(...) "
            "or use a method that evaluates the whole field"
        )


def register_tableau(tableau: ButcherTableau) -> ButcherTableau:
    """Add an explicit Runge-Kutta method: ``solve(..., method=tableau.name)``, and ``substep=tableau.name`` of the
    splitting methods. Returns it. The convergence tests run over :data:`~neuralode_tf.numerics.TABLEAUS`, so
    they check its ``order`` once it is registered where they run (add it to ``tableaus.py`` for the package).

    Raises:
        ValueError: a built-in method of that name exists.
    """
    _check_new(tableau.name)
    TABLEAUS[tableau.name] = tableau
    register_backend(_backend(), replace=True)
    return tableau


def register_splitting_scheme(scheme: SplittingScheme) -> SplittingScheme:
    """Add a splitting method: ``solve(..., method=scheme.name, substep=...)`` on fields with ``parts``. Returns it.

    Raises:
        ValueError: a built-in method of that name exists, or a part's sub-steps do not cover the step.
    """
    _check_new(scheme.name)
    for n_parts in (1, 2, 3):
        covered = [sum(length for part, _, length in scheme.sub_steps(n_parts) if part == i) for i in range(n_parts)]
        if any(abs(total - 1.0) > 1e-12 for total in covered):
            raise ValueError(f"splitting scheme {scheme.name!r}: with {n_parts} parts the sub-steps cover {covered}")
    SPLITTING_SCHEMES[scheme.name] = scheme
    register_backend(_backend(), replace=True)
    return scheme


def _check_new(name: str) -> None:
    if name in TABLEAUS or name in SPLITTING_SCHEMES:
        raise ValueError(f"the built-in backend has a method named {name!r} already")


register_backend(_backend())
