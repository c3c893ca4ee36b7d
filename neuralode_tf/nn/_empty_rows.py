"""Attention for a query that may see no key: zero weights, hence a zero output (before the output projection).

A softmax over an empty set of keys has no value. The library gives every attention kind one meaning for it: the
query's attention weights are all zero, so its attention output ``Σ_j a_ij v_j`` is the zero vector. This is what
:func:`torch.nn.functional.scaled_dot_product_attention` returns for a fully masked row since torch 2.5, and
therefore what Hugging Face models give with their default ``sdpa`` attention in transformers 5 (their ``eager``
attention, which adds a large negative number instead of ``-inf``, and transformers 4.52's on the CPU, average the
values uniformly instead). Such queries arise from a
row that is entirely padding, from a left-padded query under a causal mask, or a sliding window over padding.

The functions below compute it explicitly, so no kernel ever sees a fully masked row (the kernels that return
NaN for one, and the gradients through them, never come into play): the row is unmasked for the kernel, and its
output is set to zero after it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch.nn.functional as F
from torch import Tensor


class SdpaMask(NamedTuple):
    """A bool mask ready for the kernel: ``allowed`` with every fully masked row unmasked, and ``blind``, the
    queries ``(*batch, 1, n_q, 1)`` that may see no key (their outputs are set to zero after the kernel)."""

    allowed: Tensor
    blind: Tensor

    @property
    def blocked(self) -> Tensor:
        """The keys each query may not see (all of them for a blind query), for :func:`softmax_weights`."""
        return ~self.allowed | self.blind


def sdpa_mask(allowed: Tensor) -> SdpaMask:
    """The :class:`SdpaMask` of ``allowed`` (True where query ``i`` may attend to key ``j``, broadcastable to
    ``(*batch, H, n_q, n_k)``); build it once per mask and reuse it across calls."""
    blind = ~allowed.any(dim=-1, keepdim=True)
    return SdpaMask(allowed | blind, blind)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: SdpaMask | None, **sdpa_options: Any) -> Tensor:
    """:func:`~torch.nn.functional.scaled_dot_product_attention` under ``mask`` (``None``: no mask), with a zero
    output for a query that may see no key."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, **sdpa_options)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.allowed, **sdpa_options)
    return out.masked_fill(mask.blind, 0.0)


def softmax_weights(scores: Tensor, blocked: Tensor | None) -> Tensor:
    """``softmax(scores + M)`` over the last dimension, ``M = -inf`` where ``blocked``; all zero in a row whose
    keys are all blocked."""
    if blocked is None:
        return scores.softmax(-1)
    empty = blocked.all(dim=-1, keepdim=True)
    return scores.masked_fill(blocked & ~empty, -float("inf")).softmax(-1).masked_fill(empty, 0.0)
