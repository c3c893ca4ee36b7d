"""Attention masks: which keys each query may attend (padding, causality), as ``M`` of eq. 9."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _allowed(pad: Tensor | None, causal: bool, n: int, device: torch.device) -> Tensor | None:
    """True where a query may attend a key, ``(*batch, 1, 1 or n, n)``; None when every pair may.

    ``pad`` ``(*batch, m)`` is True at padding keys. A query that may see no key (all keys padding, or
    a padded query under a causal mask) attends to every key instead of producing NaN; its increment is
    zeroed by the caller.
    """
    allowed = None if pad is None else ~pad[..., None, None, :]
    if causal:
        lower = torch.ones(n, n, dtype=torch.bool, device=device).tril()
        allowed = lower if allowed is None else allowed & lower
    return None if allowed is None else allowed | ~allowed.any(dim=-1, keepdim=True)


def _masked(scores: Tensor, allowed: Tensor | None) -> Tensor:
    """``scores + M``: ``-inf`` where a key is not allowed."""
    return scores if allowed is None else scores.masked_fill(~allowed, -math.inf)
