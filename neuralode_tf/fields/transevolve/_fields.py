"""TransEvolve encoder and decoder blocks (Dutta et al. 2021, §6) as split fields on depth-time ``[0, L]``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar, get_args

from torch import nn

from ...nn import MLPBranch
from ..sharing import WeightSharedField
from ..split import SplitField
from ._attention import TransEvolveAttention, TransEvolveMode
from ._random_ff import RandomFeedForward

FeedForwardKind = Literal["random", "full"]
"""The feed-forward layers of a TransEvolve block: ``"random"`` (:class:`RandomFeedForward`, eq. 11,
TransEvolve-randomFF) or ``"full"`` (:class:`~neuralode_tf.nn.MLPBranch`, eq. 3, TransEvolve-fullFF)."""

_FEED_FORWARD_LAYERS: dict[str, type[nn.Module]] = {"random": RandomFeedForward, "full": MLPBranch}

_Part = TypeVar("_Part", bound=nn.Module)


class _TransEvolveBlock(SplitField):
    """A TransEvolve block: its attention parts, then ``depth`` feed-forward layers (``l`` on ``[l, l+1)``).

    ``attentions`` holds the keyword arguments (``causal``, ``cross_attention``) of each
    :class:`TransEvolveAttention` part, in stepping order; every part shares the other settings.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        attentions: Sequence[dict[str, bool]],
        feed_forward: FeedForwardKind,
        mlp_hidden: int | None,
        mode: TransEvolveMode,
        time_scale: float,
    ):
        if feed_forward not in _FEED_FORWARD_LAYERS:
            valid = ", ".join(map(repr, get_args(FeedForwardKind)))
            raise ValueError(f"unknown feed_forward {feed_forward!r}; valid: {valid}")
        layers = [_FEED_FORWARD_LAYERS[feed_forward](dim, mlp_hidden) for _ in range(depth)]
        feed_forward_part = WeightSharedField(layers, depth)
        attention_parts = [
            TransEvolveAttention(dim, num_heads, depth, mode=mode, time_scale=time_scale, **kind) for kind in attentions
        ]
        super().__init__(*attention_parts, feed_forward_part)

    def _part(self, index: int, kind: type[_Part]) -> _Part:
        """The part at ``index``, a ``kind`` as built (unless replaced since)."""
        part = self.parts[index]
        if not isinstance(part, kind):
            raise TypeError(f"part {index} of {type(self).__name__} is a {type(part).__name__}, not a {kind.__name__}")
        return part

    @property
    def feed_forward(self) -> WeightSharedField:
        return self._part(-1, WeightSharedField)

    @property
    def jump_times(self) -> list[float]:
        """The layer boundaries ``1 .. L-1``, where the parameters change."""
        return self.feed_forward.jump_times


