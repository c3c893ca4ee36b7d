"""Evolving attention (Wang et al. 2021) added to a converted post-LN encoder (BERT, RoBERTa, ELECTRA, DistilBERT,
ALBERT), EA-BERT (§4.2), read as an ODE on the augmented state ``(x, A)``: :func:`from_transformers` ``(model,
evolving=dict(alpha=..., beta=...))``.

**The discrete model.** EA-BERT keeps the checkpoint's blocks and adds, between consecutive blocks, an ``H → H``
``k × k`` convolution over the heads' attention logit maps (§4.2: initialised randomly, trained jointly with the
pretrained parameters). Block ``m`` of ``L`` (post-LN, :mod:`~neuralode_tf.models.converters.huggingface.bert`) computes
the logits ``S_m(x) = s q_m(x) k_m(x)ᵀ`` of its own attention and

.. math::

    L_0(A, x) &= S_0(x), \\\\
    L_m(A, x) &= \\beta\\, \\mathrm{ReLU}\\big(\\mathrm{Conv}_m(Z)\\big) + (1 - \\beta)\\, A_{\\mathrm{in}},
        \\quad A_{\\mathrm{in}} = \\alpha A + (1 - \\alpha)\\, S_m(x), \\qquad m = 1, \\dots, L - 1, \\\\
    x' &= N_1\\big(x + W_o\\, [\\mathrm{softmax}(L_{m,h} + M)\\, V_h]_h\\big), \\qquad
    x'' = N_2\\big(x' + F(x')\\big), \\qquad A \\leftarrow L_m(A, x)

(eq. 4 with the paper's ``α``, the weight of the previous logits, and ``β``, that of the convolution:
:func:`~neuralode_tf.nn.evolving.evolve_logits`; eq. 5 for the values), where ``A`` is the previous block's ``L``,
``Z`` is ``A_in`` with the rows and columns of padded tokens set to 0 and ``M`` is ``-inf`` at padded keys. **The
first block is the checkpoint's**: it has no previous map, so it has no convolution and no mixing, as in the
released code, which skips the rule where there is no previous map; an encoder of ``L`` blocks gains ``L - 1``
convolutions of ``H² k² + H`` parameters each. With ``α = β = 0`` every block is the checkpoint's, exactly.

**The encoders.** The rule carries block ``m - 1``'s logits into block ``m`` wherever consecutive blocks are
bidirectional self-attention over the same tokens, as in all five: BERT's blocks (RoBERTa's and ELECTRA's are the same
modules), DistilBERT's (``q_lin``, ``k_lin``, ``v_lin``, ``out_lin``) and ALBERT's. ALBERT applies ONE shared layer in
every block; its EA model keeps that layer's parameters shared (every block's queries, keys, values and output
projection are the same modules) and adds the ``L - 1`` convolutions per block, between consecutive applications of
the shared layer, as the paper adds one between consecutive blocks: they are the only parameters that differ from
block to block, so the EA field depends on depth-time through them alone and, unlike ALBERT's own field, jumps at the
integer times.

**Masks.** Padded tokens never reach a real one: their rows and columns are 0 in the convolution's input, their
keys ``-inf`` in the softmax after it, and 0 in the carried map (as in
:class:`~neuralode_tf.nn.EvolvingAttentionBranch`). A padded query keeps its skip term ``(1 - β) A_in`` in the
softmax, so that with ``α = β = 0`` its row is the checkpoint's too (Hugging Face computes padded positions, and
left padding puts BERT's pooled first token there). Hugging Face's dropout on the attention probabilities applies
in training mode.

**As an ODE.** Consecutive blocks keep the state's shape, so the blocks with their carried logits are the library's
augmented-state reading of evolving attention (:class:`~neuralode_tf.fields.EvolvingAttentionField`) around BERT's
post-norm parts (:class:`~neuralode_tf.models.converters.huggingface.PostNorm`): on ``[m, m + 1)``

.. math::

    \\frac{dx}{dt} = G_m(x, A) + P_{m,1}(x) + F_m(x) + P_{m,2}(x), \\qquad \\frac{dA}{dt} = L_m(A, x) - A,

with ``G_m(x, A) = W_o [softmax(L_{m,h}(A, x) + M) V_h]_h`` and ``P = N - I``. The attention part moves ``x`` and
``A``, the others ``x`` alone, so one Lie-Trotter Euler step of size 1 per block (the default) is the discrete
model (up to the rounding of ``A + (L - A)``); other methods, step counts and adjoints integrate this ODE, in which
``A`` relaxes towards the evolved logits at rate 1 (the ReLU makes the field piecewise smooth). The state starts at
``A(0) = S_0(x(0))``, the first block's logits of the embedding (0 at padded entries): at rest in the first block,
whose ``L_0`` does not read ``A``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from ....fields import SplitField, WeightSharedField, as_field
from ....fields.evolving import _TokenPart
from ....nn._conditioning import check_padding_mask
from ....nn._empty_rows import softmax_weights
from ....nn.evolving import evolve_logits
from ...readings.stack import stack_encoder
from ._attention import TransformersAttention
from ._family import Family
from .albert import Albert
from .bert import Bert
from .distilbert import DistilBert

__all__ = ["EvolvingTransformersAttention", "EvolvingTransformersStack", "evolving_encoder"]

_KEYS = ("alpha", "beta", "kernel_size")


class EvolvingTransformersAttention(nn.Module):
    """A converted encoder block's attention with evolving logits: ``(x, A) -> (increment, L(A, x))`` (see the
    module docstring for ``L``).

    The queries, keys, values, output projection, scale and attention dropout are those of ``attention`` (the
    Hugging Face block's own modules); the only new parameters are :attr:`conv`'s, ``H·H·k² + H`` of them, created
    on ``attention``'s device and dtype and initialised by :class:`torch.nn.Conv2d` from torch's global random
    state. Padding comes from ``attention``'s ``bind`` (which :class:`~neuralode_tf.ContinuousDepth` calls).

    Args:
        attention: A bidirectional :class:`~neuralode_tf.models.converters.huggingface.TransformersAttention` with
            as many key/value heads as query heads (BERT's, RoBERTa's, ELECTRA's, DistilBERT's, ALBERT's).
        alpha: ``α ∈ [0, 1]``, the weight of the previous block's logits (the paper's α).
        beta: ``β ∈ [0, 1]``, the weight of the convolution (the paper's β).
        kernel_size: ``k``, odd (the paper uses 3, with 1 and 5 as ablations).
        first: The first block, which has no previous map: no convolution, ``L = S`` (``alpha`` and ``beta`` are
            then not used).

    Attributes:
        conv: The ``H → H`` ``k × k`` convolution over the heads' logit maps, ``None`` in the first block.

    Raises:
        TypeError: ``attention`` is causal, windowed or grouped-query (a decoder's).
        ValueError: ``alpha`` or ``beta`` outside ``[0, 1]``, or ``kernel_size`` not a positive odd integer.
    """

    conv: nn.Conv2d | None

    def __init__(
        self, attention: TransformersAttention, *, alpha: float, beta: float, kernel_size: int = 3, first: bool = False
    ):
        super().__init__()
        if attention.causal or attention.window is not None or attention.num_kv_heads != attention.num_heads:
            raise TypeError(
                f"evolving attention is added to bidirectional encoder attention; {type(attention).__name__} is "
                "causal, windowed or grouped-query"
            )
        for name, value in (("alpha", alpha), ("beta", beta)):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if isinstance(kernel_size, bool) or not (isinstance(kernel_size, int) and kernel_size > 0 and kernel_size % 2):
            raise ValueError(f"kernel_size must be a positive odd integer, got {kernel_size!r}")
        self.attention = attention
        self.alpha, self.beta, self.kernel_size, self.first = float(alpha), float(beta), kernel_size, first
        reference = next(attention.parameters())
        heads = attention.num_heads
        self.conv = None if first else nn.Conv2d(heads, heads, kernel_size).to(reference.device, reference.dtype)

    def forward(self, x: Tensor, prev: Tensor) -> tuple[Tensor, Tensor]:
        """The increment ``W_o [softmax(L_h + M) V_h]_h`` (attention dropout in training mode) and ``L(A, x)``,
        0 at the entries of padded tokens; ``prev`` is ``A`` ``(B, H, n, n)``."""
        mask = self.attention.attention_mask(x)
        scores, v = self._scores(x)
        hidden = self._hidden(x)
        logits = scores
        if self.conv is not None:
            logits = evolve_logits(prev, scores, self.conv, alpha=self.alpha, beta=self.beta, hidden=hidden)
        weights = softmax_weights(logits, None if mask is None else mask.blocked)
        weights = F.dropout(weights, self.attention.dropout, self.training)
        increment = self.attention.out((weights @ v).transpose(-3, -2).flatten(-2))
        return increment, logits if hidden is None else logits.masked_fill(hidden, 0.0)

    def initial_logits(self, x: Tensor) -> Tensor:
        """``S(x) = s q(x) k(x)ᵀ`` ``(B, H, n, n)``, 0 at the entries of padded tokens: the map ``A(0)``."""
        scores, _ = self._scores(x)
        hidden = self._hidden(x)
        return scores if hidden is None else scores.masked_fill(hidden, 0.0)

    def _scores(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The logits ``S(x) = s q kᵀ`` ``(B, H, n, n)`` and the values ``(B, H, n, d_h)``."""
        q, k, v = self.attention.qkv(x)
        return self.attention.scale * (q @ k.transpose(-2, -1)), v

    def _hidden(self, x: Tensor) -> Tensor | None:
        """The entries ``(B, 1, n, n)`` of a padded query or key, or ``None`` without padding."""
        padding = self.attention.key_padding_mask
        check_padding_mask(padding, "key_padding_mask", x.shape[:-1], "x", bound=True)
        return None if padding is None else padding[..., None, :, None] | padding[..., None, None, :]

    def extra_repr(self) -> str:
        if self.first:
            return "first=True (no previous map: the block's own logits)"
        return f"alpha={self.alpha}, beta={self.beta}, kernel_size={self.kernel_size}"


class EvolvingTransformersStack(WeightSharedField):
    """The blocks of an EA encoder as one field on the augmented state ``(x, A)`` over ``[0, L]``: block ``m``'s
    layer is a :class:`~neuralode_tf.fields.SplitField` whose first part, ``(G_m(x, A), L_m(A, x) - A)``, is its
    :class:`EvolvingTransformersAttention` and whose other parts (post-norms, feed-forward) move ``x`` alone (the
    module docstring has the ODE). ``initial_state(x) = (x, S_0(x))`` and ``final_state((x, A)) = (x, None)``, so
    :class:`~neuralode_tf.ContinuousDepth` takes and returns the tokens.

    Args:
        blocks: Per block, its :class:`EvolvingTransformersAttention` followed by its other parts, in stepping order.
    """

    attentions: list[EvolvingTransformersAttention]

    def __init__(self, blocks: Sequence[Sequence[nn.Module]]):
        attentions, layers = [], []
        for block in blocks:
            attention = block[0] if block else None
            if not isinstance(attention, EvolvingTransformersAttention):
                raise TypeError(
                    "EvolvingTransformersStack takes blocks that start with an EvolvingTransformersAttention"
                )
            attentions.append(attention)
            layers.append(SplitField(_LogitsPart(attention), *(_TokenPart(as_field(part)) for part in block[1:])))
        super().__init__(layers, len(layers))
        self.attentions = attentions  # plain list: registered once, through the parts

    def initial_state(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(x, S_0(x))``: the tokens and the first block's logits (0 at padded entries)."""
        return x, self.attentions[0].initial_logits(x)

    def final_state(self, y: tuple[Tensor, Tensor]) -> tuple[Tensor, None]:
        """The tokens at the end, and no regularisation term."""
        return y[0], None


class _LogitsPart(nn.Module):
    """``(t, (x, A)) -> (G(x, A), L(A, x) - A)``: the attention part, moving the tokens and the carried map."""

    def __init__(self, attention: EvolvingTransformersAttention):
        super().__init__()
        self.attention = attention

    def forward(self, t: Tensor, y: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        x, prev = y
        increment, logits = self.attention(x, prev)
        return increment, logits - prev


def evolving_encoder(
    family: Family, base: Any, sets: Sequence[Sequence[nn.Module]], evolving: Any, **solve_options: Any
) -> nn.Module:
    """The :class:`~neuralode_tf.ContinuousDepth` of :class:`EvolvingTransformersStack` over the converted blocks
    ``sets`` of ``base`` (default: one Lie-Trotter Euler step per block, the discrete EA model), with the settings
    ``evolving``: ``alpha``, ``beta`` (required) and ``kernel_size`` (default 3). The convolutions are created block
    after block, from block 1 on.

    Raises:
        TypeError: ``base`` is none of those encoders, or ``evolving`` is no mapping of those keys.
        ValueError: a value out of range, or a ``transport_cost`` (the state carries logit maps).
    """
    if not isinstance(family, (Bert, DistilBert, Albert)):
        raise TypeError(
            f"evolving attention is added to BERT and RoBERTa encoders, not to {type(base).__name__} (it reads the "
            "post-LN encoders BERT, RoBERTa, ELECTRA, DistilBERT and ALBERT)"
        )
    if not isinstance(evolving, Mapping) or not set(evolving) <= set(_KEYS) or not {"alpha", "beta"} <= set(evolving):
        raise TypeError(
            f"evolving must be a mapping with alpha and beta (and optionally kernel_size), e.g. "
            f"dict(alpha=0.1, beta=0.1, kernel_size=3); got {evolving!r}"
        )
    if solve_options.get("transport_cost") is not None:
        raise ValueError("transport_cost is not supported with evolving attention (its state carries logit maps)")
    blocks = []
    for index, (attention, *rest) in enumerate(sets):
        if not isinstance(attention, TransformersAttention):
            raise TypeError(f"block {index} of {type(base).__name__} starts with no TransformersAttention")
        blocks.append((EvolvingTransformersAttention(attention, **evolving, first=index == 0), *rest))
    return stack_encoder(EvolvingTransformersStack(blocks), len(blocks), **solve_options)
