"""The front door: :func:`solve`, which validates its inputs and dispatches to a backend."""

from __future__ import annotations

import itertools
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from . import _validate
from . import fixed_grid as _fixed
from . import torchdiffeq as _tdq
from . import torchode as _tde
from ._checkpointing import BackwardCounter
from ._counting import CountingField
from ._grid import fixed_grid
from ._state import State, all_finite, leaves, surely_finite
from .causality import _warn_if_causal
from .errors import NonFiniteStateError, SolveError, SolverConfigError
from .solution import Solution, Stats
from .tableaus import TABLEAUS

__all__ = ["solve", "resolve_backend", "BACKENDS", "GRADIENTS", "FIXED_GRID_METHODS", "COMPILE_OPTIONS", "methods"]

Field = Callable[[Tensor, State], State]

BACKENDS = ("builtin", "torchdiffeq", "torchode")
"""Backends in the order ``backend="auto"`` tries them."""

GRADIENTS = {
    "builtin": ("backprop", "checkpoint"),
    "torchdiffeq": ("backprop", "adjoint"),
    "torchode": ("backprop", "adjoint"),
}
"""Gradient methods each backend supports."""

_METHODS = {
    "builtin": tuple(TABLEAUS) + _fixed.SPLITTING_SCHEMES,
    "torchdiffeq": tuple(_tdq.METHODS),
    "torchode": tuple(_tde.METHODS),
}
_FIXED = {"builtin": set(_METHODS["builtin"]), "torchdiffeq": _tdq.FIXED_GRID, "torchode": _tde.FIXED_GRID}

FIXED_GRID_METHODS = frozenset().union(*_FIXED.values())
"""Methods that take ``step_size`` or ``steps`` rather than tolerances."""


