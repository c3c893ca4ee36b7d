"""The per-block state of TransEvolve attention: what eq. 6 computes once from the block input."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class TransEvolveState:
    """What a block computes once from its input ``x⁰`` and every layer of the block reuses.

    With ``D = 2d`` (augmented width, see :class:`TransEvolveAttention`), ``Q = x⁰ W_{Q,x}ᵀ`` and
    ``K = s W_{K,x}ᵀ`` of shape ``(*batch, n, D)`` and ``(*batch, m, D)``, where the key source
    ``s`` is ``x⁰`` (self-attention, ``m = n``) or the encoder output (cross-attention), ``W̃_Q``,
    ``W̃_K`` the time columns reshaped to ``(D, H, d/H)``, and per-head slices ``Q_h``, ``K_h`` of
    width ``D/H`` (below, ``j`` runs over the ``m`` keys, ``i`` over the ``n`` queries):

    * ``keys_full``, ``(*batch, m, D)``: ``K``, and ``time_query``, ``(D, H, d/H)``: ``W̃_Q``. The
      depth-``t`` key bias (code: ``A1K`` times ``T``; paper: ``A_2``) is
      ``b_h[j] = K_j · Σ_τ W̃_Q[:, h, τ] T_h[τ](t)``, one ``(m × D)(D × H)`` product per
      evaluation. Every mode uses it.
    * ``scores`` (``A0``), ``(*batch, H, n, m)``: ``Q_h K_hᵀ / sqrt(D/H)``, unmasked, and
      ``query_time`` (``A1Q``; paper ``A_1``), ``(*batch, H, n, d/H)``: ``Q_i · W̃_K[:, h, τ]``, and
      ``time_time`` (``A2``; paper ``A_3``), ``(H, d/H)``: ``Σ_D W̃_Q[D, h, τ] W̃_K[D, h, τ]``.
      Fidelity only: the last two terms are constant along the softmax axis and cancel.
    * ``queries``, ``(*batch, H, n, P)``: ``Q_h / sqrt(D/H)``, and ``keys``, ``(*batch, H, m, P)``:
      ``K_h``, both zero-padded to ``P``, the next multiple of 8. Factored and fused.
    * ``weights``: ``E = exp(A0 - max_j A0)`` over the allowed keys, 0 elsewhere, as a tuple of row
      tiles ``(*batch, H, r, m)`` of at most 8 MiB each. Factored only.

    ``mode`` is the exact path the state serves: ``"fidelity"``, ``"factored"`` or ``"fused"``.
    ``allowed`` is a boolean mask, True where a query may attend a key, broadcastable to
    ``(*batch, H, n, m)``, or None when all may; in fused mode a causal mask without padding is left
    to ``scaled_dot_product_attention(is_causal=True)`` instead. ``key_padding_mask`` ``(*batch, m)``
    is True at padding keys, ``query_padding_mask`` ``(*batch, n)`` at padding queries, whose
    increment is zeroed (for self-attention both are the tokens' padding). ``memory`` is the encoder
    output for cross-attention, whose LayerNorm gives the values, and None for self-attention.
    ``tokens`` is the shape ``(*batch, n)`` of the block input: the state serves tokens of that shape only.
    """

    mode: str
    causal: bool
    keys_full: Tensor
    time_query: Tensor
    key_padding_mask: Tensor | None
    allowed: Tensor | None
    tokens: tuple[int, ...]
    query_padding_mask: Tensor | None = None
    memory: Tensor | None = None
    scores: Tensor | None = None
    query_time: Tensor | None = None
    time_time: Tensor | None = None
    weights: tuple[Tensor, ...] | None = None
    queries: Tensor | None = None
    keys: Tensor | None = None
