"""The registry of backends: every integrator library behind :func:`~neuralode_tf.numerics.solve` is a
:class:`Backend`, which the module that adapts it registers with :func:`register_backend` when imported.

:func:`~neuralode_tf.numerics.solve` learns from the registry alone which backends exist, which methods and
gradient methods each takes and what else it can do, and ``backend="auto"`` tries them by their declared
``priority``. :data:`BACKENDS`, :data:`FIXED_GRID_METHODS` and :func:`methods` are live, read-only views of it;
``get_backend(name).gradients`` are a backend's gradient methods, among :data:`GRADIENTS`. A new backend is one
module that builds a :class:`Backend` and registers it (``neuralode_tf/numerics/backends/`` holds the built-in
three).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._renamed import renamed
from .._typing import Field, State
from .errors import SolverConfigError
from .solution import Stats

if TYPE_CHECKING:
    from .dense import Trajectory

__all__ = [
    "Backend",
    "Settings",
    "register_backend",
    "unregister_backend",
    "get_backend",
    "methods",
    "BACKENDS",
    "GRADIENTS",
    "FIXED_GRID_METHODS",
]

GRADIENTS = ("backprop", "checkpoint", "adjoint")
"""The gradient methods: the values of ``solve``'s ``gradient``, how gradients are computed."""


@dataclass(frozen=True)
class Settings:
    """The arguments of ``solve`` once validated: what a backend's ``solve`` is asked to do.

    One class for every backend: the attributes listed after ``gradient`` are backend-specific, each for the
    backends that declare the matching capability of :class:`Backend` (``solve`` refuses them elsewhere, so a
    backend that does not declare one finds that attribute at its default).

    Attributes:
        method: A name in the backend's ``methods``.
        step_size: The largest step of a fixed-grid method (from ``step_size`` or ``steps``); ``None`` for an
            adaptive one.
        rtol, atol: The tolerances, defaults filled in (used by adaptive and ``toleranced`` methods).
        max_steps: As given to ``solve``, checked: the most steps of an adaptive method.
        gradient: The gradient method, one of the backend's ``gradients``.
        substep: The sub-integrator of a method in the backend's ``substep`` (the built-in splittings), or ``None``.
        checkpoints: The budget of ``gradient="checkpoint"`` (``None``: the default schedule).
        seminorm: With ``gradient="adjoint"`` (backends declaring ``seminorm``).
        dt0: The first step of a method in ``takes_dt0``, or ``None``.
        per_sample: Per-sample step sizes (as given; False where not offered).
        options: The library's own options (empty unless the backend passes ``options``), read-only.
        compile: ``False``, ``True`` or a dict of :func:`torch.compile` options (only where offered).
        trajectory: Where a backend that offers ``dense`` records its nodes (``Trajectory.add``; it stops stepping
            once that returns True, an event's sign change), or ``None`` when not asked for.
        sample_times: Each sample's times (a 2-D ``t``; ``times`` is then the first row; backends declaring
            ``sample_times``), or ``None``.
    """

    method: str
    step_size: float | None
    substep: str | None
    rtol: float
    atol: float
    gradient: str
    checkpoints: int | None
    seminorm: bool
    per_sample: bool
    max_steps: int
    dt0: float | None
    options: Mapping[str, Any]
    compile: bool | dict[str, Any]
    trajectory: Trajectory | None = None
    sample_times: list[list[float]] | None = None

    @property
    def grid_step(self) -> float:
        """The ``step_size`` of a fixed-grid method (a :class:`SolverConfigError` for an adaptive one: it has none)."""
        if self.step_size is None:
            raise SolverConfigError(f"{self.method!r} is adaptive: it has no fixed step size")
        return self.step_size

    @property
    def adjoint(self) -> str:
        """Deprecated name of :attr:`gradient`."""
        renamed("Settings attribute", "adjoint", {"adjoint": "gradient"})
        return self.gradient


Solver = Callable[[Field, State, list[float], Settings, Stats], "list[State] | State"]
"""``(field, y0, times, settings, stats) -> ys``: the states at ``times``, as a list or stacked along dim 0."""

