"""The error path of a solve that met NaN or Inf: replay it with a probe and say where the first one appeared.

``solve`` checks the solution once, at the end (:func:`~neuralode_tf.numerics._state.surely_finite`); only when
that fails, or a backend stops on a non-finite error norm, is the solve replayed under ``torch.no_grad()`` with
every evaluation of the field probed, which synchronises with the device at each one.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from .._typing import Field, State
from ._registry import Backend, Settings
from ._state import all_finite, leaves
from .errors import NonFiniteStateError, SolveError
from .solution import Stats

__all__ = ["raise_if_nonfinite"]


class _Found(Exception):
    def __init__(self, t: float, evaluation: int, what: str):
        super().__init__()
        self.t, self.evaluation, self.what = t, evaluation, what


class _FiniteProbe(torch.nn.Module):
    """Calls the field and raises :class:`_Found` at the first non-finite input or output.

    Each call synchronises with the device, which is why it only runs on the error path. The parts
    of a split field are probed too, sharing one evaluation counter.
    """

    def __init__(self, field: Field, counter: list[int] | None = None):
        super().__init__()
        self.field = field
        self.counter = counter if counter is not None else [0]

    def forward(self, t: Tensor, y: State) -> State:
        self.counter[0] += 1
        time = float(t.reshape(-1)[0])
        if not bool(all_finite(y)):
            raise _Found(time, self.counter[0], "in the state passed to the field")
        out = self.field(t, y)
        if not bool(all_finite(out)):
            raise _Found(time, self.counter[0], "in the field's output")
        return out

    @property
    def parts(self) -> list[Field]:
        return [_FiniteProbe(p, self.counter) for p in self.field.parts]  # type: ignore[attr-defined]


def raise_if_nonfinite(
    backend: Backend,
    field: Field,
    y0: State,
    times: list[float],
    settings: Settings,
    stats: Stats,
    cause: Exception | None,
) -> None:
    """Replay the solve with a probe; raise :class:`NonFiniteStateError` saying where NaN/Inf first appeared.

    ``stats`` are those of the failed solve: where the backend counts ahead they give the evaluations per step.
    """
    if not all(bool(all_finite(leaf)) for leaf in leaves(y0)):
        raise NonFiniteStateError("the initial state y0 contains NaN or Inf") from cause
    evals_per_step = stats.nfe // stats.n_accepted if backend.counts_ahead and stats.n_accepted else None
    probe, replayed = _FiniteProbe(field), Stats()
    try:
        with torch.no_grad():
            backend.solve(probe, y0, times, dataclasses.replace(settings, compile=False), replayed)
    except _Found as found:
        if evals_per_step:
            step = f"step {(found.evaluation - 1) // evals_per_step + 1} (evaluation {found.evaluation})"
        elif replayed.n_accepted + replayed.n_rejected:
            step = f"step {replayed.n_accepted + replayed.n_rejected + 1} (evaluation {found.evaluation})"
        else:
            step = f"evaluation {found.evaluation}"
        raise NonFiniteStateError(
            f"NaN or Inf appeared {found.what} at t={found.t:.6g}, {step} of the solve from "
            f"t={times[0]:g} to t={times[-1]:g}. Lower the step size or the learning rate, or check "
            "the field for blow-up"
        ) from cause
    except SolveError:
        pass
