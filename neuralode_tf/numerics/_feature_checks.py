"""Validation of what :func:`~neuralode_tf.numerics.solve` offers beyond stepping from ``t[0]`` to ``t[-1]``: dense
output and events (``dense=``, ``event=``), torchdiffeq's step callbacks on a field, and per-sample times (a 2-D
``t``). Each check raises a :class:`~neuralode_tf.numerics.errors.SolveError` subclass that names the argument.
"""

from __future__ import annotations

from torch import Tensor

from ..protocols import jump_times_of
from ._counting import defined_callbacks
from ._registry import Backend, offering, registered
from ._state import State, leaves
from ._validate import check_times
from .errors import InvalidTimesError, SolverConfigError


def check_dense_and_event(dense: object, event: object) -> None:
    """Types of ``dense`` and ``event``."""
    if not isinstance(dense, bool):
        raise SolverConfigError(f"dense must be True or False, got {dense!r}")
    if event is not None and not callable(event):
        kind = type(event).__name__
        raise SolverConfigError(f"event must be a callable g(t, y) -> 0-dim tensor, or None; got {kind}")


def check_callbacks(field: object, backend: Backend) -> None:
    """Refuse torchdiffeq's step callbacks on a field where the backend would never call them."""
    names = defined_callbacks(field)
    if names and not backend.callbacks:
        raise SolverConfigError(
            f"the field defines {names}, torchdiffeq's step callbacks, which the {backend.name} backend never "
            f"calls: use backend={offering('callbacks')!r}, or remove them"
        )


def check_recording(
    recording: bool, method: str, backend: Backend, gradient: str, compile: object, times: list[float], event: object
) -> None:
    """What dense output and events need: a backend that records the steps of ``method``, autograd through the
    steps (``gradient="backprop"``), an eager march, and for an event the span ``[t0, t_max]`` alone."""
    if not recording:
        return
    what = "event=" if event is not None else "dense=True"
    if method not in backend.dense:
        offered = [f"{b.name}: {', '.join(sorted(b.dense))}" for b in registered() if b.dense]
        raise SolverConfigError(
            f"{what} is not offered for method {method!r} on {backend.name!r}, which does not report its steps, or "
            "takes steps too long for the cubic (fourth-order) dense output; it is offered for "
            + "; ".join(offered)
        )
    if gradient != "backprop":
        raise SolverConfigError(
            f"{what} interpolates the forward solve's own steps, which gradient={gradient!r} does not keep for "
            "backward: use gradient='backprop'"
        )
    if compile is not False:
        raise SolverConfigError(f"{what} records the steps one by one, which a compiled march does not: compile=False")
    if event is not None and len(times) != 2:
        raise InvalidTimesError(
            f"with event=, t is the span [t0, t_max] in which the event is looked for; got {len(times)} times"
        )


def sample_times(t: object, y0: State) -> list[list[float]] | None:
    """The rows of a 2-D ``t`` (per-sample times), each checked as :func:`check_times` checks a 1-D one; None
    for any other ``t``."""
    if not (isinstance(t, Tensor) and t.ndim == 2):
        return None
    rows = []
    for b, row in enumerate(t.unbind(0)):
        try:
            rows.append(check_times(row, y0))
        except InvalidTimesError as err:
            raise InvalidTimesError(f"sample {b} of the per-sample times t: {err}") from None
    if len({len(row) for row in rows}) > 1 or not rows:
        raise InvalidTimesError(f"per-sample times t must be a (batch, n) tensor, got shape {tuple(t.shape)}")
    return rows


def check_sample_times(
    rows: list[list[float]] | None,
    backend: Backend,
    per_sample: bool,
    fixed: bool,
    field: object,
    recording: bool,
    y0: State,
) -> None:
    """What per-sample times need: torchode's per-sample stepping of an adaptive method, one row per sample,
    no ``jump_times`` (each sample would stop at them at its own time), no recording of the steps."""
    if rows is None:
        return
    needs = []
    if not (backend.sample_times and per_sample):
        needs.append(f"backend={offering('sample_times')!r} with per_sample=True")
    if fixed:
        needs.append("an adaptive method")
    if jump_times_of(field):
        needs.append("a field without jump_times")
    if recording:
        needs.append("no dense output, event or gradient with respect to t")
    if needs:
        raise SolverConfigError(f"per-sample times (a 2-D t) need {', '.join(needs)}")
    batch = leaves(y0)[0].shape[0]
    if len(rows) != batch:
        raise InvalidTimesError(f"per-sample times t have {len(rows)} rows for {batch} samples along dim 0 of y0")