class TransEvolveField(_TransEvolveBlock):
    """One TransEvolve block of ``L`` layers as a field on depth-time ``[0, L]`` (Dutta et al. 2021, §6).

    .. math:: \\frac{dx}{dt} = \\mathrm{Attn}(t, x; x^0) + \\mathrm{FF}(t, x)

    with :class:`TransEvolveAttention` (state from the block input ``x⁰``; eqs. 6, 9) and, per layer, a
    :class:`RandomFeedForward` (``feed_forward="random"``, eq. 11) or a
    :class:`~neuralode_tf.nn.MLPBranch` (``"full"``, eq. 3; GELU where the code uses ReLU). Layer ``l``
    acts on ``[l, l + 1)`` (the feed-forward part is a :class:`~neuralode_tf.fields.WeightSharedField`
    of the ``L`` layers). :attr:`parts` is ``(attention, feed_forward)``, so one Lie-Trotter Euler step
    per unit of depth is the discrete block ``x += Attn_l(x); x += FF_l(x)``, ``l = 0 .. L-1`` (eq. 5)::

        field = TransEvolveField(64, num_heads=4, depth=3)
        field.attention.bind(block_input=x, key_padding_mask=pad)
        y = solve(field, x, [0, 3], method="lie_trotter", steps=3).y1
        # or: ContinuousDepth(field, t1=3, method="lie_trotter")(x, block_input=x, key_padding_mask=pad)

    The code's block-final LayerNorm is not part of the field. **Padding:** real tokens never depend
    on padded ones (padded keys get zero attention weight), so on a fixed grid they follow the
    trajectory of the sequence without its padded positions; padded tokens get a zero attention
    increment but still move under the feed-forward, which acts on every position.

    Args:
        dim, num_heads, depth, causal, mode, time_scale: As in :class:`TransEvolveAttention`.
        feed_forward: A :data:`FeedForwardKind`, ``"random"`` or ``"full"``.
        mlp_hidden: Hidden width of the feed-forward layers (default ``4 dim``).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        *,
        feed_forward: FeedForwardKind = "random",
        mlp_hidden: int | None = None,
        causal: bool = False,
        mode: TransEvolveMode = "auto",
        time_scale: float = 64.0,
    ):
        attentions = [dict(causal=causal)]
        super().__init__(dim, num_heads, depth, attentions, feed_forward, mlp_hidden, mode, time_scale)

    @property
    def attention(self) -> TransEvolveAttention:
        return self._part(0, TransEvolveAttention)


class TransEvolveDecoderField(_TransEvolveBlock):
    """One TransEvolve decoder block of ``L`` layers as a field on depth-time ``[0, L]`` (eqs. 12-13).

    .. math:: \\frac{dy}{dt} = \\mathrm{SelfAttn}(t, y; y^0) + \\mathrm{CrossAttn}(t; y^0, m) + \\mathrm{FF}(t, y)

    with a causal :class:`TransEvolveAttention` whose state comes from the decoder block input
    ``y⁰`` (eq. 12, ``A^{dec}``), a cross-attention one (``cross_attention=True``; eq. 12,
    ``A^{ed}``: queries from ``y⁰``, keys and values from the encoder output ``m``) and, per layer,
    the feed-forward of :class:`TransEvolveField`. :attr:`parts` is ``(self_attention,
    cross_attention, feed_forward)``, so one Lie-Trotter Euler step per unit of depth is the code's
    ``DecoderBlock`` loop ``y += SelfAttn_l(y); y += CrossAttn_l(y); y += FF_l(y)``,
    ``l = 0 .. L-1`` (eq. 13 followed by eq. 11 or 3)::

        field = TransEvolveDecoderField(64, num_heads=4, depth=3)
        block = ContinuousDepth(field, t1=3, method="lie_trotter")
        y = block(y0, block_input=y0, key_padding_mask=tgt_pad, memory=m, memory_key_padding_mask=src_pad)

    Every part is causal in the target positions. The code's block-final LayerNorm is not part of
    the field. Padding (``key_padding_mask`` of the target, ``memory_key_padding_mask`` of the source)
    acts as in :class:`TransEvolveField`: real target tokens never depend on padded target or source
    tokens, while padded target tokens still move under the feed-forward.

    Args:
        dim, num_heads, depth, mode, time_scale: As in :class:`TransEvolveAttention`.
        feed_forward, mlp_hidden: As in :class:`TransEvolveField`.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        *,
        feed_forward: FeedForwardKind = "random",
        mlp_hidden: int | None = None,
        mode: TransEvolveMode = "auto",
        time_scale: float = 64.0,
    ):
        attentions = [dict(causal=True), dict(cross_attention=True)]
        super().__init__(dim, num_heads, depth, attentions, feed_forward, mlp_hidden, mode, time_scale)

    @property
    def self_attention(self) -> TransEvolveAttention:
        return self._part(0, TransEvolveAttention)

    @property
    def cross_attention(self) -> TransEvolveAttention:
        return self._part(1, TransEvolveAttention)
