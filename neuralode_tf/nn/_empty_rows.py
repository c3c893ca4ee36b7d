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

from typing import Any

import torch.nn.functional as F
from torch import Tensor


def attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, **sdpa_options: Any) -> Tensor:
    """:func:`~torch.nn.functional.scaled_dot_product_attention` under the bool mask ``allowed`` (True where query
    ``i`` may attend to key ``j``, broadcastable to ``(*batch, H, n_q, n_k)``; ``None``: no mask), with a zero
    output for a query that may see no key."""
    if allowed is None:
        return F.scaled_dot_product_attention(q, k, v, **sdpa_options)
    empty = ~allowed.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | empty, **sdpa_options)
    return out.masked_fill(empty, 0.0)


def softmax_weights(scores: Tensor, blocked: Tensor | None) -> Tensor:
    """``softmax(scores + M)`` over the last dimension, ``M = -inf`` where ``blocked``; all zero in a row whose
    keys are all blocked."""
    if blocked is None:
        return scores.softmax(-1)
    empty = blocked.all(dim=-1, keepdim=True)
    return scores.masked_fill(blocked & ~empty, -float("inf")).softmax(-1).masked_fill(empty, 0.0)