Check = Callable[[Field, str, "str | None"], None]
"""``(field, method, substep) -> None``: a backend's own checks of ``solve``'s arguments (:attr:`Backend.check`)."""


def _accept_all(field: Field, method: str, substep: str | None) -> None:
    """The default :attr:`Backend.check`: nothing beyond what the backend declares."""


@dataclass(frozen=True)
class Backend:
    """An integrator library behind ``solve``: its methods, gradient methods, capabilities and ``solve``.

    ``solve`` refuses, by name, whatever a backend does not declare here, before calling it. The capabilities
    default to what the simplest backend offers: none.

    Attributes:
        name: What ``solve(..., backend=name)`` takes.
        methods: Method names, in the order :func:`methods` gives them.
        fixed_grid: The methods that step on a fixed grid (``step_size`` or ``steps``); the others are adaptive
            (``rtol``, ``atol``).
        gradients: The gradient methods it computes, among :data:`GRADIENTS`.
        solve: ``(field, y0, times, settings, stats) -> ys``. It keeps ``stats`` up to date, raises the
            :class:`~neuralode_tf.numerics.SolveError` subclasses for failed solves, and leaves NaN and Inf to
            ``solve``, which locates them by replaying it under ``torch.no_grad()`` with ``compile=False``.
        takes_dt0: Adaptive methods that take a first step ``dt0``.
        toleranced: Fixed-grid methods that take ``rtol`` and ``atol`` all the same (an implicit corrector
            iterates to them).
        outside_autograd: Methods that run outside autograd: only ``gradient="adjoint"`` differentiates them.
        seminorm: Whether it takes ``seminorm=True`` (with ``gradient="adjoint"``).
        per_sample: Whether it steps each sample along dim 0 on its own (``per_sample``).
        options: Whether it passes ``options`` through to the library.
        compile: Whether it takes ``compile``.
        sample_times: Whether it takes a time span per sample (a 2-D ``t``, with ``per_sample=True``).
        dense: Methods whose steps it records, for dense output and events (``dense=``, ``event=``).
        callbacks: Whether it calls torchdiffeq's step callbacks (``callback_step``, ...) that a field defines;
            ``solve`` refuses such a field on a backend that would ignore them.
        refused: Method names it does not take, each with the reason and what to ask for instead (a name that
            means another method in the library behind it), for the error message.
        concatenates: Whether it integrates the tensors of a tuple state concatenated into one, so they need one
            dtype and one element at least.
        counts_ahead: Whether ``solve`` fills in ``stats.nfe`` and ``stats.n_accepted`` before stepping (a fixed
            number of evaluations per step), so a non-finite value is located by its evaluation's number.
        priority: Where ``backend="auto"`` tries it: a lower priority first (the built-in backend 0, torchdiffeq 10,
            torchode 20), backends of one priority in the order they were registered. Which backend runs a method
            offered by several is declared here, not left to the order the modules happen to be imported in.
        substep: Methods that take ``substep`` (a sub-integrator for each part of a split field: the built-in
            splitting methods); ``solve`` refuses ``substep`` for any other.
        check: ``(field, method, substep) -> None``, called once ``solve`` has chosen this backend: it raises a
            :class:`~neuralode_tf.numerics.SolverConfigError` for what the declarations above cannot say (the
            built-in backend refuses an unknown ``substep``, and a splitting method on a field without ``parts``).
            By default it accepts everything.
    """

    name: str
    methods: tuple[str, ...]
    fixed_grid: frozenset[str]
    gradients: tuple[str, ...]
    solve: Solver
    takes_dt0: frozenset[str] = frozenset()
    toleranced: frozenset[str] = frozenset()
    outside_autograd: frozenset[str] = frozenset()
    seminorm: bool = False
    per_sample: bool = False
    options: bool = False
    compile: bool = False
    sample_times: bool = False
    dense: frozenset[str] = frozenset()
    callbacks: bool = False
    refused: Mapping[str, str] = field(default_factory=dict)
    concatenates: bool = False
    counts_ahead: bool = False
    priority: int = 100
    substep: frozenset[str] = frozenset()
    check: Check = field(default=_accept_all)

    def __post_init__(self) -> None:
        adaptive = set(self.methods) - set(self.fixed_grid)
        subsets = [
            ("fixed_grid", self.fixed_grid, set(self.methods)),
            ("gradients", self.gradients, set(GRADIENTS)),
            ("substep", self.substep, set(self.methods)),
            ("takes_dt0", self.takes_dt0, adaptive),
            ("toleranced", self.toleranced, set(self.fixed_grid)),
            ("outside_autograd", self.outside_autograd, set(self.methods)),
            ("dense", self.dense, set(self.methods)),
        ]
        if not self.name or self.name == "auto":
            raise ValueError(f"a backend needs a name other than '' and 'auto', got {self.name!r}")
        if not self.methods or not self.gradients:
            raise ValueError(f"backend {self.name!r} needs one method and one gradient method at least")
        for what, names, within in subsets:
            if not set(names) <= within:
                outside = sorted(set(names) - within)
                raise ValueError(f"backend {self.name!r}: {what} {outside} are not among {sorted(within)}")


