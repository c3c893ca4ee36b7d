"""Layout helpers of the fast paths: head widths padded to multiples of 8, and ``E = exp(A0 - max A0)`` in tiles."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

_TILE_BYTES = 8 * 2**20
"""Size of one tile of the factored weights ``E``. glibc serves allocations above 32 MiB with fresh
``mmap`` pages that fault on first touch every time, which made the backward pass of an untiled
``E`` (one ``n × n`` gradient per layer) 3x slower at n = 1k; tiles this small are reused from the heap."""


def _round_up_8(size: int) -> int:
    return size + (-size % 8)


def _pad_to_8(z: Tensor) -> Tensor:
    """Zero-pad the last dimension to a multiple of 8 (matmul and fused attention kernels prefer such widths)."""
    return F.pad(z, (0, _round_up_8(z.shape[-1]) - z.shape[-1]))


def _exp_tiles(queries: Tensor, keys: Tensor, allowed: Tensor | None) -> tuple[Tensor, ...]:
    """``E = exp(A0 - max_j A0)`` (0 at masked keys) in row tiles of at most :data:`_TILE_BYTES`.

    ``queries`` are already scaled by ``1/sqrt(D/H)``, so ``queries @ keysᵀ`` is ``A0`` of eq. 6. The row
    maximum is a constant along the softmax axis, taken without gradient.
    """
    row_bytes = queries[..., 0, :1].numel() * keys.shape[-2] * queries.element_size()
    rows = max(1, _TILE_BYTES // row_bytes)
    tiles = []
    for start in range(0, queries.shape[-2], rows):
        scores = queries[..., start : start + rows, :] @ keys.transpose(-1, -2)
        if allowed is not None:
            scores = scores.masked_fill(
                ~allowed[..., start : start + rows, :] if allowed.shape[-2] > 1 else ~allowed, -math.inf
            )
        with torch.no_grad():
            row_max = scores.amax(dim=-1, keepdim=True)
        tiles.append(scores.sub_(row_max).exp_())
    return tuple(tiles)
