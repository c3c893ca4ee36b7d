"""Depth-time: the depth vector ``T(t)`` of eq. 7, and the one scalar time a TransEvolve evaluation takes."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def depth_signal(t: float | Tensor, coeffs: Tensor, num_heads: int, time_scale: float = 64.0) -> Tensor:
    """The depth vector ``T(t)`` of eq. 7, per head.

    .. math::

        T(t) = c \\odot \\big[\\sin(\\omega_0 t), \\dots, \\sin(\\omega_{d/2-1} t),\\;
                              \\cos(\\omega_0 t), \\dots, \\cos(\\omega_{d/2-1} t)\\big],
        \\qquad \\omega_p = \\frac{\\pi p}{s},

    sines and cosines concatenated (not interleaved), reshaped to ``(num_heads, d / num_heads)``, so
    head ``h`` gets entries ``h d/H .. (h+1) d/H - 1``. This is the official code's ``_time_signal``
    with ``s = 64`` and ``p = 0 .. d/2 - 1``; at integer ``t = l`` it is the code's ``T^l`` (``l``
    counting layers from 0 within a block). Eq. 7 writes the same Fourier features with
    ``p = 1 .. d/2``, ``l = 1 .. L`` and ``ω_p = p / P``, ``P = d L / (2π)``, i.e. ``s = d L / 2``.

    Args:
        t: Depth-time, any real number (0-dim tensor or float).
        coeffs: The learnable amplitudes ``c`` of one layer, shape ``(d,)`` with ``d`` even.
        num_heads: ``H``; must divide ``d``.
        time_scale: ``s``, the time scale of the frequencies (the code's hard-coded 64).
    """
    half = coeffs.shape[-1] // 2
    rate = torch.as_tensor(t, dtype=coeffs.dtype, device=coeffs.device) * (math.pi / time_scale)
    angles = rate * torch.arange(half, dtype=coeffs.dtype, device=coeffs.device)
    return (torch.cat([angles.sin(), angles.cos()]) * coeffs).reshape(num_heads, -1)


def _scalar_time(t: Tensor | float) -> float:
    """``t`` as a float: every TransEvolve part takes one depth-time per evaluation."""
    if isinstance(t, Tensor):
        if t.numel() != 1:
            raise ValueError(
                "TransEvolve fields take one depth-time per evaluation; per-sample times (torchode's per_sample) "
                f"are not supported, got t of shape {tuple(t.shape)}"
            )
        return float(t.detach())
    return float(t)
