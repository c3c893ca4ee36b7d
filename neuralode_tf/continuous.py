"""ContinuousDepth: a field plus solve settings, as a drop-in replacement for a stack of blocks."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ._typing import State
from .numerics import FIXED_GRID_METHODS, SolverConfigError, Stats, resolve_backend, solve

__all__ = ["ContinuousDepth", "regularization"]


class ContinuousDepth(nn.Module):
    """The map ``x(t0) -> x(t1)`` of ``dx/dt = field(t, x)``, as an ``nn.Module``.

    It drops in where a stack of blocks was (``vit.blocks = ContinuousDepth(field, ...)``). With
    ``method="euler"`` and one step per unit of time it computes the residual stack the field was
    read from; any other method of :func:`neuralode_tf.solve` integrates the same ODE more
    accurately.

    Args:
        field: The vector field (registered as a submodule, so its parameters train).
        t1: End of depth-time (``D`` for a weight-shared stack of ``D`` layers).
        t0: Start of depth-time.
        method, steps, step_size: As in :func:`~neuralode_tf.solve`. A fixed-grid method given
            neither ``steps`` nor ``step_size`` takes unit steps, so the default, Euler, computes
            one residual block per unit of depth-time.
        **solve_kwargs: Any further argument of :func:`~neuralode_tf.solve` (``adjoint``,
            ``backend``, ``rtol``, ``substep``, ...).

    Attributes:
        stats: The :class:`~neuralode_tf.numerics.Stats` of the last forward call (``None`` before it).
        regularization: A scalar tensor that the last forward call asks to add to the training loss
            (e.g. a transport cost), or ``None``. :func:`regularization` sums these over a model;
            the training loop adds that sum to the loss.

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
        **solve_kwargs: Any,
    ):
        super().__init__()
        self.field = field
        self.t0, self.t1 = float(t0), float(t1)
        if steps is None and step_size is None and method in FIXED_GRID_METHODS:
            step_size = 1.0
        self.solve_kwargs = dict(method=method, steps=steps, step_size=step_size, **solve_kwargs)
        self.stats: Stats | None = None
        self.regularization: Tensor | None = None

    def forward(self, x: State, **conditioning: Any) -> State:
        """Integrate from ``x`` at ``t0`` and return the state at ``t1``.

        Keyword arguments (e.g. ``key_padding_mask``, ``memory``, ``memory_padding_mask``) are
        per-batch conditioning, passed to ``bind(**conditioning)`` of every submodule of the field
        that has one (:meth:`~neuralode_tf.nn.AttentionBranch.bind`); calling without them clears it.
        """
        if any(value is not None for value in conditioning.values()) and self._backsolves_per_sample():
            raise SolverConfigError(
                "torchode's backsolve adjoint evaluates the field one sample at a time (vmap), which per-batch "
                "conditioning (masks, memory) cannot follow; use backend='torchdiffeq' for adjoint='adjoint', "
                "or adjoint='backprop'/'checkpoint'"
            )
        for module in self.field.modules():
            if callable(getattr(module, "bind", None)):
                module.bind(**conditioning)
        augmented = callable(getattr(self.field, "initial_state", None))
        y0 = self.field.initial_state(x) if augmented else x
        solution = solve(self.field, y0, [self.t0, self.t1], **self.solve_kwargs)
        self.stats = solution.stats
        if not augmented:
            self.regularization = None
            return solution.y1
        x1, self.regularization = self.field.final_state(solution.y1)
        return x1

    def _backsolves_per_sample(self) -> bool:
        settings = self.solve_kwargs
        if settings.get("adjoint") != "adjoint":
            return False
        keys = ("adjoint", "substep", "seminorm", "per_sample")
        options = {k: settings[k] for k in keys if settings.get(k) is not None}
        return resolve_backend(self.field, settings["method"], settings.get("backend", "auto"), **options) == "torchode"

    def extra_repr(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.solve_kwargs.items() if v is not None)
        return f"t0={self.t0}, t1={self.t1}, {settings}"


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