_REGISTRY: dict[str, Backend] = {}
_EDITS = [0]
"""How many times :data:`_REGISTRY` has changed."""


def registry_edits() -> int:
    """How many times a backend has been registered, replaced or unregistered (a plan settled since is current)."""
    return _EDITS[0]


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend``: ``backend="auto"`` tries it by its ``priority``, after the backends of that priority
    registered before it. Returns it.

    With ``replace=True`` it takes the place of the registered backend of its name instead, e.g. to declare a method
    added to it.

    Raises:
        ValueError: a backend of that name is registered already (and ``replace`` is False), or none is (and
            ``replace`` is True).
    """
    if (backend.name in _REGISTRY) != replace:
        state = "is registered already: unregister_backend it first" if not replace else "is not registered"
        raise ValueError(f"a backend named {backend.name!r} {state}")
    _REGISTRY[backend.name] = backend
    _EDITS[0] += 1
    return backend


def unregister_backend(name: str) -> Backend:
    """Remove the backend ``name`` from the registry and return it."""
    backend = get_backend(name)
    del _REGISTRY[name]
    _EDITS[0] += 1
    return backend


def get_backend(name: str) -> Backend:
    """The registered backend ``name``; a :class:`~neuralode_tf.numerics.SolverConfigError` listing them if none."""
    if name not in _REGISTRY:
        raise SolverConfigError(f"unknown backend {name!r}; valid: 'auto', {quoted(_REGISTRY)}")
    return _REGISTRY[name]


def methods(backend: str) -> tuple[str, ...]:
    """The method names the registered backend ``backend`` accepts."""
    return get_backend(backend).methods


def registered() -> tuple[Backend, ...]:
    """The registered backends, in the order ``backend="auto"`` tries them (by ``priority``, then registration)."""
    return tuple(sorted(_REGISTRY.values(), key=lambda backend: backend.priority))


def offering(capability: str) -> str:
    """The names of the registered backends that offer ``capability`` (a boolean field), for messages."""
    return " or ".join(b.name for b in registered() if getattr(b, capability))


def quoted(names: Iterable[str]) -> str:
    """``'a', 'b', 'c'``: names for a message."""
    return ", ".join(repr(n) for n in names)


class _Names(Sequence[str]):
    def __getitem__(self, index: Any) -> Any:
        return tuple(b.name for b in registered())[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(tuple(b.name for b in registered()))


class _FixedGridMethods(Set[str]):
    def __contains__(self, method: object) -> bool:
        return any(method in b.fixed_grid for b in _REGISTRY.values())

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set().union(*(b.fixed_grid for b in _REGISTRY.values()))))

    def __len__(self) -> int:
        return len(set().union(*(b.fixed_grid for b in _REGISTRY.values())))

    def __repr__(self) -> str:
        return repr(frozenset(self))


BACKENDS: Sequence[str] = _Names()
"""The names of the registered backends, in the order ``backend="auto"`` tries them."""

FIXED_GRID_METHODS: Set[str] = _FixedGridMethods()
"""The methods that take ``step_size`` or ``steps`` rather than tolerances, on some registered backend."""
