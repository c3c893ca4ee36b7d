"""TransEvolve (Dutta et al. 2021): attention computed once per block and evolved along depth.

A TransEvolve block of ``L`` layers computes its query/key products once, from the block input
``x⁰`` (eq. 6), and at depth ``l`` only adds a cheap depth-dependent term built from a vector
``T^l`` (eq. 7) before the softmax; the attention is applied to the current tokens without a value
projection (eq. 9). The feed-forward sub-layer is either the usual MLP ("fullFF", eq. 3) or one whose
weights are random rotations evolving with depth around a trainable diagonal (eqs. 10-11,
"randomFF").

Here the block is a field on depth-time ``t ∈ [0, L]``: the layer-``l`` parameters act on
``[l, l + 1)``, while ``T``, and the rotations of the random feed-forward, are functions of the
continuous ``t`` that equal the official code's ``T^l``, ``U^l``, ``V^l`` at ``t = l``. One
Lie-Trotter Euler step per unit of depth (eq. 5) is then exactly the discrete block
``x += Attn_l(x); x += FF_l(x)`` for ``l = 0 .. L-1`` (the code's ``EncoderBlock``; its final
LayerNorm is applied outside the field).

The decoder (eqs. 12-13) adds encoder-decoder attention, built the same way with queries from the
decoder block input and keys from the encoder output: :class:`TransEvolveDecoderField` steps causal
self-attention, cross-attention and feed-forward in turn (the code's ``DecoderBlock``).
"""

from ._attention import TransEvolveAttention
from ._depth import depth_signal
from ._fields import FeedForwardKind, TransEvolveDecoderField, TransEvolveField
from ._modes import AUTO_FACTORED_MAX_TOKENS, TransEvolveMode
from ._random_ff import RandomFeedForward
from ._state import TransEvolveState

__all__ = [
    "TransEvolveField",
    "TransEvolveDecoderField",
    "TransEvolveAttention",
    "RandomFeedForward",
    "TransEvolveState",
    "TransEvolveMode",
    "FeedForwardKind",
    "AUTO_FACTORED_MAX_TOKENS",
    "depth_signal",
]
