"""Adapter to torchdiffeq (Chen et al. 2018): all of its methods, backprop or its adjoint.

* Fixed-grid methods get the same grid as the built-in integrators (through torchdiffeq's
  ``grid_constructor``), so the requested times are hit exactly instead of interpolated.
* ``gradient="adjoint"`` runs ``torchdiffeq.odeint_adjoint`` (Chen et al. 2018, Appendix B), which
  solves the adjoint ODE backwards instead of storing the forward pass. ``seminorm=True`` drops the
  parameter-adjoint channels from its error norm (Kidger, Chen & Lyons 2021), which typically
  saves backward evaluations without changing accuracy; it is always on where the field computes in 16 bits
  (under autocast, for a 16-bit state: :func:`~neuralode_tf.numerics._precision.computes_in_16_bits`).
* Fixed-grid methods also step onto the discontinuities a field declares in ``jump_times``.
* Adaptive methods give the requested times by torchdiffeq's interpolation, at no extra evaluations
  (200 output times cost what two do), except ``dopri8`` and ``bosh3``, whose accuracy torchdiffeq's
  interpolant would lose (by 10^5 and 50 times at ``rtol = atol = 1e-8``): they step onto every
  requested time (``step_t``). ``options={"step_t": t}`` asks for the same with any method. They
  step onto the discontinuities a field declares in ``jump_times`` (``jump_t``; e.g.
  :class:`~neuralode_tf.fields.WeightSharedField`), evaluating the field on both sides of each.
* One name, one method: torchdiffeq's ``rk4`` is Kutta's 3/8 rule, so it is ``method="rk4_38"``
  here (as on the built-in backend); ``method="rk4"`` is the classical method, on the built-in backend.
* torchdiffeq's step callbacks (``callback_step``, ``callback_accept_step``, ``callback_reject_step`` and
  their ``*_adjoint`` versions) defined on the field are called as torchdiffeq calls them.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torchdiffeq
from torch import Tensor, nn

from ..._typing import Field, State
from ...protocols import jump_times_of
from .._counting import CALLBACKS, CountingField, defined_callbacks
from .._grid import fixed_grid
from .._precision import Autocast, cast, computes_in_16_bits, dtypes_of, integrated, mixed, solver_arithmetic
from .._registry import Backend, Settings, register_backend
from .._state import leaves, rebuild
from ..dense import Trajectory
from ..errors import MaxStepsExceededError, SolveError, StepSizeUnderflowError
from ..solution import Stats

__all__ = ["solve_torchdiffeq"]

# Our name -> torchdiffeq's name. Every torchdiffeq method is reachable.
# (torchdiffeq._impl.odeint is shadowed by the function of that name, hence import_module.)
_METHODS: dict[str, str] = {name: name for name in importlib.import_module("torchdiffeq._impl.odeint").SOLVERS}
_METHODS["heun"] = _METHODS.pop("heun2")
_METHODS["rk4_38"] = _METHODS.pop("rk4")
_FIXED_GRID = frozenset(
    {"euler", "midpoint", "heun", "heun3", "rk4_38", "explicit_adams", "implicit_adams", "fixed_adams"}
)
# Methods whose accuracy torchdiffeq's interpolant would cost: they step onto the output times. On a pendulum at
# rtol = atol = 1e-8 with 41 outputs, interpolating gives 1.0e-5 against 1.9e-11 stepped (dopri8) and 1.2e-5
# against 2.6e-7 (bosh3); dopri5, fehlberg2 and adaptive_heun lose at most a factor 1.6 (tests/test_dense.py).
_STEP_ONTO_OUTPUTS = frozenset({"dopri8", "bosh3"})
# Methods that run outside autograd (in SciPy): only the adjoint gives gradients through them.
_OUTSIDE_AUTOGRAD = frozenset({"scipy_solver"})
# Adaptive Runge-Kutta methods, which accept first_step / step_t / jump_t.
_ADAPTIVE_RK = frozenset(_METHODS) - _FIXED_GRID - _OUTSIDE_AUTOGRAD


def solve_torchdiffeq(
    field: Field, y0: State, t: list[float], settings: Settings, stats: Stats
) -> State | list[State]:
    """Solve with torchdiffeq; returns the states at ``t`` stacked along dim 0 (at ``t[0]`` and an event, where
    one stopped the solve)."""
    method, step_size, adjoint = settings.method, settings.step_size, settings.gradient == "adjoint"
    # Under autocast or from a 16-bit y0, torchdiffeq integrates in float32 (or wider): its state, its error control
    # and the times it gives the field follow the state's dtype; its matmuls run without autocast (_precision).
    y0_given, dtype, autocast = y0, leaves(y0)[0].dtype if mixed(y0) else None, Autocast.of(y0)
    sixteen_bit = computes_in_16_bits(y0)  # the adjoint then takes the seminorm
    y0 = integrated(y0)
    counting = CountingField(field, stats, settings.max_steps if step_size is None else None, dtype, autocast)
    if method in _OUTSIDE_AUTOGRAD:  # SciPy's steps are not seen: max_steps bounds its evaluations instead
        counting.max_evaluations = settings.max_steps
    device = y0[0].device if isinstance(y0, tuple) else y0.device
    times = torch.tensor(t, dtype=torch.float64, device=device)
    options = dict(settings.options)
    jumps = [x for x in jump_times_of(field) if t[0] < x < t[-1]]
    if method in _FIXED_GRID:
        options["grid_constructor"] = _grid_constructor(settings.grid_step, jumps)
        # A stage at a step's end sees the left limit of that time, as on the built-in backend: a step that ends on
        # a jump uses the layer it is in.
        options.setdefault("perturb", True)
    elif method in _ADAPTIVE_RK:
        if settings.dt0 is not None:
            options["first_step"] = settings.dt0
        if method in _STEP_ONTO_OUTPUTS:
            options.setdefault("step_t", times[1:])
        if jumps:
            options.setdefault("jump_t", torch.tensor(jumps, dtype=torch.float64, device=device))
    kwargs = dict(rtol=settings.rtol, atol=settings.atol, method=_METHODS[method], options=options)
    func: nn.Module = counting
    scalar = False
    if isinstance(y0, Tensor) and y0.ndim == 0:
        func, y0, scalar = _Vector(counting), y0.reshape(1), True
        if "norm" in options:
            options["norm"] = _scalar_norm(options["norm"])
    _warn_unsupported_callbacks(field, method)
    _warn_unstable_default(method, options)
    trajectory = settings.trajectory
    if trajectory is not None:
        node = "callback_step" if method in _FIXED_GRID else "callback_accept_step"
        counting.add_hook(node, _recorder(trajectory, y0_given))
    try:
        with warnings.catch_warnings(), solver_arithmetic(autocast):
            # Fixed-grid solvers have no accept/reject hooks; CountingField offers them anyway (the field's own
            # are reported by _warn_unsupported_callbacks).
            warnings.filterwarnings("ignore", message=".*does not support callbacks")
            if adjoint:
                adjoint_options = {k: v for k, v in options.items() if k != "norm"}
                if settings.seminorm or sixteen_bit:
                    adjoint_options["norm"] = "seminorm"
                ys = torchdiffeq.odeint_adjoint(
                    func,
                    y0,
                    times,
                    adjoint_options=adjoint_options,
                    adjoint_params=tuple(counting.parameters()),
                    **kwargs,
                )
                counting.start_backward()
            else:
                ys = torchdiffeq.odeint(func, y0, times, **kwargs)
    except AssertionError as err:
        raise _translate(err, counting) from err
    except _EventReached:
        ys = None
    if method in _FIXED_GRID:
        counting.stats.n_accepted = counting.attempted_steps
    if ys is None:  # stopped at an event: the solve returns its state there
        return [y0_given, trajectory.states[-1]]  # type: ignore[union-attr]  # trajectory is set: it raised
    return cast(ys.reshape(len(t)) if scalar else ys, dtypes_of(y0_given))


class _EventReached(Exception):
    """Raised from a step callback to stop torchdiffeq once an event function has changed sign."""


def _recorder(trajectory: Trajectory, template: State) -> Callable[[Tensor, State, Tensor], None]:
    """The step callback that records each step's start ``(t0, y0)`` as a node (torchdiffeq gives a tuple state
    flattened into one vector, and a 0-dim one as a 1-element vector) and stops the solve at an event."""
    parts = leaves(template)

    def record(t0: Tensor, y0: State, dt: Tensor) -> None:
        flat = y0 if isinstance(y0, Tensor) else torch.cat([x.reshape(-1) for x in y0])
        chunks = flat.reshape(-1).split([x.numel() for x in parts])
        state = rebuild(template, [c.reshape(x.shape).to(x.dtype) for c, x in zip(chunks, parts)])
        if trajectory.add(t0, state):
            raise _EventReached

    return record


def _scalar_norm(norm: Any) -> Any:
    """A user's ``norm`` of a 0-dim state, which torchdiffeq sees as a 1-element vector (:class:`_Vector`)."""
    return lambda y: norm(y.reshape(()))


