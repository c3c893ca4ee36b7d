"""Evolving attention (Wang et al. 2021) read as a field on the augmented state ``(x, A)``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..nn.evolving import EvolvingAttentionBranch
from ._parts import as_field
from .sharing import WeightSharedField
from .split import SplitField

__all__ = ["EvolvingAttentionField", "EvolvingAttentionStack"]


class EvolvingAttentionField(SplitField):
    """An Evolving-Attention block as a vector field on tokens and logit maps, ``y = (x, A_1, ..., A_K)``.

    **Discrete rule.** Block ``i`` of an EA-Transformer (Wang et al. 2021, eqs. 4-6, pre-norm) with
    one evolving attention branch and an MLP is

    .. math::

        L_i = L(A_{i-1}, x_{i-1}), \\quad
        x' = x_{i-1} + \\mathrm{Attn}\\big(\\mathrm{softmax}(L_i), x_{i-1}\\big), \\quad
        x_i = x' + \\mathrm{MLP}(x'), \\quad A_i = L_i,

    where ``L(A, x) = β ReLU(Conv(α A + (1-α) QKᵀ/√d_h(x))) + (1-β)(α A + (1-α) QKᵀ/√d_h(x))``
    is eq. 4 (:class:`~neuralode_tf.nn.EvolvingAttentionBranch`). Writing the map update as a residual,
    ``A_i = A_{i-1} + (L_i - A_{i-1})``, both updates are Euler steps of size 1.

    **Continuous reading.** The field is

    .. math::

        \\frac{dx}{dt} = \\mathrm{Attn}\\big(\\mathrm{softmax}(L(A, x)), x\\big) + \\mathrm{MLP}(x),
        \\qquad \\frac{dA}{dt} = L(A, x) - A.

    The map relaxes towards the evolved logits: an Euler step of size ``h`` gives
    ``A ← (1 - h) A + h L(A, x)``, the discrete rule for ``h = 1`` and a partial update for ``h < 1``.
    ``α`` and ``β`` keep their meaning inside ``L``; ``h`` is a third mixing weight between the
    carried map and the evolved one. Without convolution (``β = 0``),
    ``dA/dt = (1 - α)(QKᵀ/√d_h(x) - A)``: ``A`` tracks the current logits with rate ``1 - α`` per unit
    of depth, an exponential memory whose discrete (``h = 1``) form is the moving average
    ``A_i = α A_{i-1} + (1 - α) QKᵀ/√d_h`` of eq. 4, while the exact flow keeps the fraction
    ``e^{-(1-α)}`` (not ``α``) of the map per unit of depth. So only the ``h = 1`` Lie-Trotter Euler
    step is the discrete network; other methods and step counts integrate the ODE it was read as.
    The attention always uses the evolved ``L(A, x)``, not ``A``, as the discrete block does. The ReLU
    makes the field only piecewise smooth, so high-order methods lose order where a trajectory crosses
    a kink (RK4 converges, at about second order in ``tests/test_evolving.py``).

    **Splitting.** :attr:`parts` follow the branches: an evolving attention branch is the part
    ``(Attn increment, 0, .., L_k - A_k, .., 0)`` moving ``x`` and its own map, any other branch
    (an MLP, or a vanilla attention branch) the part ``(b(x), 0, ..., 0)``. One Lie-Trotter Euler
    step of size 1 is therefore the discrete block above (``x`` updated branch after branch, each map
    replaced by its ``L``), exactly up to the rounding of ``A + (L - A)``.

    **State.** :meth:`initial_state` returns ``(x, A_1^0, ..., A_K^0)`` with ``A_k^0`` the vanilla
    logits of ``x`` under branch ``k`` (0 at masked entries), so the first block mixes
    ``α QKᵀ/√d_h + (1 - α) QKᵀ/√d_h = QKᵀ/√d_h``: it has no previous map, and with ``β = 0`` the map
    starts at rest (``dA/dt = 0``). (A branch stepped after another one in the block, such as a
    decoder's cross-attention, sees the logits of the block input ``x`` mixed with those of its own
    input.) :meth:`final_state` returns ``(x, None)``, so
    :class:`~neuralode_tf.ContinuousDepth` returns the tokens. Masks and memory reach the branches
    through their ``bind`` (which ``ContinuousDepth`` calls) before :meth:`initial_state`.

    **Padding.** With a ``key_padding_mask`` bound, real tokens never depend on padded ones, and the
    map entries of padded rows and columns stay 0 (0 in :meth:`initial_state`, with rate
    ``L - A = 0`` there). Padded tokens themselves still move, under the MLP branch. With padding at
    the end of each sequence and a fixed grid, the real tokens follow the trajectory of the unpadded
    sequence (the convolution reads zeros beyond its end either way); padding between real tokens
    changes the neighbourhoods the convolution reads, so there only the independence holds.

    A decoder block is ``EvolvingAttentionField(self_attention, cross_attention, mlp)`` with
    ``causal=True`` branches: its state carries one map per evolving branch (``(B, H, n, n)`` and
    ``(B, H, n, m)``), each evolving separately (§4.3 applies the convolutions to the three kinds of
    attention separately, and the skips only in the encoder: :class:`~neuralode_tf.models.Seq2Seq`'s
    decoder branches have ``α = 0``, so its maps are carried but never read). For ``D`` blocks with their
    own parameters use :class:`EvolvingAttentionStack`.

    Args:
        *branches: In stepping order: :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (each
            carries a map) and other residual branches ``x -> dx`` or fields ``(t, x) -> dx``
            (e.g. :class:`~neuralode_tf.nn.MLPBranch`). At least one evolving branch.
    """

    def __init__(self, *branches: nn.Module):
        attentions = [b for b in branches if isinstance(b, EvolvingAttentionBranch)]
        if not attentions:
            raise ValueError("EvolvingAttentionField needs at least one EvolvingAttentionBranch")
        slots = iter(range(len(attentions)))
        super().__init__(
            *(
                _EvolvingPart(b, next(slots), len(attentions))
                if isinstance(b, EvolvingAttentionBranch)
                else _TokenPart(as_field(b))
                for b in branches
            )
        )
        self.attentions = attentions  # plain list: the parameters are registered once, through the parts

    def initial_state(self, x: Tensor) -> tuple[Tensor, ...]:
        """``(x, A_1^0, ..., A_K^0)``: the tokens and the vanilla logits of each evolving branch."""
        return (x, *(attention.initial_logits(x) for attention in self.attentions))

    def final_state(self, y: tuple[Tensor, ...]) -> tuple[Tensor, None]:
        """The tokens at the end, and no regularisation term."""
        return y[0], None


class EvolvingAttentionStack(WeightSharedField):
    """``D`` Evolving-Attention blocks with their own parameters, on depth-time ``[0, D]``.

    :class:`~neuralode_tf.fields.WeightSharedField` over :class:`EvolvingAttentionField` layers: layer
    ``j`` acts on ``[j D/k, (j+1) D/k)`` (``k = len(layers)``; ``k = D`` for one set per block), the
    maps pass from layer to layer in the state, and ``solve(stack, stack.initial_state(x), [0, D],
    method="lie_trotter", steps=D)`` is the discrete ``D``-block EA-Transformer (up to the rounding of
    ``A + (L - A)``). The initial
    maps are those of the first layer (:meth:`EvolvingAttentionField.initial_state`).

    Args:
        layers: The ``k`` layers; each carries the same number of maps, in the same order.
        depth: ``D`` (default ``len(layers)``).
    """

    def __init__(self, layers: Sequence[EvolvingAttentionField], depth: float | None = None):
        if not all(isinstance(layer, EvolvingAttentionField) for layer in layers):
            raise TypeError("EvolvingAttentionStack takes EvolvingAttentionField layers")
        if len({len(layer.attentions) for layer in layers}) > 1:
            raise ValueError("the layers of an EvolvingAttentionStack must carry the same number of logit maps")
        super().__init__(layers, len(layers) if depth is None else depth)

    def initial_state(self, x: Tensor) -> tuple[Tensor, ...]:
        """The first layer's :meth:`EvolvingAttentionField.initial_state`."""
        first = self.layers[0]
        if not isinstance(first, EvolvingAttentionField):  # the layers were checked when built, then replaced
            raise TypeError(f"the first layer is a {type(first).__name__}, not an EvolvingAttentionField")
        return first.initial_state(x)

    def final_state(self, y: tuple[Tensor, ...]) -> tuple[Tensor, None]:
        """The tokens at the end, and no regularisation term."""
        return y[0], None


class _EvolvingPart(nn.Module):
    """``(Attn increment, 0, .., L(A_slot, x) - A_slot, .., 0)``: one evolving branch moving ``x`` and its map."""

    def __init__(self, attention: EvolvingAttentionBranch, slot: int, n_maps: int):
        super().__init__()
        self.attention = attention
        self.slot = slot
        self.n_maps = n_maps

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x, *maps = y
        if len(maps) != self.n_maps:
            raise TypeError(
                f"the state has {len(maps)} logit maps, this field carries {self.n_maps}; "
                "start from EvolvingAttentionField.initial_state(x)"
            )
        increment, logits = self.attention(x, maps[self.slot])
        rates = [logits - a if i == self.slot else torch.zeros_like(a) for i, a in enumerate(maps)]
        return (increment, *rates)


class _TokenPart(nn.Module):
    """``(f(t, x), 0, ..., 0)``: a field on the tokens that leaves the maps unchanged."""

    def __init__(self, field: nn.Module):
        super().__init__()
        self.field = field

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x, *maps = y
        return (self.field(t, x), *(torch.zeros_like(a) for a in maps))
