"""Adapter to torchode (Lienen & Günnemann 2022): batch-parallel solving with per-sample step sizes.

torchode integrates a ``(batch, features)`` matrix. The adapter flattens every leaf of the state
(e.g. ``(batch, tokens, dim)``, or a tuple for augmented states) to ``(batch, features)`` and
reshapes back before each call of the field, so fields keep seeing their natural shapes.

* ``per_sample=False`` (the default): the whole state is one torchode sample (one step size, as
  torchdiffeq), and the field gets a 0-dim ``t``.
* ``per_sample=True``: each sample along dim 0 has its own step size, accept/reject decisions
  and step count, which avoids one hard sample forcing small steps on the whole batch. The field
  then receives ``t`` as a ``(batch,)`` tensor of per-sample times. Right only where the rows are
  independent samples.
* ``gradient="adjoint"`` runs torchode's ``BacksolveAdjoint``. Its backward pass evaluates the
  field under ``torch.func.vmap``, one torchode sample at a time (with ``per_sample=True``, states without
  the batch dimension, which must not depend on other samples), where Python control flow on ``t`` or
  ``y`` cannot run: such a failure is a :class:`~neuralode_tf.numerics.FieldOutputError` saying so. For a
  field computing in 16 bits its backward solve takes the seminorm of torchdiffeq's ``seminorm=True``
  (:func:`~neuralode_tf.numerics._precision.computes_in_16_bits`).
* Fixed steps (``euler``, ``heun``) take the grid of the other backends: each stretch between requested
  times and the field's ``jump_times`` is split into equal steps no longer than ``step_size``, solved as one
  torchode problem each.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torchode as to
from torch import Tensor, nn
from torchode.step_size_controllers import rms_norm

from ..._typing import Field, State
from ...protocols import jump_times_of
from .._counting import CountingField
from .._grid import fixed_grid
from .._precision import Autocast, cast, computes_in_16_bits, dtypes_of, integrated, mixed, solver_arithmetic
from .._registry import Backend, Settings, register_backend
from .._state import leaves, rebuild, stack, unstack
from ..errors import FieldOutputError, MaxStepsExceededError, SolveError, StepSizeUnderflowError
from ..solution import Stats

__all__ = ["solve_torchode"]

_METHODS = {"euler": to.Euler, "heun": to.Heun, "dopri5": to.Dopri5, "tsit5": to.Tsit5}
_FIXED_GRID = frozenset({"euler", "heun"})
_HAIR = 1e-12


class _Flattened(nn.Module):
    """The field on torchode's ``(batch, features)`` matrix."""

    def __init__(self, field: CountingField, y0: State, per_sample: bool, t_max: Tensor | None = None):
        super().__init__()
        self.field = field
        self.per_sample = per_sample
        self.t_max = t_max
        self.template = tuple(leaf.new_empty(0) for leaf in leaves(y0)) if isinstance(y0, tuple) else y0.new_empty(0)
        self.shapes = [leaf.shape[1:] if per_sample else leaf.shape for leaf in leaves(y0)]
        self.sizes = [math.prod(shape) for shape in self.shapes]

    def flatten(self, y: State, lead: tuple[int, ...]) -> Tensor:
        flat = [leaf.reshape(*lead, size) for leaf, size in zip(leaves(y), self.sizes)]
        return flat[0] if len(flat) == 1 else torch.cat(flat, dim=-1)

    def unflatten(self, y: Tensor, lead: tuple[int, ...]) -> State:
        chunks = torch.split(y, self.sizes, dim=-1)
        return rebuild(self.template, [c.reshape(tuple(lead) + tuple(s)) for c, s in zip(chunks, self.shapes)])

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        if self.t_max is not None:
            t = torch.minimum(t, self.t_max)
        if not self.per_sample:
            t = t.reshape(())  # the one torchode sample's time: a 0-dim t, as on the other backends
        lead = tuple(y.shape[:-1]) if self.per_sample else ()
        try:
            return self.flatten(self.field(t, self.unflatten(y, lead)), tuple(y.shape[:-1]))
        except RuntimeError as err:
            if self.field.in_backward:
                raise FieldOutputError(
                    "the field failed in the backward solve of torchode's adjoint, which evaluates it under "
                    "torch.func.vmap, one torchode sample at a time (with per_sample=True, states without the batch "
                    "dimension): Python control flow on t or y (if t < ..., .item()), a field that mixes samples or "
                    f"holds per-sample data cannot run there: {err}. Use backend='torchdiffeq' for gradient='adjoint'"
                    + (", per_sample=False" if self.per_sample else "")
                    + ", or gradient='backprop'"
                ) from err
            raise


