"""The exact paths of TransEvolve attention at depth ``t``: eq. 9 with the logits of eq. 6, three ways.

Per head, with ``T = T(t)`` (eq. 7) and the values ``V = LN_l(x)`` (``LN_l(m)`` for cross-attention, eq. 13),
eq. 9 applies

.. math:: \\mathrm{softmax}\\big(A_0 + A_1 T^\\top + T A_2 + A_3 (T \\odot T) + M\\big)\\, V
    = \\mathrm{softmax}\\big(A_0 + \\mathbf 1 b^\\top + M\\big)\\, V, \\qquad b_j = (T A_2)_j,

because ``A_1 Tᵀ`` (one value per query) and ``A_3 (T ⊙ T)`` (one per head) are constant along the
softmax (key) axis and cancel. :func:`_fidelity` computes the left side, :func:`_factored` and
:func:`_fused` the right side. Each takes the block state, ``T`` (``(H, d/H)``) and ``V``
(``(*batch, H, m, d/H)``) and returns the heads ``(*batch, H, n, d/H)``.
"""

from __future__ import annotations

import math
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

from ._masks import _allowed, _masked
from ._state import TransEvolveState
from ._tiling import _round_up_8

_T = TypeVar("_T")


def _part(value: _T | None, name: str, state: TransEvolveState) -> _T:
    """``value``, the part ``name`` of ``state`` that a path needs: a state holds the parts of its own mode only."""
    if value is None:
        raise ValueError(
            f"this TransEvolveState (mode {state.mode!r}) has no {name}: prepare it in the mode of the path reading it"
        )
    return value


def _key_bias(state: TransEvolveState, signal: Tensor) -> Tensor:
    """``b_h[j] = K_j · Σ_τ W̃_Q[:, h, τ] T_h[τ]`` (``T A_2`` of eq. 6), shape ``(*batch, H, m)``."""
    direction = torch.einsum("Dht,ht->Dh", state.time_query, signal)
    return (state.keys_full @ direction).transpose(-1, -2)


def _softmax_apply(logits: Tensor, allowed: Tensor | None, values: Tensor) -> Tensor:
    """``softmax(logits + M) V``."""
    return _masked(logits, allowed).softmax(dim=-1) @ values


def _fidelity(state: TransEvolveState, signal: Tensor, values: Tensor) -> Tensor:
    """Eq. 9 with every term of eq. 6 as written: ``softmax(A0 + A1 Tᵀ + T A2 + A3 (T ⊙ T) + M) V``."""
    query_side = torch.einsum("...hit,ht->...hi", _part(state.query_time, "query_time", state), signal)
    both_sides = (_part(state.time_time, "time_time", state) * signal * signal).sum(-1)
    scores = _part(state.scores, "scores", state)
    logits = scores + query_side[..., :, None] + _key_bias(state, signal)[..., None, :] + both_sides[:, None, None]
    return _softmax_apply(logits, state.allowed, values)


def _factored(state: TransEvolveState, signal: Tensor, values: Tensor) -> Tensor:
    """Eq. 9 as ``softmax(A0 + 1 bᵀ + M) V = (E diag(e^b) V) / (E e^b)``, ``E = exp(A0 - max_j A0)`` masked.

    ``E`` comes from the state (computed once per block); each of its tiles takes one matmul with
    ``[e^b ⊙ V, e^b]``, so a layer computes no exponentials over ``n × m``.
    """
    bias = _key_bias(state, signal)
    weighted = _key_weighted(values, _key_weight(state, bias), _round_up_8(values.shape[-1] + 1))
    weighted_sum = torch.cat([tile @ weighted for tile in _part(state.weights, "weights", state)], dim=-2)
    return _normalised(state, weighted_sum, bias, values)


def _fused(state: TransEvolveState, signal: Tensor, values: Tensor) -> Tensor:
    """Eq. 9 as ``softmax(A0 + M) [e^b ⊙ V, e^b]`` by ``scaled_dot_product_attention``, then numerator / denominator.

    The kernel's softmax of ``A0`` times the key weights ``e^b``, renormalised, is ``softmax(A0 + 1 bᵀ + M)``.
    The values are padded to the query/key width: with unequal widths the CPU kernels fall back to the
    math path, which materialises the ``n × m`` weights.
    """
    bias = _key_bias(state, signal)
    queries, keys = _part(state.queries, "queries", state), _part(state.keys, "keys", state)
    weighted = _key_weighted(values, _key_weight(state, bias), queries.shape[-1])
    is_causal = state.causal and state.allowed is None
    weighted_sum = F.scaled_dot_product_attention(
        queries, keys, weighted, attn_mask=state.allowed, is_causal=is_causal, scale=1.0
    )
    return _normalised(state, weighted_sum, bias, values)


def _key_weight(state: TransEvolveState, bias: Tensor) -> Tensor:
    """``e^{b - shift}`` per key, ``(*batch, H, m, 1)``, with ``shift`` the largest bias of a non-padding key.

    So ``e^{b - shift} <= 1`` never overflows. Padding keys get ``e^0 = 1`` (they are masked anyway); a
    sample whose keys are all padding (whose rows attend to every key, see :func:`_allowed`) is shifted as
    if unpadded.
    """
    if state.key_padding_mask is None:
        return torch.exp(bias - bias.amax(dim=-1, keepdim=True).detach()).unsqueeze(-1)
    pad = state.key_padding_mask[..., None, :]
    pad = pad & ~pad.all(dim=-1, keepdim=True)
    shift = bias.masked_fill(pad, -math.inf).amax(dim=-1, keepdim=True).detach()
    return torch.exp((bias - shift).masked_fill(pad, 0.0)).unsqueeze(-1)


def _key_weighted(values: Tensor, key_weight: Tensor, width: int) -> Tensor:
    """``[e^b ⊙ V, e^b]``, zero-padded to ``width`` columns."""
    weighted = torch.cat([values * key_weight, key_weight], dim=-1)
    return F.pad(weighted, (0, width - weighted.shape[-1]))


def _normalised(state: TransEvolveState, weighted_sum: Tensor, bias: Tensor, values: Tensor) -> Tensor:
    """``numerator / denominator`` from the columns of ``weighted_sum = P [e^b ⊙ V, e^b, 0...]``.

    If a row's denominator fell below ``tiny / eps`` of the dtype (its keys' ``e^b`` underflowed, e.g. a
    causal row that cannot see the largest-bias key when ``b`` spans more than ~80), that row, and only
    that row, is recomputed as a plain softmax of ``A0 + b``: the other rows, and so the other samples of
    the batch, keep their own result to the last bit. The check reads one boolean on the host.
    """
    width = values.shape[-1]
    numerator, denominator = weighted_sum[..., :width], weighted_sum[..., width : width + 1]
    info = torch.finfo(denominator.dtype)
    underflow = denominator < info.tiny / info.eps
    if not bool(underflow.any()):
        return numerator / denominator
    scores = _part(state.queries, "queries", state) @ _part(state.keys, "keys", state).transpose(-1, -2)
    allowed = state.allowed
    if allowed is None and state.causal:
        allowed = _allowed(None, True, scores.shape[-2], scores.device)
    softmax = _softmax_apply(scores + bias[..., None, :], allowed, values)
    return torch.where(underflow, softmax, numerator / denominator.masked_fill(underflow, 1.0))
