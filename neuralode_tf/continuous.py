"""ContinuousDepth: a field plus solve settings, as a drop-in replacement for a stack of blocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor, nn

from ._checks import SOLVE_OPTIONS, backend_for, bind_calls, check_conditioning, check_solve_settings
from ._renamed import renamed_keyword
from ._tree import stack, unstack
from ._typing import State
from .numerics import (
    FIXED_GRID_METHODS,
    InvalidTimesError,
    Solution,
    SolverConfigError,
    Stats,
    check_field,
    check_times,
    solve,
)
from .protocols import Augmented

__all__ = ["ContinuousDepth", "set_solve_options", "regularization"]

_GRID = ("steps", "step_size")
_INTEGRATOR = (*_GRID, "substep", "rtol", "atol", "dt0", "options", "max_steps")
"""Options that belong to one method: a new ``method`` starts them from their defaults."""


class ContinuousDepth(nn.Module):
    """The map ``x(t0) -> x(t1)`` of ``dx/dt = field(t, x)``, as an ``nn.Module``.

    It drops in where a stack of blocks was (``vit.blocks = ContinuousDepth(field, ...)``). With
    ``method="euler"`` and one step per unit of time it computes the residual stack the field was
    read from; any other method of :func:`neuralode_tf.solve` integrates the same ODE more
    accurately.

    Args:
        field: The vector field, an ``nn.Module`` with ``forward(t, x)`` (registered as a submodule, so
            its parameters train). A plain callable is refused: the tensors it uses would not be
            registered. So is a residual branch ``forward(x)`` (``MLPBranch``, ``AttentionBranch``):
            pass ``neuralode_tf.fields.as_field(branch)`` or a ``SplitField`` of branches.
        t1: End of depth-time (``D`` for a weight-shared stack of ``D`` layers), a real number ``> t0``.
        t0: Start of depth-time.
        method, steps, step_size: As in :func:`~neuralode_tf.solve`. A fixed-grid method given
            neither ``steps`` nor ``step_size`` takes unit steps, so the default, Euler, computes
            one residual block per unit of depth-time.
        **solve_options: Any further argument of :func:`~neuralode_tf.solve` (``gradient``,
            ``backend``, ``rtol``, ``substep``, ...).

    Raises:
        ~neuralode_tf.numerics.InvalidFieldError: ``field`` is not a field module (a ``TypeError``).
        TypeError: ``t0``/``t1`` are not real numbers, or a keyword is not an argument of
            :func:`~neuralode_tf.solve`.
        ~neuralode_tf.numerics.InvalidTimesError: ``t0``/``t1`` are not finite or ``t1 <= t0``.
        ~neuralode_tf.numerics.SolverConfigError: no backend supports ``method`` with these ``backend``,
            ``gradient``, ``substep``, ... (the values ``solve`` checks against the state and the grid, such
            as ``steps`` and ``step_size``, are checked at the first forward).

    Attributes:
        solve_options: The keywords every forward passes to :func:`~neuralode_tf.solve` (read-only). Change
            them with :meth:`set_solve_options`, e.g. to integrate a trained model with another method.
        stats: The :class:`~neuralode_tf.numerics.Stats` of the last forward call (``None`` before it).
        regularization: A scalar tensor that the last forward call asks to add to the training loss
            (e.g. a transport cost), or ``None``. :func:`regularization` sums these over a model;
            the training loop adds that sum to the loss.

    **Mixed precision.** Under ``torch.autocast`` the module's output keeps its input's dtype (a float32 ``x`` stays
    float32, as the residual stream of a discrete stack under autocast) while the field's matmuls run in the autocast
    dtype; a bfloat16 ``x`` through a bfloat16 field gives bfloat16 (stepped in bfloat16 on the built-in fixed grids,
    the discrete stack's arithmetic; in float32 by the external backends)
    (:func:`~neuralode_tf.solve`, Mixed precision).

    **Augmented fields.** A field with methods ``initial_state(x) -> y0`` and
    ``final_state(y1) -> (x1, regularization)`` evolves a larger state than the model's tokens
    (e.g. :class:`~neuralode_tf.fields.KineticEnergy`: ``(x, e)``). The module then solves from
    ``initial_state(x)``, returns ``x1`` and keeps ``regularization`` (e.g. the transport cost
    ``λ/2 · mean e(T)``).
    """

    def __init__(
        self,
        field: nn.Module,
        t1: float = 1.0,
        *,
        t0: float = 0.0,
        method: str = "euler",
        steps: int | None = None,
        step_size: float | None = None,
        **solve_options: Any,
    ):
        super().__init__()
        check_field(field, module=True)
        self.field = field
        self.t0, self.t1 = check_times((t0, t1), names=("t0", "t1"))
        options = dict(method=method, steps=steps, step_size=step_size, **solve_options)
        options = _adjoint_as_gradient(options, stacklevel=4)
        self._solve_options = _with_unit_steps(options)
        check_solve_settings(field, self._solve_options)
        self.stats: Stats | None = None
        self.regularization: Tensor | None = None

    @property
    def solve_options(self) -> Mapping[str, Any]:
        return MappingProxyType(self._solve_options)

    def set_solve_options(self, **options: Any) -> ContinuousDepth:
        """Change how the ODE is solved, keeping the field (and its trained weights); returns ``self``.

        The keywords are those of :func:`~neuralode_tf.solve` and replace the current ones; the others stay,
        with two rules. A new ``method`` starts the options that belong to a method (``steps``, ``step_size``,
        ``substep``, ``rtol``, ``atol``, ``dt0``, ``options``, ``max_steps``) from their defaults unless they
        are given too, while the gradient, backend and compile options stay; a fixed-grid method given no
        grid takes unit steps, as in the constructor. ``steps`` and ``step_size`` are one setting: giving
        either replaces both. The options are validated as the constructor validates them, and nothing
        changes if they are refused::

            model.blocks.set_solve_options(method="rk4", steps=8)         # one ContinuousDepth
            neuralode_tf.set_solve_options(model, method="dopri5", rtol=1e-5)  # all of a model's

        Assigning an option as an attribute (``module.method = "rk4"``) raises ``AttributeError`` instead of
        being silently ignored.

        Raises:
            TypeError: a keyword is not a solve option.
            ~neuralode_tf.numerics.SolverConfigError: no backend supports the resulting settings.
        """
        self._solve_options = self._updated(_adjoint_as_gradient(options, stacklevel=4))
        return self

    def _updated(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The solve options after :meth:`set_solve_options` ``(**options)``, validated; ``self`` is unchanged."""
        updated = dict(self._solve_options)
        reset = _INTEGRATOR if "method" in options else _GRID if any(name in options for name in _GRID) else ()
        for name in reset:
            updated.pop(name, None)
        updated = _with_unit_steps({**updated, **options})
        check_solve_settings(self.field, updated)
        return updated

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SOLVE_OPTIONS:
            raise AttributeError(
                f"{type(self).__name__}.{name} is a solve option, not an attribute: assigning it would change "
                f"nothing; use .set_solve_options({name}=...)"
            )
        super().__setattr__(name, value)

    def forward(self, x: State, **conditioning: Any) -> State:
        """Integrate from ``x`` at ``t0`` and return the state at ``t1``.

        Keyword arguments (e.g. ``key_padding_mask``, ``memory``, ``memory_key_padding_mask``) are
        per-batch conditioning: every submodule of the field with a ``bind`` method gets the keywords
        its ``bind`` names (:meth:`~neuralode_tf.nn.AttentionBranch.bind`); calling without them clears
        them. A keyword that no ``bind`` names raises ``TypeError`` before anything is bound, unless it is
        ``None``; so does a mask that is not bool, and a wrong shape raises ``ValueError``:
        ``key_padding_mask`` is ``(*batch, n)`` for ``x`` ``(*batch, n, d)``, ``memory_key_padding_mask``
        ``(*batch, m)`` for ``memory`` ``(*batch, m, d_m)``.
        """
        solution = self._solve(x, conditioning)
        if not isinstance(self.field, Augmented):
            return solution.y1
        x1, self.regularization = self.field.final_state(solution.y1)
        return x1

    def _solve(self, x: State, conditioning: dict[str, Any], **extra: Any) -> Solution:
        """Bind ``conditioning``, solve from ``x`` (its initial state, for an augmented field) over ``[t0, t1]``
        and keep the solve's ``stats`` (``regularization`` is the caller's)."""
        calls = bind_calls(self.field, conditioning)
        check_conditioning(x, conditioning)
        if any(value is not None for value in conditioning.values()) and self._backsolves_per_sample():
            raise SolverConfigError(
                "torchode's backsolve adjoint evaluates the field one sample at a time (vmap), which per-batch "
                "conditioning (masks, memory) cannot follow; use backend='torchdiffeq' for gradient='adjoint', "
                "or gradient='backprop'/'checkpoint'"
            )
        for bind, keywords in calls:
            bind(**keywords)
        y0 = self.field.initial_state(x) if isinstance(self.field, Augmented) else x
        solution = solve(self.field, y0, [self.t0, self.t1], **self._solve_options, **extra)
        self.stats, self.regularization = solution.stats, None
        return solution

    def trajectory(self, x: State, t: Sequence[float] | Tensor, **conditioning: Any) -> State:
        """The state at each depth-time in ``t`` (within ``[t0, t1]``), stacked along a new dim 0.

        One solve over ``[t0, t1]`` with this module's settings and ``dense=True``: the grid and the steps are
        those of :meth:`forward` (``trajectory(x, [t1])[0]`` equals ``forward(x)``), and a depth between steps
        is read off the dense output (:mod:`~neuralode_tf.numerics.dense`). A depth on a step's boundary (an
        integer depth of a stack solved with whole steps) costs no evaluation; elsewhere at most two per step
        touched. For per-layer readouts, deep supervision and probing. With an augmented field each state is
        its ``final_state`` (the tokens). ``stats`` and ``regularization`` are those of this solve. Needs what
        dense output needs: ``gradient="backprop"``, no ``compile`` and a backend that records its steps.
        """
        if isinstance(t, Tensor) and t.ndim != 1:
            raise InvalidTimesError(f"t must be a 1-D sequence of depth-times, got shape {tuple(t.shape)}")
        states = self._solve(x, conditioning, dense=True).evaluate(t)
        if not isinstance(self.field, Augmented):
            return states
        return stack([self.field.final_state(y)[0] for y in unstack(states)])

    def _backsolves_per_sample(self) -> bool:
        settings = self._solve_options
        return settings.get("gradient") == "adjoint" and backend_for(self.field, settings) == "torchode"

    def extra_repr(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self._solve_options.items())
        return f"t0={self.t0}, t1={self.t1}, {settings}"


def _adjoint_as_gradient(options: dict[str, Any], stacklevel: int) -> dict[str, Any]:
    """``options`` with the deprecated ``adjoint`` given as ``gradient`` (:func:`~neuralode_tf.solve`'s rule: a
    ``DeprecationWarning``, at ``stacklevel`` from here; a ``TypeError`` if both are given)."""
    if "adjoint" not in options:
        return options
    options = dict(options)
    adjoint = options.pop("adjoint")
    if adjoint is not None:
        options["gradient"] = renamed_keyword(
            "gradient", options.get("gradient"), "adjoint", adjoint, default="backprop", stacklevel=stacklevel
        )
    return options


def _with_unit_steps(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without those set to ``None`` (``solve``'s default), and with ``step_size=1`` for a fixed-grid
    method given neither ``steps`` nor ``step_size``."""
    options = {name: value for name, value in options.items() if value is not None}
    if options["method"] in FIXED_GRID_METHODS and not any(name in options for name in _GRID):
        options["step_size"] = 1.0
    return options


def set_solve_options(model: nn.Module, **options: Any) -> nn.Module:
    """Change the solve options of every :class:`ContinuousDepth` in ``model``; returns ``model``.

    The way to integrate a trained model with another solver: each module gets
    :meth:`ContinuousDepth.set_solve_options` ``(**options)``. All of them are validated before any
    changes, so a refused option leaves the whole model as it was::

        set_solve_options(vit, method="rk4", steps=8)
        accuracy_rk4 = evaluate(vit)

    Raises:
        ValueError: ``model`` holds no ContinuousDepth.
        TypeError, ~neuralode_tf.numerics.SolverConfigError: as :meth:`ContinuousDepth.set_solve_options`.
    """
    stacks = [module for module in model.modules() if isinstance(module, ContinuousDepth)]
    if not stacks:
        raise ValueError(f"{type(model).__name__} holds no ContinuousDepth module: there is no solver to change")
    options = _adjoint_as_gradient(options, stacklevel=4)
    updated = [module._updated(options) for module in stacks]
    for module, settings in zip(stacks, updated):
        module._solve_options = settings
    return model


def regularization(model: nn.Module) -> Tensor:
    """The hook for regularisation terms: the sum of ``regularization`` over the model's ContinuousDepth modules.

    Returns a zero tensor when no module reports one. The training loop computes
    ``loss = task_loss + regularization(model)``; custom loops should do the same.
    """
    terms = [
        m.regularization for m in model.modules() if isinstance(m, ContinuousDepth) and m.regularization is not None
    ]
    if not terms:
        return torch.zeros(())
    return torch.stack([term.reshape(()) for term in terms]).sum()