def _warn_unsupported_callbacks(field: Field, method: str) -> None:
    """torchdiffeq's warning for the field's callbacks that ``method`` never calls: accept/reject on a fixed grid,
    all of them in SciPy (the adapter silences torchdiffeq's own, which its counting wrapper would always raise)."""
    if method in _OUTSIDE_AUTOGRAD:
        unused, why = [name for name in CALLBACKS if hasattr(field, name)], "steps in SciPy, which calls no callback"
    elif method in _FIXED_GRID:
        unused = [name for name in ("callback_accept_step", "callback_reject_step") if hasattr(field, name)]
        why = "accepts every step and rejects none"
    else:
        return
    if unused:
        warnings.warn(f"{method!r} {why}: the field's {unused} are never called", stacklevel=4)


def _warn_unstable_default(method: str, options: dict) -> None:
    """explicit_adams at torchdiffeq's default order diverges as the step shrinks on oscillatory fields."""
    if method == "explicit_adams" and "max_order" not in options:
        warnings.warn(
            "torchdiffeq's explicit_adams runs up to max_order=12, an 11-step Adams-Bashforth method that is "
            "unstable on oscillatory fields (on a rotation: errors 0.14, 18, 1.6e4 at 16, 32, 64 steps); pass "
            "options={'max_order': 5}, which converges there at order 4",
            stacklevel=4,
        )


