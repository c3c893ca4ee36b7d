"""TransEvolve models (Dutta et al. 2021, §6): encoder, text classifier and encoder-decoder.

A TransEvolve stack is ``B`` blocks of ``L`` layers. Block ``k`` solves the field of
:class:`~neuralode_tf.fields.TransEvolveField` (encoder) or
:class:`~neuralode_tf.fields.TransEvolveDecoderField` (decoder) on depth-time ``[0, L]`` from its
input ``x⁰_k``, whose attention products it computes once (eqs. 6, 12), and ends with a LayerNorm
(the official code's ``output_normalization``):

.. math:: x^0_{k+1} = \\mathrm{LN}_k\\big(x_k(L)\\big), \\qquad \\frac{dx_k}{dt} = f_k(t, x_k; x^0_k),
    \\quad x_k(0) = x^0_k

With the default ``method="lie_trotter"`` and one Euler step per unit of depth-time each block is
the discrete block of the code (``EncoderBlock`` / ``DecoderBlock``). The paper's variants
(§7.1) keep ``B L = 6`` layers per encoder and decoder: ``-1`` is one block of depth 6, ``-2`` two
blocks of depth 3 (:data:`TRANSEVOLVE_VARIANTS`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from ...continuous import ContinuousDepth
from ...fields import TransEvolveDecoderField, TransEvolveField
from ...fields.transevolve import FeedForwardKind, TransEvolveMode
from .decoding import EncoderDecoder
from .text import TokenEmbedding, _masked_pool, _padding

__all__ = [
    "TRANSEVOLVE_VARIANTS",
    "TransEvolveEncoder",
    "TransEvolveDecoder",
    "TransEvolveClassifier",
    "TransEvolveSeq2Seq",
]

TRANSEVOLVE_VARIANTS: dict[str, dict[str, Any]] = {
    "randomFF-1": dict(num_blocks=1, layers_per_block=6, feed_forward="random"),
    "randomFF-2": dict(num_blocks=2, layers_per_block=3, feed_forward="random"),
    "fullFF-1": dict(num_blocks=1, layers_per_block=6, feed_forward="full"),
    "fullFF-2": dict(num_blocks=2, layers_per_block=3, feed_forward="full"),
}
"""The four variants of Table 2 (§7.1): ``num_blocks`` blocks of ``layers_per_block`` layers in the encoder and
in the decoder, random-rotation (eq. 11) or full (eq. 3) feed-forward. Keyword arguments of the models here."""


class _BlockStack(nn.Module):
    """Blocks ``ContinuousDepth(field, t1=L)``, each followed by its LayerNorm, run from their own inputs."""

    def __init__(self, fields: Sequence[nn.Module], dim: int, layers_per_block: int, solve_options: dict[str, Any]):
        super().__init__()
        if not fields:
            raise ValueError("num_blocks must be at least 1")
        solve_options = {"method": "lie_trotter", **solve_options}
        self.blocks = nn.ModuleList(ContinuousDepth(field, t1=layers_per_block, **solve_options) for field in fields)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in fields)

    def _run(self, x: Tensor, **conditioning: Tensor | None) -> Tensor:
        for block, norm in zip(self.blocks, self.norms):
            x = norm(block(x, block_input=x, **conditioning))
        return x


class TransEvolveEncoder(_BlockStack):
    """The TransEvolve encoder: ``num_blocks`` blocks of :class:`~neuralode_tf.fields.TransEvolveField`.

    Block ``k`` maps ``x⁰_k`` to ``LN_k(x_k(L))`` with ``dx/dt = Attn(t, x; x⁰_k) + FF(t, x)`` on
    ``[0, L]`` (eqs. 6, 9 and 11 or 3); see the module docstring.

    Args:
        dim, num_heads: Width ``d`` and heads ``H``.
        num_blocks: ``B``, blocks whose attention products are computed afresh.
        layers_per_block: ``L``, depth of each block.
        feed_forward: ``"random"`` (TransEvolve-randomFF) or ``"full"`` (TransEvolve-fullFF).
        mode: Evaluation mode of the attention (:data:`~neuralode_tf.fields.transevolve.TransEvolveMode`).
        mlp_hidden: Hidden width of the feed-forward layers (default ``4 d``).
        causal: Causal self-attention.
        time_scale: ``s`` of :func:`~neuralode_tf.fields.transevolve.depth_signal`.
        **solve_options: Solve settings of every block's :class:`~neuralode_tf.ContinuousDepth`
            (``method``, ``steps``, ...); the default, ``lie_trotter`` with unit steps, is the discrete block.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        num_blocks: int = 2,
        layers_per_block: int = 3,
        feed_forward: FeedForwardKind = "random",
        mode: TransEvolveMode = "auto",
        *,
        mlp_hidden: int | None = None,
        causal: bool = False,
        time_scale: float = 64.0,
        **solve_options: Any,
    ):
        make_field = functools.partial(
            TransEvolveField, feed_forward=feed_forward, mlp_hidden=mlp_hidden, mode=mode, time_scale=time_scale
        )
        fields = [make_field(dim, num_heads, layers_per_block, causal=causal) for _ in range(num_blocks)]
        super().__init__(fields, dim, layers_per_block, solve_options)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Encode ``x`` ``(*batch, n, dim)``; ``key_padding_mask`` ``(*batch, n)`` is True at padding."""
        return self._run(x, key_padding_mask=key_padding_mask)


class TransEvolveDecoder(_BlockStack):
    """The TransEvolve decoder: ``num_blocks`` blocks of :class:`~neuralode_tf.fields.TransEvolveDecoderField`.

    Block ``k`` maps ``y⁰_k`` to ``LN_k(y_k(L))`` with
    ``dy/dt = SelfAttn(t, y; y⁰_k) + CrossAttn(t; y⁰_k, m) + FF(t, y)`` on ``[0, L]`` (eqs. 12-13),
    ``m`` the encoder output. Causal in the target positions.

    Args:
        dim, num_heads, num_blocks, layers_per_block, feed_forward, mode, mlp_hidden, time_scale,
            **solve_options: As in :class:`TransEvolveEncoder`.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        num_blocks: int = 2,
        layers_per_block: int = 3,
        feed_forward: FeedForwardKind = "random",
        mode: TransEvolveMode = "auto",
        *,
        mlp_hidden: int | None = None,
        time_scale: float = 64.0,
        **solve_options: Any,
    ):
        make_field = functools.partial(
            TransEvolveDecoderField, feed_forward=feed_forward, mlp_hidden=mlp_hidden, mode=mode, time_scale=time_scale
        )
        fields = [make_field(dim, num_heads, layers_per_block) for _ in range(num_blocks)]
        super().__init__(fields, dim, layers_per_block, solve_options)

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
    ) -> Tensor:
        """Decode ``y`` ``(B, T, dim)`` given the encoder output ``memory`` ``(B, S, dim)``; masks: True at padding."""
        return self._run(
            y, key_padding_mask=key_padding_mask, memory=memory, memory_key_padding_mask=memory_key_padding_mask
        )


