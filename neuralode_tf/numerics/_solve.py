"""The front door: :func:`solve` validates its arguments, picks a registered backend and runs it."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from .._renamed import renamed_keyword
from .._typing import Field, State
from ..protocols import jump_times_of
from . import _feature_checks, _validate
from ._field_checks import check_field, check_field_matches_state, warn_outside_domain
from ._nonfinite import raise_if_nonfinite
from ._plan import remembered
from ._state import surely_finite, tree_map, unstack
from ._time_gradients import shifted_outputs, shifted_start
from .causality import _warn_if_causal
from .dense import Trajectory
from .errors import NonFiniteStateError, SolveError
from .events import locate_event
from .solution import Solution, Stats

__all__ = ["solve"]


def solve(
    field: Field,
    y0: State,
    t: Sequence[float] | Tensor,
    *,
    method: str,
    step_size: float | None = None,
    steps: int | None = None,
    substep: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    backend: Literal["auto", "builtin", "torchdiffeq", "torchode"] = "auto",
    gradient: Literal["backprop", "checkpoint", "adjoint"] | None = None,
    checkpoints: int | None = None,
    seminorm: bool = False,
    per_sample: bool = False,
    max_steps: int = 10_000,
    dt0: float | None = None,
    options: dict[str, Any] | None = None,
    compile: bool | dict[str, Any] = False,
    dense: bool = False,
    event: Callable[[Tensor, State], Tensor] | None = None,
    adjoint: Literal["backprop", "checkpoint", "adjoint"] | None = None,
) -> Solution:
    """Integrate ``dy/dt = field(t, y)`` from ``y(t[0]) = y0`` and return ``y`` at every time in ``t``.

    Every argument is checked before any solving: a bad one raises a :class:`SolveError` subclass whose
    message names it (see Raises).

    Args:
        field: Callable ``(t, y) -> dy/dt``, normally an ``nn.Module`` (adjoints find its parameters).
            A residual branch, whose ``forward(x)`` takes the state alone, is not a field and is refused
            (:class:`InvalidFieldError`): pass ``neuralode_tf.fields.as_field(branch)`` (or the
            branch's ``as_field()``), the autonomous field ``dy/dt = branch(y)``.
        y0: Initial state: a floating tensor of any shape (0-dim included), or a tuple of them
            (augmented states). On torchdiffeq and torchode the tensors of a tuple share one dtype.
            Its dtype must be the field's: a field whose parameters have another dtype (or device)
            fails with an :class:`InvalidStateError` naming both (not under :func:`torch.autocast`).
            The solution has ``y0``'s dtype, and so has the state the field gets. A 16-bit ``y0`` (bfloat16,
            float16) is stepped in its dtype on the built-in fixed grids, in float32 by torchdiffeq and torchode
            (see Mixed precision below).
        t: Strictly increasing, finite times, at least two, within the range of ``y0``'s dtype. A 2-D tensor
            ``(batch, n)`` gives each sample along dim 0 of ``y0`` its own times (torchode's per-sample spans:
            ``per_sample=True``, an adaptive method, a field without ``jump_times``); ``ys`` is then
            ``(n, batch, ...)``, ``ys[i, b]`` the state of sample ``b`` at ``t[b, i]``.
        method: The integrator. Fixed-grid methods take ``step_size`` or ``steps``; adaptive ones take
            ``rtol``, ``atol`` and ``dt0``. ``neuralode_tf.numerics.methods(backend)`` gives the methods of
            any registered backend; the built-in backends have:

            * ``"builtin"``: fixed-grid Runge-Kutta ``"euler"``, ``"midpoint"``, ``"heun"``, ``"rk4"``,
              ``"rk4_38"``; splitting ``"lie_trotter"``, ``"strang"`` (the field needs ``parts``).
            * ``"torchdiffeq"``: fixed-grid ``"euler"``, ``"midpoint"``, ``"heun"``, ``"heun3"``,
              ``"rk4_38"`` (what torchdiffeq calls ``rk4``: one name is one method here, and ``rk4`` is
              the classical one, on the built-in backend), ``"explicit_adams"``, ``"implicit_adams"``,
              ``"fixed_adams"``;
              adaptive ``"dopri8"``, ``"dopri5"``, ``"bosh3"``, ``"fehlberg2"``, ``"adaptive_heun"``,
              ``"scipy_solver"``.
            * ``"torchode"``: fixed-grid ``"euler"``, ``"heun"``; adaptive ``"dopri5"``, ``"tsit5"``.
        step_size: Largest step of a fixed-grid method. The grid has a point on every requested time
            and on every ``jump_times`` of the field inside the span (a layer boundary, where the field's
            weights change: a step across it would lose the method's order); each stretch between two
            such points is split into equal steps no longer than ``step_size``.
        steps: Alternative to ``step_size``: ``step_size = (t[-1] - t[0]) / steps``. That is the number
            of steps taken when the requested times and jumps lie on that uniform grid (``steps`` a
            multiple of the layers); otherwise more are taken, as ``step_size`` says (4 steps over 3
            layers take 6). ``stats.n_accepted`` counts the steps taken.
        substep: Sub-integrator of a splitting method for each part: ``"euler"`` (default),
            ``"midpoint"``, ``"heun"``, ``"rk4"``. Lie-Trotter is first order whatever it is; Strang
            is second order only with a second-order (or higher) sub-step.
        rtol, atol: Tolerances of adaptive methods; ``None`` means ``1e-6`` and ``1e-8``. ``rtol`` is
            finite and ``>= 0``; ``atol`` finite and ``> 0`` (the error control divides by
            ``atol + rtol |y|``, 0 wherever a component is). In float16, ``rtol >= 1/256``. Where the field
            computes in 16 bits (autocast, a 16-bit ``y0``), ``rtol`` is raised to that dtype's unit roundoff
            (``2**-8`` for bfloat16), below which the error estimate is rounding noise. Fixed-grid
            methods have no error control and refuse them (except torchdiffeq's ``implicit_adams`` /
            ``fixed_adams``, whose corrector iterates to them).
        backend: ``"auto"`` picks, by the ``priority`` each backend declares, the first registered backend
            (``"builtin"``, ``"torchdiffeq"``, ``"torchode"``, and any registered by
            ``neuralode_tf.numerics.register_backend``) that supports the method, gradient method, ``substep``,
            ``seminorm`` and ``per_sample``.
        gradient: The gradient method: how gradients are computed (:data:`~neuralode_tf.numerics.GRADIENTS`;
            ``get_backend(name).gradients`` are those of a backend). ``"backprop"`` (the default, also what
            ``None`` means) differentiates through the solver's operations (discretise-then-optimise).
            ``"checkpoint"`` (built-in) gives the same gradients but keeps only some states of the ``N`` steps
            and one step's activations, and recomputes the steps from them in backward (``stats.nfe_backward``
            counts the evaluations); how many states it keeps is ``checkpoints``. ``"adjoint"`` solves the
            continuous adjoint ODE backwards (optimise-then-discretise): torchdiffeq's ``odeint_adjoint`` or
            torchode's ``BacksolveAdjoint``. torchode's backprop goes through the steps but not through the
            choice of step sizes. torchdiffeq's ``"scipy_solver"`` runs outside autograd: it refuses
            ``"backprop"`` when a gradient is wanted.
        checkpoints: With ``gradient="checkpoint"``: the most states kept at once for backward (a positive
            integer), or ``None`` (default) for recursive halving: about ``log2(N)`` states, each step
            recomputed at most ``1 + log2(N)/2`` times. A budget ``c < N`` is spent binomially (Griewank &
            Walther 2000, revolve), with the fewest recomputations ``c`` states allow: for ``r`` the least
            integer such that ``N <= C(c + r, c)``, each step is recomputed at most ``r`` times,
            ``r N - C(c + r, r - 1)`` steps in all; ``c >= N`` is backprop. So ``c = N - 1`` recomputes
            ``N - 1`` steps, ``c ~ sqrt(2N)`` (``C(c + 2, 2) >= N``) ``2N - c - 2``, ``c = 1`` ``N(N - 1)/2``;
            at 64 steps ``c = 63, 16, 8, 6, 4`` recompute 63, 110, 137, 156, 200 steps, the default 224.
            A state is much smaller than a step's activations (about 16 states' worth for the transformer
            layer of ``benchmarks/suite.py``, whose section 3b gives the memory/time table), so a budget
            of tens of states costs little memory. Not on XLA, whose checkpoint does not nest.
        seminorm: With torchdiffeq's adjoint, use the seminorm of Kidger et al. (2021).
        per_sample: torchode only: each sample along dim 0 of ``y0`` gets its own step sizes and
            accept/reject decisions, so one hard sample does not force small steps on the batch; the
            field then gets ``t`` as a ``(batch,)`` tensor. Only right where the rows of ``y0`` are
            independent samples, which the library cannot tell from a shape: off by default (one step
            size for the whole state, as torchdiffeq), on only when asked for.
        max_steps: Most steps an adaptive solve may take, rejected ones included (a positive integer); for
            ``"scipy_solver"``, whose steps SciPy takes unseen, the most evaluations of the field.
        dt0: First step of an adaptive Runge-Kutta method, positive (default: chosen by the backend).
        options: Extra torchdiffeq options passed through (torchdiffeq only). ``first_step`` is
            checked as ``dt0`` is; ``step_size`` and ``grid_constructor`` are refused (use
            ``step_size=`` or ``steps=``).
        compile: Built-in fixed-grid and splitting methods only: run the whole march over the grid
            through :func:`torch.compile` (one graph for all steps; backward included). The first
            call for a field and grid compiles (tens of seconds on a CPU); later calls with the same
            field, grid and shapes reuse the compiled code. Outputs equal eager ones up to float
            rounding (kernel fusion reorders sums). Worth it where Python overhead dominates: small
            widths, many steps (``benchmarks/suite.py``). A dict compiles too, with these ``options``
            of :func:`torch.compile` on top of :data:`~neuralode_tf.numerics.COMPILE_OPTIONS`. E.g.
            ``{"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}`` drops the
            guards on the field's modules, which cost about 0.4 ms per call for a 12-layer field on
            a CPU (10% at d = 32), but then changes to the field's modules (dtype, device,
            ``requires_grad``, train/eval, structure, hooks) are not noticed: do it only for a field
            that stays as it is.

        dense: Keep the solve's steps, so that :meth:`Solution.evaluate` gives the state at any time of the
            span (:mod:`~neuralode_tf.numerics.dense`: cubic Hermite through the steps, order ``min(p, 4)``).
            Built-in and torchdiffeq backends, ``gradient="backprop"``, not compiled.
        event: A terminal event ``g(t, y) -> 0-dim tensor``: the solve stops where ``g`` changes sign
            (:mod:`~neuralode_tf.numerics.events`), and ``Solution.event_t`` is that time, differentiable.
            ``t`` is then ``[t0, t_max]``; ``ys`` holds ``y0`` and the state at the event (at ``t_max`` if
            none). Same backends and gradients as ``dense``.
        adjoint: The deprecated old name of ``gradient`` (a ``DeprecationWarning``; giving both is a ``TypeError``).

    Mixed precision (:mod:`~neuralode_tf.numerics._precision`): under ``torch.autocast`` a float32 ``y0`` stays a
    float32 state; the field's matmuls run in the autocast dtype and its output is cast to the state's dtype. A
    16-bit ``y0`` is stepped in its own dtype on the built-in fixed grids (one step per layer is then the discrete
    stack in that dtype) and integrated in a float32 copy by torchdiffeq and torchode. Times, step sizes and error
    control are float32 or wider; the solvers' own arithmetic runs without autocast, their field evaluations with it
    (backward passes included), and adjoints take the seminorm where the field computes in 16 bits.

    Gradients with respect to ``t`` (a tensor that requires grad: a learnable depth or start) are
    ``dy(t_i)/dt_i = f(t_i, y(t_i))`` and ``dy(t_i)/dt_0 = -∂y(t_i)/∂y0 · f(t0, y0)``, with every
    gradient method (:mod:`~neuralode_tf.numerics._time_gradients`).

    Returns:
        A :class:`Solution` with ``ys`` (the state at each time in ``t``, stacked along dim 0),
        ``y1`` (the final state) and ``stats``; with ``dense=True`` its ``evaluate(t)``, with ``event``
        its ``event_t``.

    Raises:
        InvalidFieldError: ``field`` cannot be called as ``field(t, y)``.
        TypeError: both ``gradient`` and its deprecated old name ``adjoint`` are given.
        InvalidTimesError, InvalidStateError, SolverConfigError, FieldOutputError: bad input.
        MaxStepsExceededError, StepSizeUnderflowError: an adaptive solve failed.
        NonFiniteStateError: NaN or Inf appeared in the state; the message gives where. The check
            runs once at the end of the solve; only on failure is the solve replayed to find the
            first non-finite evaluation.

    Warns:
        DeprecationWarning: ``adjoint`` is given (the old name of ``gradient``).
        CausalityWarning: an adaptive method on a field that declares ``causal``: step-size control
            makes earlier positions depend on later ones (:mod:`neuralode_tf.numerics.causality`).
        UserWarning: the interval leaves the ``domain`` a module of the field declares (a
            :class:`~neuralode_tf.fields.WeightSharedField` of several sets past its depth).
    """
    how = renamed_keyword("gradient", gradient, "adjoint", adjoint, default="backprop")  # the gradient method
    check_field(field)
    arguments = dict(
        method=method, step_size=step_size, steps=steps, substep=substep, rtol=rtol, atol=atol, backend=backend,
        gradient=how, checkpoints=checkpoints, seminorm=seminorm, per_sample=per_sample, max_steps=max_steps,
        dt0=dt0, options=options, compile=compile, dense=dense, event=event,
    )  # fmt: skip
    plan = remembered(field, y0, t, arguments)  # every argument checked, once per configuration (_plan)
    check_field_matches_state(field, y0)  # what may change between calls of one configuration, on every call:
    warn_outside_domain(field, plan.times[0], plan.times[-1])
    _feature_checks.check_callbacks(field, plan.backend)
    _validate.check_gradients(method, plan.backend, how, field, y0)
    if plan.rtol_warning is not None:
        warnings.warn(plan.rtol_warning, stacklevel=2)
    if plan.step is None:
        _warn_if_causal(field, method)
    chosen, times, sample_times, time_gradients = plan.backend, list(plan.times), plan.sample_times, plan.time_gradients
    stats = Stats(backend=chosen.name)
    if time_gradients:
        y0 = shifted_start(field, y0, t[0], stats)  # type: ignore[arg-type]
    trajectory = Trajectory(field, jump_times_of(field), stats, event) if dense or event else None
    settings = plan.settings if trajectory is None else dataclasses.replace(plan.settings, trajectory=trajectory)
    try:
        ys = chosen.solve(field, y0, times, settings, stats)
    except SolveError as err:
        if isinstance(err, ValueError):  # a bad argument found while solving, not a failed solve
            raise
        raise_if_nonfinite(chosen, field, y0, times, settings, stats, err)
        raise
    if not surely_finite(ys if isinstance(ys, list) else [ys]):
        raise_if_nonfinite(chosen, field, y0, times, settings, stats, None)
        raise NonFiniteStateError("NaN or Inf appeared in the solution, but a replay of the solve could not locate it")
    ts: Tensor | list = sample_times or times  # a tensor on first access (Solution.ts)
    event_t = None
    if trajectory is not None:
        if not trajectory.fired:
            trajectory.add(times[-1], ys[-1] if isinstance(ys, list) else tree_map(lambda y: y[-1], ys))
        if event is not None and trajectory.fired:
            event_t, y_event = locate_event(trajectory, event, refine=plan.step is None)
            start = torch.tensor(times[0], dtype=torch.float64)
            ys, ts = [y0, y_event], torch.stack([start, event_t.detach().double()])
    if time_gradients:
        ys = shifted_outputs(field, ys if isinstance(ys, list) else list(unstack(ys)), t, stats)  # type: ignore[arg-type]
    return Solution(ts=ts, ys=ys, stats=stats, trajectory=trajectory if dense else None, event_t=event_t)
