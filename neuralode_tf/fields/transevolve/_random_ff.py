"""TransEvolve-randomFF (eqs. 10-11): a feed-forward layer whose weights are random rotations evolving with depth."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._depth import _scalar_time


def _rotation(freqs: Tensor, t: float, size: int, cols: int) -> Tensor:
    """The leading ``rows × cols`` block of the random rotation ``R(t)`` of size ``size`` (eq. 10).

    ``R(t)[i] = [sin(θ_i0), ..., sin(θ_i,m/2-1), cos(θ_i0), ..., cos(θ_i,m/2-1)] / sqrt(m)`` with
    ``θ_ip = (π t / m) p w_ip`` and ``m = size``; ``freqs`` holds ``w`` for the leading rows and for
    the columns ``p`` that the block needs.
    """
    half = size // 2
    p = torch.arange(freqs.shape[1], dtype=freqs.dtype, device=freqs.device)
    angles = freqs * (p * (math.pi * t / size))
    blocks = [angles[:, : min(cols, half)].sin()]
    if cols > half:
        blocks.append(angles[:, : cols - half].cos())
    return torch.cat(blocks, dim=-1) / math.sqrt(size)


class _RandomProjection(nn.Module):
    """``h ↦ h U(t) Σ V(t) + β``: one projection of eq. 11, ``U`` (``in × in``) and ``V`` (``out × out``)
    random rotations (eq. 10), ``Σ`` rectangular diagonal with ``k = min(in, out)`` trainable entries.

    ``Σ`` reaches only the first ``k`` columns of ``U`` and rows of ``V``, so only those frequencies
    are drawn and stored, and ``W = U Σ V`` is never formed.
    """

    u_freqs: Tensor
    v_freqs: Tensor

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        if in_dim % 2 or out_dim % 2:
            raise ValueError(f"random projections need even sizes, got {in_dim} -> {out_dim}")
        self.in_dim, self.out_dim = in_dim, out_dim
        rank = min(in_dim, out_dim)
        self.register_buffer("u_freqs", torch.randn(in_dim, min(rank, in_dim // 2)) * in_dim)
        self.register_buffer("v_freqs", torch.randn(rank, out_dim // 2) * out_dim)
        bound = math.sqrt(6.0 / rank)
        self.svals = nn.Parameter(torch.empty(rank).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, h: Tensor, t: float) -> Tensor:
        rank = self.svals.shape[0]
        u = _rotation(self.u_freqs, t, self.in_dim, rank)
        v = _rotation(self.v_freqs, t, self.out_dim, self.out_dim)
        return (h @ u * self.svals) @ v + self.bias


class RandomFeedForward(nn.Module):
    """TransEvolve-randomFF, one layer (eqs. 10-11): ``x ↦ P_2(t, ReLU(P_1(t, LN(x))))``, no skip.

    Each projection is ``P(t, h) = h U(t) Σ V(t) + β`` from ``in`` to ``out`` features with

    .. math:: U(t)_{i,:} = \\frac{1}{\\sqrt{m}} \\big[\\sin(\\theta_{i,p}), \\; \\cos(\\theta_{i,p})\\big]_{p=0..m/2-1},
              \\qquad \\theta_{i,p} = \\frac{\\pi t}{m}\\, p\\, w_{i,p}, \\qquad w_{i,p} \\sim \\mathcal N(0, m^2),

    ``m = in`` for ``U`` and ``m = out`` for ``V`` (each with its own draws), and ``Σ`` rectangular
    diagonal. Trainable: the ``min(in, out)`` entries of ``Σ`` (``svals``, uniform
    ``±sqrt(6/min(in, out))`` as in the code), the biases ``β`` (zeros) and the pre-LayerNorm; the
    frequencies ``w`` are fixed and registered as **buffers**, so they are saved in ``state_dict``
    (the official code keeps them outside its checkpoints).

    Conventions (official ``TemporalProjection`` vs paper). Both draw ``w`` with standard
    deviation ``m`` (the paper's ``N(0, d²)``). Normalisation: the code divides **both** ``U`` and
    ``V`` by ``sqrt(out)``; this follows the paper, ``1/sqrt(m)`` for an ``m × m`` matrix (each
    projection's weight then differs from the code's by the constant ``sqrt(out/in)``, which ``Σ``
    absorbs; only the effective initial scale changes). Frequencies
    follow the code, ``(π t / m) p`` with ``p`` and the layer index from 0, so integer ``t`` gives the
    code's ``U^t``, ``V^t`` up to that normalisation; eq. 10 has ``t / P``, ``P = m L / (2π)``, with
    ``p`` and layers counted from 1. The code's ``svals`` has ``in`` entries of which only
    ``min(in, out)`` are used; here it has ``min(in, out)``. Activation: ReLU, as in the code.

    Consequences of the code's indexing, kept here: at ``t = 0`` every row of ``U`` and ``V`` is
    ``[0, ..., 0, 1, ..., 1]/sqrt(m)`` (rank one), and the second projection (``hidden → d`` with
    ``hidden >= 2d``) reaches only sine columns of its ``U``, so at ``t = 0`` its weight is exactly
    zero and the layer outputs its bias (the paper's layers, counted from 1, never reach ``t = 0``).
    Between integers the rotations oscillate fast (``dθ_ip/dt = π p w_ip / m`` has standard
    deviation ``π p``, up to ``π m / 2``), so the field is meant for unit steps, not refinement.

    Args:
        dim: ``d`` (even).
        mlp_hidden: Hidden width (default ``4 d``, even).
    """

    def __init__(self, dim: int, mlp_hidden: int | None = None):
        super().__init__()
        mlp_hidden = 4 * dim if mlp_hidden is None else mlp_hidden
        self.norm = nn.LayerNorm(dim)
        self.expand = _RandomProjection(dim, mlp_hidden)
        self.contract = _RandomProjection(mlp_hidden, dim)

    def forward(self, t: Tensor | float, x: Tensor) -> Tensor:
        """``P_2(t, ReLU(P_1(t, LN(x))))`` at depth-time ``t``."""
        time = _scalar_time(t)
        return self.contract(torch.relu(self.expand(self.norm(x), time)), time)