class TransEvolveClassifier(nn.Module):
    """Encoder-only TransEvolve for sequence classification (§6, "Encoder-only"; the code's ``ClassificationModel``).

    .. math:: \\mathrm{logits} = W\\, \\mathrm{LN}\\big(\\mathrm{mean}_p\\, \\mathrm{Enc}(x)_p\\big) + b,
        \\qquad x_p = \\sqrt{d}\\, E[\\mathrm{token}_p] + PE_p

    with :class:`TransEvolveEncoder` and :class:`~neuralode_tf.models.frontends.text.TokenEmbedding`. The mean runs
    over the real tokens, so padding never changes the logits; ``include_padding_in_pool=True``
    averages over every position as the official code does (``reduce_mean`` over the sequence).
    The head gives ``num_classes`` logits (the code uses one sigmoid output when ``num_classes <= 2``);
    ``forward = forward_head(forward_features(...))`` as in timm, the features being the pooled ``(B, dim)``.

    Args:
        vocab_size: Number of token ids; id :data:`~neuralode_tf.models.PAD` (0) is padding.
        num_classes: Number of output classes.
        dim, num_heads, num_blocks, layers_per_block, feed_forward: As in :class:`TransEvolveEncoder`
            (the paper's small version: ``dim=256``, 8 heads).
        include_padding_in_pool: Average padding positions too.
        **encoder: Further settings of :class:`TransEvolveEncoder` (``mode``, ``mlp_hidden``, solve settings).
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        dim: int = 64,
        num_heads: int = 4,
        num_blocks: int = 2,
        layers_per_block: int = 3,
        feed_forward: FeedForwardKind = "random",
        *,
        include_padding_in_pool: bool = False,
        **encoder: Any,
    ):
        super().__init__()
        self.include_padding_in_pool = include_padding_in_pool
        self.embed = TokenEmbedding(vocab_size, dim)
        self.encoder = TransEvolveEncoder(dim, num_heads, num_blocks, layers_per_block, feed_forward, **encoder)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward_features(self, tokens: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """The pooled features ``LN(mean_p Enc(x)_p)`` ``(B, dim)`` of ``tokens`` ``(B, L)``; ``key_padding_mask``
        ``(B, L)`` is True at padding and defaults to ``tokens == PAD``."""
        key_padding_mask = _padding(tokens, key_padding_mask, "tokens", "key_padding_mask")
        x = self.encoder(self.embed(tokens, key_padding_mask), key_padding_mask=key_padding_mask)
        return self.norm(_masked_pool(x, None if self.include_padding_in_pool else key_padding_mask, "mean"))

    def forward_head(self, features: Tensor) -> Tensor:
        """Logits ``(B, num_classes)`` of the pooled features."""
        return self.head(features)

    def forward(self, tokens: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; ``tokens`` and ``key_padding_mask`` as in :meth:`forward_features`."""
        return self.forward_head(self.forward_features(tokens, key_padding_mask))


