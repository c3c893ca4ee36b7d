"""Kinetic-energy state augmentation and the transport cost of OT-Transformer (Kan et al. 2025)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from .._typing import State
from ..nn._conditioning import check_padding_mask
from ..protocols import VectorField, jump_times_of, parts_of
from ._parts import as_field

__all__ = ["KineticEnergy", "TRANSPORT_CONVENTIONS"]

TRANSPORT_CONVENTIONS = ("paper", "code")


class KineticEnergy(nn.Module):
    """Augments a field ``f`` with its kinetic energy: the field on ``(x, e)``

    .. math:: \\frac{dx}{dt} = f(t, x), \\qquad \\frac{de}{dt} = \\frac{\\|f(t, x)\\|_F^2}{n\\, d}

    per sample, where ``n d`` is the number of entries of one sample's state (tokens times width;
    the sum over the tensors of a tuple state), or of its real tokens when a padding mask is bound
    (:meth:`bind`). ``e(0) = 0``, so ``e(T) = (1/nd) ∫_0^T ||f||² dt``,
    the transport cost of Kan et al. (2025, eq. 8) before its factor ``λ``. The energy is integrated by
    the same method as ``x``: with Euler and steps ``h_m`` it is ``Σ_m h_m ||f(x_m)||² / (nd)``,
    the sum the released code accumulates, and with an adaptive method it is controlled by the
    same tolerances.

    Being an ordinary field on a tuple state, it works with every method, backend and gradient
    method of :func:`~neuralode_tf.solve`: adjoints carry the energy's adjoint, and torchode's
    per-sample solving gives each sample its own ``e``. Batch dimensions are read from ``e``'s
    shape, so the field also works per sample under ``vmap`` (torchode's backsolve).

    **Splitting.** If ``f`` has ``parts`` (a :class:`~neuralode_tf.fields.SplitField`), so does the
    augmented field: first an energy part ``(0, ||f(t, x)||²/(nd))`` that evaluates the whole
    field without moving ``x``, then each part of ``f`` with ``de/dt = 0``. The parts sum to the
    augmented field, so a splitting method integrates the same ODE (``e`` converges to the same
    integral); with Lie-Trotter Euler the energy is the left-point sum above. It costs one extra
    evaluation of ``f`` per step.

    **Transport cost.** :meth:`cost` turns ``e(T)`` into the term added to the loss:

    * ``convention="paper"``: ``λ/2 · mean_b e_b(T)``, eq. 8 (the expectation over the data is
      the batch mean);
    * ``convention="code"``: ``λ · mean_b e_b(T)``, the released code's ``lmbda * sq_arc``
      (``sq_arc`` divides ``Σ dt ||f||²`` by ``B n d``): no factor ``1/2``, so ``λ`` in this
      convention equals ``2λ`` in the paper's.

    :class:`~neuralode_tf.ContinuousDepth` recognises the augmentation: it starts from
    :meth:`initial_state`, returns ``x(T)`` and reports the cost as its ``regularization``, which
    the training loop adds to the loss (:func:`~neuralode_tf.continuous.regularization`).

    Args:
        field: The field ``f``: ``(t, x) -> dx`` or a branch ``x -> dx``. Its state may be a
            tensor ``(B, ...)`` or a tuple of them.
        transport_cost: ``λ >= 0`` (as the models' ``transport_cost``). ``0`` measures the energy without
            adding it to the loss (the unregularised OT-Transformer).
        convention: ``"paper"`` or ``"code"``.
    """

    def __init__(self, field: nn.Module, transport_cost: float = 1.0, convention: str = "paper"):
        super().__init__()
        if not (isinstance(transport_cost, (int, float)) and transport_cost >= 0):
            raise ValueError(f"transport_cost (λ) must be a number >= 0, got {transport_cost!r}")
        if convention not in TRANSPORT_CONVENTIONS:
            raise ValueError(f"unknown convention {convention!r}; valid: {', '.join(map(repr, TRANSPORT_CONVENTIONS))}")
        self.field = as_field(field)
        self.transport_cost = float(transport_cost)
        self.convention = convention
        self._key_padding_mask: Tensor | None = None

    def initial_state(self, x: State) -> tuple[Tensor, ...]:
        """``(x, e = 0)``; ``e`` has one entry per sample (``x``'s first dimension)."""
        first = x[0] if isinstance(x, tuple) else x
        energy = torch.zeros(first.shape[0], dtype=first.dtype, device=first.device)
        return (*x, energy) if isinstance(x, tuple) else (x, energy)

    def final_state(self, y: tuple[Tensor, ...]) -> tuple[State, Tensor]:
        """``x(T)`` and the :meth:`cost` of ``e(T)``, from the augmented state at ``T``."""
        x, energy = _unpack(y)
        return x, self.cost(energy)

    def cost(self, energy: Tensor) -> Tensor:
        """The transport cost of ``e``: ``λ/2 · mean(e)`` (``convention="paper"``) or ``λ · mean(e)`` (``"code"``)."""
        scale = self.transport_cost / 2 if self.convention == "paper" else self.transport_cost
        return scale * energy.mean()

    def bind(self, *, key_padding_mask: Tensor | None = None) -> None:
        """Leave padding out of the energy: with ``key_padding_mask`` ``(B, N)`` (True at padding) on a
        ``(B, N, d)`` state, ``n`` counts each sample's real tokens and padded rows add nothing.
        :class:`~neuralode_tf.ContinuousDepth` calls it with its conditioning."""
        self._key_padding_mask = key_padding_mask

    def energy_rate(self, dx: State, energy: Tensor) -> Tensor:
        """``||dx||² / (n d)`` per sample; the batch dimensions are those of ``energy``."""
        mask = self._key_padding_mask
        if mask is None:
            squares = [leaf.pow(2).reshape(*energy.shape, -1) for leaf in _leaves(dx)]
            total = sum((s.sum(-1) for s in squares[1:]), squares[0].sum(-1))
            return total / sum(s.shape[-1] for s in squares)
        if isinstance(dx, tuple) or dx.ndim != 3:
            raise ValueError(
                f"a key_padding_mask needs a (B, N, d) tensor state, got "
                f"{tuple(dx.shape) if isinstance(dx, Tensor) else 'a tuple state'}"
            )
        check_padding_mask(mask, "key_padding_mask", dx.shape[:-1], "the state", bound=True)
        real = (~mask).to(dx.dtype)
        per_token = dx.pow(2).sum(-1) * real
        return per_token.sum(-1) / (real.sum(-1).clamp(min=1) * dx.shape[-1])

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x, energy = _unpack(y)
        dx = self.field(t, x)
        return (*_leaves(dx), self.energy_rate(dx, energy))

    @property
    def jump_times(self) -> list[float]:
        """The wrapped field's discontinuities in time, if it declares any."""
        return list(jump_times_of(self.field))

    @property
    def parts(self) -> tuple[nn.Module, ...] | None:
        """The energy part, then each part of the wrapped field with ``de/dt = 0``; ``None`` if it has no parts."""
        parts = parts_of(self.field)
        if parts is None:
            return None
        return (_EnergyPart(self.field, self.energy_rate), *(_MovingPart(part) for part in parts))

    def extra_repr(self) -> str:
        return f"transport_cost={self.transport_cost}, convention={self.convention!r}"


def _unpack(y: tuple[Tensor, ...]) -> tuple[State, Tensor]:
    """The wrapped state and the energy from an augmented state."""
    if not isinstance(y, tuple) or len(y) < 2:
        raise TypeError("a KineticEnergy state is a tuple (*x, e); start from KineticEnergy.initial_state(x)")
    *x, energy = y
    return (x[0] if len(x) == 1 else tuple(x)), energy


def _leaves(x: State) -> tuple[Tensor, ...]:
    return x if isinstance(x, tuple) else (x,)


class _EnergyPart(nn.Module):
    """``(0, ||f(t, x)||²/(nd))``: accumulates the energy of the whole field without moving ``x``."""

    def __init__(self, field: nn.Module, energy_rate: Callable[[State, Tensor], Tensor]):
        super().__init__()
        self.field = field
        self.energy_rate = energy_rate

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x, energy = _unpack(y)
        rate = self.energy_rate(self.field(t, x), energy)
        return (*(torch.zeros_like(leaf) for leaf in _leaves(x)), rate)


class _MovingPart(nn.Module):
    """``(f_i(t, x), 0)``: one part of the wrapped field, leaving the energy unchanged."""

    def __init__(self, part: VectorField):
        super().__init__()
        self.part = part

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x, energy = _unpack(y)
        return (*_leaves(self.part(t, x)), torch.zeros_like(energy))