def methods(backend: str) -> tuple[str, ...]:
    """The method names ``backend`` accepts."""
    return _METHODS[backend]


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
    adjoint: Literal["backprop", "checkpoint", "adjoint"] = "backprop",
    checkpoints: int | None = None,
    seminorm: bool = False,
    per_sample: bool | None = None,
    max_steps: int = 10_000,
    dt0: float | None = None,
    options: dict[str, Any] | None = None,
    compile: bool | dict[str, Any] = False,
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
            fails with an :class:`InvalidStateError` naming both.
        t: Strictly increasing, finite times, at least two, within the range of ``y0``'s dtype.
        method: Fixed-grid Runge-Kutta ``"euler"``, ``"midpoint"``, ``"heun"``, ``"rk4"``,
            ``"rk4_38"``; splitting ``"lie_trotter"``, ``"strang"`` (the field needs ``parts``);
            adaptive ``"dopri5"``, ``"tsit5"``, ``"bosh3"``, ``"dopri8"``, ...; see :func:`methods`.
        step_size: Largest step of a fixed-grid method. Each interval between requested times is
            split into equal steps no longer than this.
        steps: Alternative to ``step_size``: the number of steps over ``[t[0], t[-1]]``.
        substep: Sub-integrator of a splitting method for each part: ``"euler"`` (default),
            ``"midpoint"``, ``"heun"``, ``"rk4"``. Lie-Trotter is first order whatever it is; Strang
            is second order only with a second-order (or higher) sub-step.
        rtol, atol: Tolerances of adaptive methods; ``None`` means ``1e-6`` and ``1e-8``. ``rtol`` is
            finite and ``>= 0``; ``atol`` finite and ``> 0`` (the error control divides by
            ``atol + rtol |y|``, 0 wherever a component is). In float16, ``rtol >= 1/256``. Fixed-grid
            methods have no error control and refuse them (except torchdiffeq's ``implicit_adams`` /
            ``fixed_adams``, whose corrector iterates to them).
        backend: ``"auto"`` picks the first of ``"builtin"``, ``"torchdiffeq"``, ``"torchode"`` that
            supports the method, gradient method and ``per_sample``.
        adjoint: How gradients are computed. ``"backprop"`` differentiates through the solver's
            operations (discretise-then-optimise). ``"checkpoint"`` (built-in) gives the same gradients
            but keeps only some states of the ``N`` steps and one step's activations, and recomputes
            the steps from them in backward (``stats.nfe_backward`` counts the evaluations); how
            many states it keeps is ``checkpoints``.
            ``"adjoint"`` solves the continuous adjoint ODE backwards (optimise-then-discretise):
            torchdiffeq's ``odeint_adjoint`` or torchode's ``BacksolveAdjoint``. torchode's backprop goes
            through the steps but not through the choice of step sizes. torchdiffeq's
            ``"scipy_solver"`` runs outside autograd: it refuses ``"backprop"`` when a gradient is wanted.
        checkpoints: With ``adjoint="checkpoint"``: the most states kept at once for backward (a positive
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
        per_sample: torchode only: per-sample step sizes along dim 0 of ``y0``. The default
            ``None`` turns it on where every tensor of ``y0`` has a dim 0 of one size, and off
            where not (a 0-dim state: one sample).
        max_steps: Most steps an adaptive solve may take, rejected ones included (a positive integer).
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

    Returns:
        A :class:`Solution` with ``ys`` (the state at each time in ``t``, stacked along dim 0),
        ``y1`` (the final state) and ``stats``.

    Raises:
        InvalidFieldError: ``field`` cannot be called as ``field(t, y)``.
        InvalidTimesError, InvalidStateError, SolverConfigError, FieldOutputError: bad input.
        MaxStepsExceededError, StepSizeUnderflowError: an adaptive solve failed.
        NonFiniteStateError: NaN or Inf appeared in the state; the message gives where. The check
            runs once at the end of the solve; only on failure is the solve replayed to find the
            first non-finite evaluation.

    Warns:
        CausalityWarning: an adaptive method on a field that declares ``causal``: step-size control
            makes earlier positions depend on later ones (:mod:`neuralode_tf.numerics.causality`).
    """
    _validate.check_field(field)
    _validate.check_state(y0)
    _validate.check_field_matches_state(field, y0)
    times = _validate.check_times(t, y0)
    _validate.check_flags(seminorm, per_sample, max_steps)
    checkpoints = _validate.checkpoints(checkpoints, adjoint, y0)
    backend = resolve_backend(
        field, method, backend, adjoint=adjoint, substep=substep, seminorm=seminorm, per_sample=per_sample
    )
    per_sample = _validate.check_state_for_backend(y0, backend, per_sample)
    if not isinstance(compile, (bool, dict)):
        raise SolverConfigError(f"compile must be True, False or a dict of torch.compile options, got {compile!r}")
    if compile is not False and backend != "builtin":
        raise SolverConfigError(
            f"compile=True applies to the built-in fixed-grid and splitting methods, not to {method!r} on {backend!r}"
        )
    fixed = method in _FIXED[backend]
    step = _validate.step_size(method, fixed, times, step_size, steps)
    rtol, atol = _validate.tolerances(method, backend, fixed, rtol, atol, y0)
    options = _validate.first_step(method, backend, fixed, dt0, options)
    _validate.check_gradients(method, backend, adjoint, field, y0)
    if step is None:
        _warn_if_causal(field, method)
    stats = Stats(backend=backend)

    def run(f: Field, stats: Stats, compiled: bool | dict[str, Any] = False) -> list[State] | State:
        if backend == "builtin":
            checkpointed = adjoint == "checkpoint"
            return _solve_builtin(f, y0, times, method, step, substep, checkpointed, checkpoints, stats, compiled)
        counting = CountingField(f, stats, max_steps if step is None else None)
        common = dict(method=method, step_size=step, rtol=rtol, atol=atol, adjoint=adjoint == "adjoint", dt0=dt0)
        if backend == "torchdiffeq":
            return _tdq.solve_torchdiffeq(counting, y0, times, seminorm=seminorm, options=options, **common)
        return _tde.solve_torchode(counting, y0, times, per_sample=per_sample, max_steps=max_steps, **common)

    try:
        ys = run(field, stats, compile)
    except SolveError as err:
        if isinstance(err, ValueError):
            raise
        _raise_if_nonfinite(run, field, y0, times, _evals_per_step(stats), err)
        raise
    if not surely_finite(ys if isinstance(ys, list) else [ys]):
        _raise_if_nonfinite(run, field, y0, times, _evals_per_step(stats), None)
        raise NonFiniteStateError("NaN or Inf appeared in the solution, but a replay of the solve could not locate it")
    return Solution(ts=torch.tensor(times, dtype=torch.float64), ys=ys, stats=stats)


def _solve_builtin(
    field: Field,
    y0: State,
    times: list[float],
    method: str,
    step_size: float,
    substep: str | None,
    checkpoint: bool,
    checkpoints: int | None,
    stats: Stats,
    compiled: bool | dict[str, Any] = False,
) -> list[State] | State:
    scheme = method if method in _fixed.SPLITTING_SCHEMES else None
    tableau = TABLEAUS[substep or "euler"] if scheme else TABLEAUS[method]
    grid = fixed_grid(times, step_size)
    n_steps = sum(len(interval) - 1 for interval in grid)
    n_parts = len(field.parts) if scheme else 1  # type: ignore[attr-defined]
    stats.n_accepted = n_steps
    stats.nfe = n_steps * _fixed.nfe_per_step(scheme, tableau, n_parts)
    _validate.check_checkpoint_depth(checkpoints, n_steps)
    checkpoint = checkpoint and (checkpoints is None or checkpoints < n_steps)  # a budget of N states: backprop
    if compiled is not False:
        defaults = COMPILE_OPTIONS if leaves(y0)[0].device.type == "cpu" else {}
        if checkpoint and not _CPP_WRAPPER_CHECKPOINTS:
            defaults = {k: v for k, v in defaults.items() if k != "cpp_wrapper"}
        options = {**defaults, **(compiled if isinstance(compiled, dict) else {})}
        key = (method, substep, tuple(map(tuple, grid)), checkpoint, checkpoints, _hashable(options))
        cache = _COMPILED.setdefault(field, {})
        if key not in cache:
            march = _march(scheme, tableau, grid, checkpoint, checkpoints)
            cache[key] = torch.compile(_own_code(march), options=options)
        return cache[key](field, y0)
    recomputed = BackwardCounter(field, stats) if checkpoint else None
    out = _march(scheme, tableau, grid, checkpoint, checkpoints)(recomputed or field, y0)
    if recomputed is not None:
        recomputed.armed[0] = True  # from here on, evaluations are checkpointing's recomputations
    return out


COMPILE_OPTIONS = {"cpp_wrapper": True}
"""Inductor options of ``solve(..., compile=True)`` for a state on the CPU. The C++ wrapper calls the generated
kernels without Python in between, which matters where Python overhead dominates (``benchmarks/suite.py``).
Other devices get torch.compile's defaults: on CUDA, ``cpp_wrapper`` given as an option broke the compilation
of backward graphs with torch 2.11 (``CudaKernelParamCache not populated``, pytorch/pytorch#178845)."""

_CPP_WRAPPER_CHECKPOINTS = torch.__version__ >= (2, 14)
"""Before torch 2.14, a checkpointed march (``adjoint="checkpoint"``) compiled with ``cpp_wrapper`` failed: the
partitioner took CPU attention (tagged random even at ``dropout_p=0``) for a random op and wrapped its
recomputation in ``run_and_save_rng_state``, which the C++ wrapper cannot emit (``AssertionError:
RunAndSaveRngState`` in cpp_wrapper_cpu.py; seen with 2.9.0, 2.9.1, 2.10.0 and 2.13.0). There such a march keeps
the Python wrapper, unless ``compile`` asks for ``cpp_wrapper`` itself."""

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Compiled marches by field, then by (method, substep, grid, checkpoint, checkpoints, options), each with a code
object of its own (:func:`_own_code`). A march takes the field as an argument rather than closing over it, so the
cache holds no reference to its key and a field and its compiled marches are freed together."""


def _march(
    scheme: str | None, tableau: Any, grid: list[list[float]], checkpoint: bool, checkpoints: int | None
) -> Callable[[Field, State], list[State]]:
    """``(field, y0) -> [y0, y(t_1), ...]``: the built-in march over ``grid``."""

    def march(field: Field, y: State) -> list[State]:
        first = _fixed.make_step(field, scheme, tableau, check=True)
        rest = _fixed.make_step(field, scheme, tableau, check=False)
        return _fixed.integrate(first, rest, y, grid, checkpoint=checkpoint, checkpoints=checkpoints)

    return march


def _own_code(fn: Callable) -> Callable:
    """``fn`` with a code object of its own.

    Dynamo keeps compiled code per code object, at most ``torch._dynamo.config.recompile_limit`` (8)
    variants of it, and runs eagerly beyond: every march shares the code of ``_march``'s closure, so
    without this the ninth field compiled in a process would silently run uncompiled.
    """
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{next(_MARCH_NUMBERS)}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


_MARCH_NUMBERS = itertools.count()
"""Numbers the code objects of compiled marches (their names in traces)."""


def _hashable(options: dict[str, Any]) -> tuple:
    try:
        key = tuple(sorted(options.items()))
        hash(key)
    except TypeError:
        raise SolverConfigError(f"compile options must be hashable values keyed by strings, got {options!r}") from None
    return key


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def resolve_backend(
    field: Field,
    method: str,
    backend: str = "auto",
    *,
    adjoint: str = "backprop",
    substep: str | None = None,
    seminorm: bool = False,
    per_sample: bool | None = None,
) -> str:
    """The backend :func:`solve` runs with these settings; raises :class:`SolverConfigError` if none can."""
    if backend != "auto" and backend not in BACKENDS:
        raise SolverConfigError(f"unknown backend {backend!r}; valid: 'auto', {_quoted(BACKENDS)}")
    all_methods = sorted({m for ms in _METHODS.values() for m in ms})
    if method not in all_methods:
        raise SolverConfigError(f"unknown method {method!r}; valid: {_quoted(all_methods)}")
    all_gradients = ("backprop", "checkpoint", "adjoint")
    if adjoint not in all_gradients:
        raise SolverConfigError(f"unknown gradient method adjoint={adjoint!r}; valid: {_quoted(all_gradients)}")
    if substep is not None:
        if method not in _fixed.SPLITTING_SCHEMES:
            raise SolverConfigError(
                f"substep applies to the splitting methods {_quoted(_fixed.SPLITTING_SCHEMES)}, not {method!r}"
            )
        if substep not in TABLEAUS:
            raise SolverConfigError(f"unknown substep {substep!r}; valid: {_quoted(TABLEAUS)}")
    if method in _fixed.SPLITTING_SCHEMES:
        parts = getattr(field, "parts", None)
        if not parts:
            raise SolverConfigError(
                f"method {method!r} steps the parts of a split field one after another, but "
                f"{type(field).__name__} has no non-empty `parts`; build the field with SplitField(...) "
                "or use a method that evaluates the whole field"
            )

    def supports(name: str) -> bool:
        return (
            method in _METHODS[name]
            and adjoint in GRADIENTS[name]
            and (not seminorm or name == "torchdiffeq")
            and (not per_sample or name == "torchode")
        )

    candidates = BACKENDS if backend == "auto" else (backend,)
    for name in candidates:
        if supports(name):
            if seminorm and adjoint != "adjoint":
                break
            return name
    combos = "; ".join(
        f"{name}: methods {_quoted(_METHODS[name])}, adjoint {_quoted(GRADIENTS[name])}" for name in BACKENDS
    )
    asked = f"method={method!r}, backend={backend!r}, adjoint={adjoint!r}"
    if seminorm:
        asked += ", seminorm=True (torchdiffeq with adjoint='adjoint' only)"
    if per_sample:
        asked += ", per_sample=True (torchode only)"
    raise SolverConfigError(f"no backend supports {asked}. Valid combinations: {combos}")


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)


# --------------------------------------------------------------------------------------------
# Error path: locate the first non-finite value
# --------------------------------------------------------------------------------------------


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


def _evals_per_step(stats: Stats) -> int | None:
    """Evaluations per step of a fixed-grid built-in solve (known in advance), else None."""
    return stats.nfe // stats.n_accepted if stats.backend == "builtin" and stats.n_accepted else None


def _raise_if_nonfinite(
    run: Callable[[Field, Stats], Any],
    field: Field,
    y0: State,
    times: list[float],
    evals_per_step: int | None,
    cause: Exception | None,
) -> None:
    """Replay the solve with a probe; raise :class:`NonFiniteStateError` saying where NaN/Inf first appeared."""
    if not all(bool(all_finite(leaf)) for leaf in leaves(y0)):
        raise NonFiniteStateError("the initial state y0 contains NaN or Inf") from cause
    probe, stats = _FiniteProbe(field), Stats()
    try:
        with torch.no_grad():
            run(probe, stats)
    except _Found as found:
        if evals_per_step:
            step = f"step {(found.evaluation - 1) // evals_per_step + 1} (evaluation {found.evaluation})"
        elif stats.n_accepted + stats.n_rejected:
            step = f"step {stats.n_accepted + stats.n_rejected + 1} (evaluation {found.evaluation})"
        else:
            step = f"evaluation {found.evaluation}"
        raise NonFiniteStateError(
            f"NaN or Inf appeared {found.what} at t={found.t:.6g}, {step} of the solve from "
            f"t={times[0]:g} to t={times[-1]:g}. Lower the step size or the learning rate, or check "
            "the field for blow-up"
        ) from cause
    except SolveError:
        pass