class TransEvolveSeq2Seq(EncoderDecoder):
    """The TransEvolve encoder-decoder (§6, "Encoder-decoder"; the code's ``EncoderDecoderModel``).

    .. math::

        m = \\mathrm{Enc}\\big(\\sqrt{d}\\, E[src] + PE\\big), \\qquad
        \\mathrm{logits} = \\mathrm{Dec}\\big(\\sqrt{d}\\, E[tgt_{in}] + PE;\\; m\\big)\\, E^\\top

    with :class:`TransEvolveEncoder` and :class:`TransEvolveDecoder` (each ends with its last
    block's LayerNorm, so there is no further final norm) and **one** embedding table ``E`` for
    source, target and the output softmax (shared vocabulary, tied three ways as in the code; no
    output bias). Teacher forcing, :meth:`score`, :meth:`greedy_decode` and :meth:`beam_search`
    come from :class:`~neuralode_tf.models.EncoderDecoder`; the decoder is recomputed for
    the whole prefix at every step (as the code does: no key/value cache). Id
    :data:`~neuralode_tf.models.PAD` (0) is padding; ``bos`` and ``eos`` are chosen by the caller.

    Args:
        vocab_size: Size of the shared vocabulary (``PAD`` included).
        dim, num_heads: Width and heads (the paper's base version: 512 and 8).
        num_blocks, layers_per_block, feed_forward: Of the encoder and of the decoder
            (:data:`TRANSEVOLVE_VARIANTS`).
        **stack: Further settings of both stacks (``mode``, ``mlp_hidden``, ``time_scale``, solve settings).

    The parameter count is ``sum(p.numel() for p in model.parameters())`` (``E`` counts once).
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int = 64,
        num_heads: int = 4,
        num_blocks: int = 2,
        layers_per_block: int = 3,
        feed_forward: FeedForwardKind = "random",
        **stack: Any,
    ):
        super().__init__()
        sizes = (dim, num_heads, num_blocks, layers_per_block, feed_forward)
        self.embed = TokenEmbedding(vocab_size, dim)
        self.encoder = TransEvolveEncoder(*sizes, **stack)
        self.decoder = TransEvolveDecoder(*sizes, **stack)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        self.output.weight = self.embed.weight

    def _apply(self, fn: Any, recurse: bool = True) -> TransEvolveSeq2Seq:
        # A conversion that cannot happen in place (e.g. .to() an XLA device) gives each submodule its own
        # new Parameter, which would untie the output projection from the embedding table: re-tie it.
        super()._apply(fn, recurse)
        self.output.weight = self.embed.weight
        return self

    def encode(self, src: Tensor, src_key_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, dim)`` of ``src`` ``(B, S)`` and its padding mask (default ``src == PAD``)."""
        src_key_padding_mask = _padding(src, src_key_padding_mask, "src", "src_key_padding_mask")
        return self.encoder(self.embed(src, src_key_padding_mask), src_key_padding_mask), src_key_padding_mask

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_key_padding_mask: Tensor, tgt_key_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Next-token logits ``(B, T, vocab)`` at every position of ``tgt_in`` ``(B, T)``, given the memory."""
        tgt_key_padding_mask = _padding(tgt_in, tgt_key_padding_mask, "tgt_in", "tgt_key_padding_mask")
        y = self.decoder(self.embed(tgt_in, tgt_key_padding_mask), memory, tgt_key_padding_mask, src_key_padding_mask)
        return self.output(y)
