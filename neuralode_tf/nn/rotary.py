"""Rotary position embeddings (Su et al. 2021, RoFormer): queries and keys rotated by angles that grow with position."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["apply_rotary", "rotate"]


def apply_rotary(z: Tensor, start: int = 0, *, base: float = 10_000.0) -> Tensor:
    """``z`` ``(*batch, n, k)`` (per-head queries or keys) with its token at position ``p = start + i`` rotated by
    ``R_p``: channel pair ``(j, j + k/2)`` turned by the angle ``p θ_j``, ``θ_j = base^{-2j/k}``, ``j < k/2``.

    .. math:: R_p z = \\big(z_{:k/2} \\cos(p\\theta) - z_{k/2:} \\sin(p\\theta),\\;
        z_{:k/2} \\sin(p\\theta) + z_{k/2:} \\cos(p\\theta)\\big)

    Rotations compose, ``R_p^\\top R_q = R_{q-p}``, so a query at ``p`` and a key at ``q`` meet in
    ``(R_p q)^\\top (R_q k) = q^\\top R_{q-p} k``: attention scores depend on the relative position only
    (Su et al. 2021, eqs. 16 and 34). The pairs are channels ``j`` and ``j + k/2`` (GPT-NeoX's layout); the
    paper pairs ``2j`` and ``2j + 1``, which is the same model up to a fixed permutation of the head channels
    (of ``W_q`` and ``W_k``'s columns). ``start`` is the position of the first token, e.g. the number of tokens a
    :class:`~neuralode_tf.nn.KVCache` already holds, so a token gets the same rotation whether it is computed with
    its prefix or after it. The angles are computed in float64 and rounded once to ``z``'s dtype.
    """
    k, n = z.shape[-1], z.shape[-2]
    if k % 2:
        raise ValueError(f"rotary positions need an even head width, got {k}")
    half = k // 2
    frequency = base ** (-torch.arange(half, dtype=torch.float64, device=z.device) / half)
    angle = torch.arange(start, start + n, dtype=torch.float64, device=z.device)[:, None] * frequency
    cos, sin = angle.cos().to(z.dtype), angle.sin().to(z.dtype)
    return rotate(z, torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1))


def rotate(z: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The rotation of :func:`apply_rotary` from given angles: the first ``r = cos.shape[-1]`` channels of ``z``,
    halves ``(a, b)``, become ``(a, b) cos + (-b, a) sin`` (``cos``, ``sin``: each angle repeated over both halves,
    broadcast against ``z``); the other channels pass (partial rotary, as GPT-NeoX's ``rotary_pct``). This is
    Hugging Face's layout, so their ``(cos, sin)`` apply as they are."""
    r = cos.shape[-1]
    rotary, rest = (z, None) if r == z.shape[-1] else (z[..., :r], z[..., r:])
    first, second = rotary.chunk(2, dim=-1)
    out = rotary * cos + torch.cat((-second, first), dim=-1) * sin
    return out if rest is None else torch.cat((out, rest), dim=-1)