class _Vector(nn.Module):
    """The counting field of a 0-dim state, on that state as a 1-element vector.

    torchdiffeq's arithmetic with its 0-dim float64 times (``y0 + h0 * f0``) promotes a 0-dim state to
    float64 (both operands are 0-dim), so a float32 field would see float64 states; a vector keeps its dtype.
    """

    def __init__(self, counting: CountingField):
        super().__init__()
        self.counting = counting
        for name in (*CALLBACKS, *(n for n in defined_callbacks(counting) if n.endswith("_adjoint"))):
            setattr(self, name, _scalar_callback(getattr(counting, name)))

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        return self.counting(t, y.reshape(())).reshape(1)


def _scalar_callback(callback: Any) -> Any:
    return lambda t0, y0, dt: callback(t0, y0.reshape(()), dt)


def _grid_constructor(step_size: float, jumps: list[float]):
    def construct(func: Any, y0: Tensor, t: Tensor) -> Tensor:
        grid = fixed_grid(t.tolist(), step_size, jumps)
        flat = [grid[0][0]] + [time for interval in grid for time in interval[1:]]
        return torch.tensor(flat, dtype=t.dtype, device=t.device)

    return construct


def _translate(err: AssertionError, counting: CountingField) -> SolveError:
    """torchdiffeq reports failures with ``assert``; turn them into our errors."""
    message = str(err)
    reached = f"t={float(counting.last_t.detach()):.6g}" if counting.last_t is not None else "the start"
    where = f"at {reached} after {counting.stats.nfe} evaluations"
    if "underflow" in message:
        return StepSizeUnderflowError(
            f"the step size underflowed {where} ({message}); the field is probably stiff or blowing up. "
            "Loosen rtol/atol, rescale the field, or use a fixed-grid method"
        )
    if "max_num_steps" in message:
        return MaxStepsExceededError(f"torchdiffeq exceeded its step limit {where} ({message})")
    return SolveError(f"torchdiffeq failed {where}: {message}")


register_backend(
    Backend(
        name="torchdiffeq",
        priority=10,
        methods=tuple(_METHODS),
        fixed_grid=_FIXED_GRID,
        gradients=("backprop", "adjoint"),
        solve=solve_torchdiffeq,
        takes_dt0=_ADAPTIVE_RK,
        toleranced=frozenset({"implicit_adams", "fixed_adams"}),  # their implicit corrector iterates to rtol, atol
        outside_autograd=_OUTSIDE_AUTOGRAD,
        seminorm=True,
        options=True,
        # dopri8's long steps would make the fourth-order dense output 10^3 times less accurate than its nodes.
        dense=frozenset(_METHODS) - _OUTSIDE_AUTOGRAD - {"dopri8"},
        callbacks=True,
        concatenates=True,
        refused={
            "rk4": "torchdiffeq's own 'rk4' is Kutta's 3/8 rule, which is method='rk4_38' here (classical RK4 "
            "is method='rk4' on the builtin backend)"
        },
    )
)