def solve_torchode(field: Field, y0: State, t: list[float], settings: Settings, stats: Stats) -> State:
    """Solve with torchode; returns the states at ``t`` stacked along dim 0.

    An adaptive solve of a field that declares ``jump_times`` (e.g. a weight-shared stack, whose
    parameters change at layer boundaries) runs piece by piece between the jumps, so the step-size
    controller never straddles a discontinuity (torchdiffeq's ``jump_t`` does the same). Within a
    piece ``[a, b]`` the field sees times up to the left limit ``nextafter(b, -inf)``: a stage at the
    end of a step that lands on ``b`` (``c_i = 1``) takes this piece's parameters, not the next
    piece's (torchdiffeq's ``perturb``). Each piece after the first starts with the mean accepted
    step of the piece before as ``dt0``, instead of choosing an initial step afresh.
    """
    # Under autocast or from a 16-bit y0, torchode integrates in float32 (or wider): its state, its error control and
    # its times follow the state's dtype; its einsums run without autocast (_precision).
    dtype, autocast = leaves(y0)[0].dtype if mixed(y0) else None, Autocast.of(y0)
    # solve refuses seminorm=True here; a field computing in 16 bits gets it for the backsolve all the same.
    settings = dataclasses.replace(settings, seminorm=computes_in_16_bits(y0))
    counting = CountingField(field, stats, settings.max_steps if settings.step_size is None else None, dtype, autocast)
    with solver_arithmetic(autocast):
        ys = _solve_pieces(counting, integrated(y0), t, settings)
    if settings.gradient == "adjoint":  # from here on, evaluations are the backsolve's (after every piece's forward)
        counting.start_backward()
    return cast(ys, dtypes_of(y0))


def _solve_pieces(counting: CountingField, y0: State, t: list[float], settings: Settings) -> State:
    """The forward solve: in one piece, or piece by piece between the field's jumps (and, for a fixed grid, the
    requested times: the grid of the other backends, so a method keeps its order and its values there)."""
    jumps = [x for x in jump_times_of(counting.field) if t[0] < x < t[-1]]
    fixed = settings.method in _FIXED_GRID
    if not fixed and not jumps:
        return _solve_piece(counting, y0, t, settings, settings.dt0)[0]
    edges = sorted({*jumps, *(t[1:] if fixed else t[-1:])})
    states, y, start = [y0], y0, t[0]
    dt: float | Tensor | None = settings.dt0
    for end in edges:
        inside = [x for x in t if start < x < end]
        if fixed:
            # A hair (1e-12 relative) over the grid's step: torchode steps until its time, summed step by step, passes
            # the piece's end, and summing rounding would otherwise leave one more step of rounding error's length.
            dt = (end - start) / (len(fixed_grid([start, end], settings.grid_step)[0]) - 1) * (1 + _HAIR)
        ys, dt = _solve_piece(counting, y, [start, *inside, end], settings, dt, left_limit=True)
        pieces = list(unstack(ys))
        states.extend(pieces[1 : 1 + len(inside)])
        y, start = pieces[-1], end
        if end in t:
            states.append(y)
    return stack(states)


