"""Token clustering over depth: how alike the tokens of a trajectory become.

A trajectory ``states`` is shaped ``(T, *batch, n, d)``: at each of ``T`` depths, ``n`` tokens of width ``d`` per
sample (``Solution.ys`` of a solve whose state is ``(*batch, n, d)``). The measures compare tokens by their cosine
similarity :math:`c_{ij} = \\langle x_i, x_j\\rangle / (|x_i|\\,|x_j|)`, so they do not depend on the tokens' norms
(a zero token has cosine 0 with every token). An optional ``padding_mask`` ``(*batch, n)``, True at padding, leaves
padded tokens out of every measure.

* :func:`mean_pairwise_cosine`, :func:`min_pairwise_cosine`: over the pairs ``i != j`` of real tokens;
* :func:`cluster_count`: the number of connected components of the graph on the real tokens with an edge where
  :math:`c_{ij} \\ge 1 - \\varepsilon` (single linkage: a chain of close tokens is one cluster);
* :func:`time_to_one_cluster`: the first depth at which that count is 1.

These are the quantities behind the clustering results of Geshkovski, Letrouit, Polyanskiy & Rigollet (*The
emergence of clusters in self-attention dynamics*, NeurIPS 2023): under pure self-attention on the sphere
(:class:`~neuralode_tf.dynamics.sphere_attention.SphereAttentionField`) the mean cosine tends to 1 and the cluster
count to 1, after a long metastable multi-cluster phase when the inverse temperature is large.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..nn._conditioning import check_padding_mask

__all__ = [
    "DEFAULT_CLUSTER_TOLERANCE",
    "pairwise_cosine",
    "mean_pairwise_cosine",
    "min_pairwise_cosine",
    "cluster_count",
    "time_to_one_cluster",
]

DEFAULT_CLUSTER_TOLERANCE = 1e-3
"""Default :math:`\\varepsilon` of :func:`cluster_count`: two tokens are linked when their cosine is at least
``1 - 1e-3``, an angle of at most :math:`\\arccos(0.999) \\approx 2.56°`. Tight enough that tokens drawn at random
on a sphere of small dimension are almost never linked (for ``d = 3`` the cosine of two uniform tokens is uniform on
``[-1, 1]``, so a pair is linked with probability :math:`\\varepsilon / 2 = 5 \\cdot 10^{-4}`), loose enough that a
cluster converging exponentially fast counts as one long before float32 rounding of the cosines matters."""


def pairwise_cosine(states: Tensor) -> Tensor:
    """Cosine similarities :math:`c_{ij}` of the tokens, ``(..., n, n)`` from ``(..., n, d)``.

    Tokens are normalised with :func:`torch.nn.functional.normalize` (a zero token stays zero: cosine 0).
    """
    _check_states(states, least_dims=2, shape="(..., n, d)")
    unit = F.normalize(states, dim=-1)
    return unit @ unit.mT


def mean_pairwise_cosine(states: Tensor, padding_mask: Tensor | None = None) -> Tensor:
    """Mean cosine similarity over the pairs ``i != j`` of real tokens, per depth and sample.

    .. math:: \\bar c = \\frac{1}{m(m-1)} \\sum_{i \\ne j\\ \\mathrm{real}} c_{ij}, \\qquad m = \\#\\text{real tokens}

    Args:
        states: ``(T, *batch, n, d)``.
        padding_mask: ``(*batch, n)`` bool, True at padding, or ``None``.

    Returns:
        ``(T, *batch)``; NaN where a sample has fewer than two real tokens (no pair).
    """
    cosine, pairs = _real_pairs(states, padding_mask)
    count = pairs.sum((-2, -1))
    total = torch.where(pairs, cosine, torch.zeros((), dtype=cosine.dtype, device=cosine.device)).sum((-2, -1))
    return torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, math.nan))


def min_pairwise_cosine(states: Tensor, padding_mask: Tensor | None = None) -> Tensor:
    """Least cosine similarity over the pairs ``i != j`` of real tokens (the widest angle), per depth and sample.

    Args, Returns: as :func:`mean_pairwise_cosine` (NaN without a pair).
    """
    cosine, pairs = _real_pairs(states, padding_mask)
    inf = torch.full((), math.inf, dtype=cosine.dtype, device=cosine.device)
    least = torch.where(pairs, cosine, inf).amin((-2, -1))
    return torch.where(least.isinf(), torch.full_like(least, math.nan), least)


def cluster_count(
    states: Tensor, padding_mask: Tensor | None = None, *, eps: float = DEFAULT_CLUSTER_TOLERANCE
) -> Tensor:
    """Number of clusters of real tokens, per depth and sample.

    A cluster is a connected component of the graph whose vertices are the real tokens and whose edges join tokens
    with :math:`c_{ij} \\ge 1 - \\varepsilon`. Computed as the transitive closure of the adjacency matrix by at most
    :math:`\\lceil \\log_2 n \\rceil` squarings (fewer once it stops changing), then counting the tokens that are the
    lowest-indexed of their component: :math:`O(n^3 \\log n)` per state, all depths and samples at once.

    Args:
        states: ``(T, *batch, n, d)``.
        padding_mask: ``(*batch, n)`` bool, True at padding, or ``None``.
        eps: :math:`\\varepsilon \\in [0, 2]`; :data:`DEFAULT_CLUSTER_TOLERANCE` by default.

    Returns:
        ``(T, *batch)`` int64; 0 for a sample with no real token.
    """
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps <= 2:
        raise ValueError(f"eps must be a number in [0, 2] (cosine >= 1 - eps links two tokens), got {eps!r}")
    _check_states(states, least_dims=3, shape="(T, *batch, n, d)")
    real = _real_tokens(states, padding_mask)
    n = states.shape[-2]
    linked = (pairwise_cosine(states) >= 1 - eps) & real[..., :, None] & real[..., None, :]
    linked = linked | torch.eye(n, dtype=torch.bool, device=states.device)  # a token reaches itself
    reach = linked.to(torch.float32)  # 0/1 entries: the products count paths, exactly in float32
    for _ in range(max(1, math.ceil(math.log2(n)))):  # paths of length <= 2^k after k squarings
        wider = ((reach @ reach) > 0).to(torch.float32)
        if torch.equal(wider, reach):  # closed under composition: the closure is reached
            break
        reach = wider
    indices = torch.arange(n, device=states.device)
    lowest_reached = torch.where(reach > 0, indices, n).amin(-1)
    return ((lowest_reached == indices) & real).sum(-1)


def time_to_one_cluster(
    states: Tensor,
    times: Tensor | None = None,
    padding_mask: Tensor | None = None,
    *,
    eps: float = DEFAULT_CLUSTER_TOLERANCE,
) -> Tensor:
    """The first depth at which the real tokens form one cluster (:func:`cluster_count` is 1), per sample.

    It is the first such depth, whether or not the count stays 1 afterwards (under the self-attention dynamics of
    Geshkovski et al. it does once the tokens lie in an open hemisphere). The resolution is that of the depths
    sampled: use a fine ``times`` grid.

    Args:
        states: ``(T, *batch, n, d)``.
        times: ``(T,)`` the depth of each state (``Solution.ts``), or ``None`` for the indices ``0, ..., T-1``.
        padding_mask: ``(*batch, n)`` bool, True at padding, or ``None``.
        eps: as :func:`cluster_count`.

    Returns:
        ``(*batch)`` float64 times; ``inf`` where the count never reaches 1 over the trajectory.
    """
    _check_states(states, least_dims=3, shape="(T, *batch, n, d)")
    depth = states.shape[0]
    if times is None:
        times = torch.arange(depth, dtype=torch.float64)
    if not isinstance(times, Tensor) or tuple(times.shape) != (depth,):
        got = tuple(times.shape) if isinstance(times, Tensor) else type(times).__name__
        raise ValueError(f"times must be a tensor (T,) = ({depth},), one depth per state; got {got}")
    times = times.to(dtype=torch.float64, device=states.device)
    one = cluster_count(states, padding_mask, eps=eps) == 1  # (T, *batch)
    first = one.to(torch.int64).argmax(0)  # index of the first True, 0 if none
    reached = one.any(0)
    return torch.where(reached, times[first], torch.full_like(times[first], math.inf))


def _check_states(states: object, *, least_dims: int, shape: str) -> None:
    if not isinstance(states, Tensor):
        raise TypeError(f"states must be a floating tensor {shape}, got {type(states).__name__}")
    if not states.is_floating_point() or states.ndim < least_dims:
        raise ValueError(f"states must be a floating tensor {shape}; got shape {tuple(states.shape)}, {states.dtype}")
    if states.shape[-2] == 0:
        raise ValueError(f"states must have at least one token (n >= 1); got shape {tuple(states.shape)}")


def _real_tokens(states: Tensor, padding_mask: Tensor | None) -> Tensor:
    """``(*batch, n)`` bool, True at real tokens (broadcasts against the depth dimension)."""
    check_padding_mask(padding_mask, "padding_mask", states.shape[1:-1], "states (T, *batch, n, d)")
    if padding_mask is None:
        return torch.ones(states.shape[1:-1], dtype=torch.bool, device=states.device)
    return ~padding_mask.to(states.device)


def _real_pairs(states: Tensor, padding_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The cosines ``(T, *batch, n, n)`` and the mask of pairs ``i != j`` of real tokens (broadcastable to them)."""
    _check_states(states, least_dims=3, shape="(T, *batch, n, d)")
    real = _real_tokens(states, padding_mask)
    n = states.shape[-2]
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=states.device)
    pairs = real[..., :, None] & real[..., None, :] & off_diagonal
    return pairwise_cosine(states), pairs.expand(states.shape[:-1] + (n,))
