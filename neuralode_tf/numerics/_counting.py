"""A wrapper that counts a field's evaluations and steps for the external backends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .._typing import Field, State
from ._field_checks import attribute
from ._precision import Autocast, autocasting, cast, dtypes_of
from ._state import check_like, leaves
from .errors import MaxStepsExceededError
from .solution import Stats

CALLBACKS = ("callback_step", "callback_accept_step", "callback_reject_step")
"""torchdiffeq's step callbacks, which a field may define: called with ``(t0, y0, dt)`` of each step attempted,
accepted or rejected (torchdiffeq also looks for each name with ``_adjoint`` appended, for the backward solve)."""


_CALLBACK_NAMES = (*CALLBACKS, *(name + "_adjoint" for name in CALLBACKS))
_CALLBACK_SET = frozenset(_CALLBACK_NAMES)
_CLASS_DEFINES: dict[type, bool] = {}
"""Whether a module class has an attribute of one of :data:`_CALLBACK_NAMES` (``solve`` asks on every call)."""


def defined_callbacks(field: object) -> list[str]:
    """The names of torchdiffeq's step callbacks (and their ``*_adjoint`` versions) that ``field`` defines."""
    if isinstance(field, nn.Module) and _CALLBACK_SET.isdisjoint(field.__dict__):
        on_class = _CLASS_DEFINES.get(type(field))
        if on_class is None:
            on_class = _CLASS_DEFINES[type(field)] = any(hasattr(type(field), name) for name in _CALLBACK_NAMES)
        if not on_class:
            return []  # none on the instance or its class, where attribute() looks on a module
    return [name for name in _CALLBACK_NAMES if callable(attribute(field, name))]


class CountingField(nn.Module):
    """Calls ``field`` and keeps :class:`Stats` up to date.

    * Evaluations are counted into ``stats.nfe`` during the forward solve and into
      ``stats.nfe_backward`` once :meth:`start_backward` has been called.
    * The first output is checked against the state's metadata (no device sync).
    * ``max_evaluations`` (off unless set) bounds the evaluations, for a solver whose steps it cannot see.
    * ``callback_*`` are torchdiffeq's step hooks: they count steps, enforce ``max_steps``, then call the
      field's own hook of that name if it has one; the field's ``*_adjoint`` hooks are offered as they are.
    * ``last_t`` keeps the time of the latest forward evaluation for error messages; it is only
      read on the error path.
    * ``dtype`` (off unless set; :mod:`~neuralode_tf.numerics._precision`): the dtype of ``y0``, where the backend
      integrates a 16-bit state in float32 or runs under autocast. The field then gets the state in ``dtype`` and
      its output is cast to the integrated state's dtype (the first output may be any floating dtype under autocast).
    * ``autocast`` (off unless set): the autocast state the solve began in, which every evaluation of the field
      runs in, forward and backward, while the backend runs its solver without autocast.
    * On an XLA device every evaluation starts with ``torch_xla.sync()`` (:func:`_xla_sync`).
    """

    def __init__(
        self,
        field: Field,
        stats: Stats,
        max_steps: int | None = None,
        dtype: torch.dtype | None = None,
        autocast: Autocast | None = None,
    ):
        super().__init__()
        self.field = field
        self.dtype = dtype
        self.autocast = autocast
        self.stats = stats
        self.max_steps = max_steps
        self.max_evaluations: int | None = None
        self.attempted_steps = 0
        self.last_t: Tensor | None = None
        self._checked = False
        self._backward = False
        self._hooks: dict[str, list[Callable]] = {name: [getattr(field, name)] for name in defined_callbacks(field)}
        for name, (hook,) in self._hooks.items():
            if name.endswith("_adjoint"):
                setattr(self, name, hook)

    def forward(self, t: Tensor, y: State) -> State:
        _xla_sync(y)
        if self.dtype is None:
            return self._evaluate(t, y)
        with self.autocast.field() if self.autocast is not None else contextlib.nullcontext():
            out = self._evaluate(t, cast(y, self.dtype))
        return cast(out, dtypes_of(y))

    def _evaluate(self, t: Tensor, y: State) -> State:
        if self._backward:
            self.stats.nfe_backward += 1
            return self.field(t, y)
        self.stats.nfe += 1
        self.last_t = t
        if self.max_evaluations is not None and self.stats.nfe > self.max_evaluations:
            raise MaxStepsExceededError(
                f"the solve exceeded max_steps={self.max_evaluations} evaluations of the field (a solver whose steps "
                f"are not seen is bounded by its evaluations) at t={float(t.detach()):.6g}; pass a larger max_steps= "
                f"to solve (e.g. max_steps={4 * self.max_evaluations}) or loosen rtol/atol"
            )
        out = self.field(t, y)
        if not self._checked:
            check_like(out, y, "the field", any_dtype=self.dtype is not None and autocasting(y))
            self._checked = True
        return out

    @property
    def in_backward(self) -> bool:
        """Whether the evaluations now are the backward pass's (after :meth:`start_backward`)."""
        return self._backward

    def start_backward(self) -> None:
        """Count further evaluations as backward-pass evaluations."""
        self._backward = True
        self.last_t = None

    def callback_step(self, t0: Tensor, y0: State, dt: Tensor) -> None:
        self.attempted_steps += 1
        if self.max_steps is not None and self.attempted_steps > self.max_steps:
            raise MaxStepsExceededError(
                f"the adaptive solve exceeded max_steps={self.max_steps} at t={float(t0.detach()):.6g} after "
                f"{self.stats.nfe} evaluations; pass a larger max_steps= to solve (e.g. max_steps="
                f"{4 * self.max_steps}), loosen rtol/atol, or check the field for stiffness or blow-up"
            )
        self._call_own("callback_step", t0, y0, dt)

    def callback_accept_step(self, t0: Tensor, y0: State, dt: Tensor) -> None:
        self.stats.n_accepted += 1
        self._call_own("callback_accept_step", t0, y0, dt)

    def callback_reject_step(self, t0: Tensor, y0: State, dt: Tensor) -> None:
        self.stats.n_rejected += 1
        self._call_own("callback_reject_step", t0, y0, dt)

    def add_hook(self, name: str, hook: Callable[[Tensor, State, Tensor], None]) -> None:
        """Call ``hook(t0, y0, dt)`` from the step callback ``name`` too, after the field's own."""
        self._hooks.setdefault(name, []).append(hook)

    def _call_own(self, name: str, t0: Tensor, y0: State, dt: Tensor) -> None:
        y0 = y0 if self.dtype is None else cast(y0, self.dtype)  # the state in the field's dtype, as the field gets it
        for hook in self._hooks.get(name, ()):
            hook(t0, y0, dt)


def _xla_sync(y: State) -> None:
    """Cut XLA's lazy graph before an evaluation of the field by an external backend.

    torchdiffeq and torchode decide every step on the host (``.item()``, ``bool(...)``), which runs only
    the graph of that one value: the state stays unmaterialised, so each step's graph holds every step
    before it, and each is compiled and run anew (a 5-step dopri5 solve of a small transformer field
    compiled 89 graphs on XLA's CPU backend; with this, 9, and 25 times faster). Materialising all live
    tensors here keeps each graph to one stage, the same at every step, so compiled once.
    """
    if leaves(y)[0].device.type == "xla":
        import torch_xla

        torch_xla.sync()