def _solve_piece(
    counting: CountingField,
    y0: State,
    t: list[float],
    settings: Settings,
    dt0: float | Tensor | None,
    left_limit: bool = False,
) -> tuple[State, Tensor]:
    """One torchode solve over ``t`` with ``settings``, from a first step ``dt0`` (a number or a per-sample tensor).
    Returns the states at ``t`` stacked along dim 0 and the mean accepted step of each sample. With
    ``left_limit``, the field sees no time beyond the left limit of ``t[-1]``."""
    method, per_sample, adjoint = settings.method, settings.per_sample, settings.gradient == "adjoint"
    rtol, atol, max_steps = settings.rtol, settings.atol, settings.max_steps
    dtype, device = leaves(y0)[0].dtype, leaves(y0)[0].device
    # Times in the state's dtype: torchode's backsolve mixes float64 times into float32 states otherwise.
    times = torch.tensor(t, dtype=dtype, device=device)
    t_max = torch.nextafter(times[-1], times.new_tensor(-math.inf)) if left_limit else None
    flat = _Flattened(counting, y0, per_sample, t_max)
    y_flat = flat.flatten(y0, (leaves(y0)[0].shape[0],) if per_sample else (1,))
    batch = y_flat.shape[0]
    if settings.sample_times is None:
        t_eval = times.expand(batch, -1)
    else:
        t_eval = torch.tensor(settings.sample_times, dtype=dtype, device=device)

    term = to.ODETerm(flat)
    step_method = _METHODS[method](term=term)
    if method in _FIXED_GRID:
        controller = to.FixedStepController()
    else:
        controller = to.IntegralController(atol=atol, rtol=rtol, term=term)
    dt = dt0 if dt0 is None or isinstance(dt0, Tensor) else torch.full((batch,), dt0, dtype=dtype, device=device)
    problem = to.InitialValueProblem(y_flat, t_start=t_eval[:, 0], t_end=t_eval[:, -1], t_eval=t_eval)
    if adjoint:
        solver = to.BacksolveAdjoint(term, step_method, controller)
        solver.forward_adjoint.max_steps = max_steps
        if settings.seminorm and method not in _FIXED_GRID:
            solver.backward_adjoint.step_size_controller = _seminorm_controller(controller, y_flat.shape[1])
    else:
        # Backprop through the steps, not through the choice of step sizes: that adds nothing of note to the
        # gradient, and gives NaN where a sample's state is exactly zero (its error norm is sqrt(0)).
        solver = to.AutoDiffAdjoint(
            step_method, controller, max_steps=max_steps, backprop_through_step_size_control=False
        )
    solution = solver.solve(problem, dt0=dt)
    _record_stats(counting.stats, solution.stats)
    _raise_on_failure(solution.status, counting, max_steps)
    # (batch, times, features) -> states stacked along time.
    ys = solution.ys.transpose(0, 1)
    lead = (len(t), batch) if per_sample else (len(t),)
    mean_step = (t_eval[:, -1] - t_eval[:, 0]) / solution.stats["n_accepted"].clamp(min=1).to(dtype)
    return flat.unflatten(ys if per_sample else ys.reshape(len(t), -1), lead), mean_step


def _seminorm_controller(controller: to.IntegralController, features: int) -> to.IntegralController:
    """``controller`` for the backsolve's augmented state ``(adj_t, y, adj_y, adj_params)`` (``features`` each for
    ``y`` and ``adj_y``), with its error norm over ``y`` and ``adj_y`` alone: the seminorm of Kidger, Chen & Lyons
    (2021), for a field that computes in 16 bits (:func:`~neuralode_tf.numerics._precision.computes_in_16_bits`)."""
    tolerances = {"atol": float(controller.atol), "rtol": float(controller.rtol)}
    return to.IntegralController(
        **tolerances, term=controller.term, norm=lambda x: rms_norm(x[:, 1 : 1 + 2 * features])
    )


def _record_stats(stats: Stats, raw: dict) -> None:
    """Add one solve's steps (the largest count over the samples) to ``stats``."""
    n_steps, n_accepted = raw["n_steps"], raw["n_accepted"]
    stats.n_accepted += int(n_accepted.max())
    stats.n_rejected += int((n_steps - n_accepted).max())


def _raise_on_failure(status: Tensor, counting: CountingField, max_steps: int) -> None:
    failed = status != to.Status.SUCCESS.value
    if not bool(failed.any()):
        return
    code = int(status[failed][0])
    samples = failed.nonzero().flatten().tolist()
    last_t = counting.last_t
    where = (
        f"for samples {samples[:10]}{' ...' if len(samples) > 10 else ''} after {counting.stats.nfe} evaluations"
        + ("" if last_t is None else f" (last time evaluated: {float(last_t.detach().max()):.6g})")
    )
    if code == to.Status.REACHED_MAX_STEPS.value:
        raise MaxStepsExceededError(
            f"torchode exceeded max_steps={max_steps} {where}; pass a larger max_steps= to solve (e.g. "
            f"max_steps={4 * max_steps}) or loosen rtol/atol"
        )
    if code == to.Status.REACHED_DT_MIN.value:
        raise StepSizeUnderflowError(f"torchode's step size fell below its minimum {where}")
    # INFINITE_NORM: the caller locates the non-finite value.
    raise SolveError(f"torchode stopped with status {to.Status(code).name} {where}")


register_backend(
    Backend(
        name="torchode",
        priority=20,
        methods=tuple(_METHODS),
        fixed_grid=_FIXED_GRID,
        gradients=("backprop", "adjoint"),
        solve=solve_torchode,
        takes_dt0=frozenset(_METHODS) - _FIXED_GRID,
        per_sample=True,
        sample_times=True,
        concatenates=True,
    )
)
