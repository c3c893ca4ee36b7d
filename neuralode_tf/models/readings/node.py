"""The N-ODE Transformer of Baier-Reinio & De Sterck (2020): one ODE per block, solved one after another."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from ...continuous import ContinuousDepth
from ...fields import BlockIncrementField, JacobianFrobenius, KineticEnergy
from ...numerics import Stats

__all__ = ["NODETransformer"]


class NODETransformer(nn.Module):
    """A chain of ``D`` ODEs, one per transformer block: the baseline of Kan et al. (2025, eq. 12).

    .. math::

        X_0(0) = X_0, \\quad X_i(0) = X_{i-1}(T), \\quad
        \\frac{dX_i}{dt} = \\hat f_i(X_i) \\text{ on } [0, T]

    where ``f̂_i`` is block ``i`` whose fully-connected layer has no skip
    (:class:`~neuralode_tf.fields.BlockIncrementField`, eq. 12). For pre-norm blocks ``(G, F)`` one Euler
    step of size ``T = 1`` is ``x + F_i(x + G_i(x))``, which lacks the discrete block's ``G_i(x)`` term.
    An attention-only block has no fully-connected layer and keeps its skip, ``f̂_i = B_i``, so a
    one-block attention-only stack is the OT-Transformer (:class:`~neuralode_tf.fields.ComposedField`,
    one ODE for the whole stack) of the same block, as Kan et al. say of their MNIST ViT.

    With ``transport_cost=λ`` each ODE's field is wrapped in
    :class:`~neuralode_tf.fields.KineticEnergy` and the loss gets the sum of the ``D`` costs
    ``λ/2 · mean e_i(T)`` (Baier-Reinio & De Sterck's regularised model), through
    :func:`~neuralode_tf.continuous.regularization`. With ``jacobian_cost=λ_J`` each ODE's field is wrapped
    (outside the kinetic energy) in :class:`~neuralode_tf.fields.JacobianFrobenius`, RNODE's Jacobian cost.

    Args:
        blocks: The ``D`` blocks, each a sequence of sub-layers (or one module: a one-sub-layer block).
        t1: ``T``, the depth-time of each ODE.
        transport_cost: ``λ``, or ``None`` for no kinetic-energy augmentation.
        jacobian_cost: ``λ_J``, or ``None`` for no Jacobian-norm augmentation.
        convention: The transport-cost convention (``"paper"`` or ``"code"``, see
            :class:`~neuralode_tf.fields.KineticEnergy`).
        method, steps, step_size, **solve_options: Solve settings of every ODE
            (:class:`~neuralode_tf.ContinuousDepth`; default one Euler step over ``[0, T]``).

    Attributes:
        odes: The ``D`` :class:`~neuralode_tf.ContinuousDepth` modules.
    """

    def __init__(
        self,
        blocks: Sequence[nn.Module | Sequence[nn.Module]],
        t1: float = 1.0,
        *,
        transport_cost: float | None = None,
        jacobian_cost: float | None = None,
        convention: str = "paper",
        method: str = "euler",
        steps: int | None = None,
        step_size: float | None = None,
        **solve_options: Any,
    ):
        super().__init__()
        if not blocks:
            raise ValueError("NODETransformer needs at least one block")
        fields: list[nn.Module] = [BlockIncrementField(block) for block in blocks]
        if transport_cost is not None:
            fields = [KineticEnergy(field, transport_cost, convention) for field in fields]
        if jacobian_cost is not None:
            fields = [JacobianFrobenius(field, jacobian_cost) for field in fields]
        settings = dict(method=method, steps=steps, step_size=step_size, **solve_options)
        self.odes = nn.ModuleList(ContinuousDepth(field, t1, **settings) for field in fields)

    def forward(self, x: Tensor, **conditioning: Any) -> Tensor:
        """``X_{D-1}(T)`` from ``X_0 = x``; ``conditioning`` (e.g. ``key_padding_mask``) goes to every ODE."""
        for ode in self.odes:
            x = ode(x, **conditioning)
        return x

    @property
    def stats(self) -> Stats | None:
        """The statistics of the last forward call, summed over the ``D`` solves."""
        stats = [ode.stats for ode in self.odes if isinstance(ode, ContinuousDepth) and ode.stats is not None]
        if len(stats) < len(self.odes):
            return None
        total = Stats(backend=stats[0].backend)
        for ode_stats in stats:
            for name in ("nfe", "n_accepted", "n_rejected", "nfe_backward"):
                setattr(total, name, getattr(total, name) + getattr(ode_stats, name))
        return total
