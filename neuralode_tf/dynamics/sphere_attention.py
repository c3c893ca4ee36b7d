"""Self-attention as an interacting-particle system on the sphere (Geshkovski, Letrouit, Polyanskiy & Rigollet).

Tokens ``x_1, ..., x_n`` on the unit sphere :math:`S^{d-1}` move by pure self-attention with ``Q = K = V = I``
and inverse temperature :math:`\\beta`, the attention output projected on the tangent space of the sphere (the
continuous-depth reading of a layer whose normalisation keeps tokens on the sphere):

.. math::

    \\frac{dx_i}{dt} = P_{x_i}\\Big(\\frac{1}{Z_i} \\sum_{j=1}^n e^{\\beta \\langle x_i, x_j\\rangle} x_j\\Big),
    \\qquad P_x y = y - \\langle x, y\\rangle x,

with :math:`Z_i = \\sum_j e^{\\beta \\langle x_i, x_j\\rangle}` (the softmax: model "SA") or :math:`Z_i = n` (model
"USA", unnormalised: a gradient ascent of the interaction energy :func:`interaction_energy` on :math:`(S^{d-1})^n`,
which SA ascends too).

Their clustering results: for ``d >= 3`` and almost every initial condition, all tokens converge to a single point
(one cluster) as ``t -> infinity`` (sections 4-5 of the second reference, with the hypotheses on ``beta`` stated
there); for large ``beta`` the tokens first gather in several clusters that persist for a long time (metastability)
before merging. :mod:`neuralode_tf.dynamics.clustering` measures this over depth.

References:
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet. *The emergence of clusters in self-attention dynamics.*
    NeurIPS 2023 (arXiv:2305.05465). — *A mathematical perspective on Transformers.* arXiv:2312.10794 (2023).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "SphereAttentionField",
    "SPHERE_ATTENTION_NORMALIZATIONS",
    "interaction_energy",
    "tangent_projection",
    "uniform_sphere_tokens",
]

SPHERE_ATTENTION_NORMALIZATIONS = ("sa", "usa")
"""``"sa"``: the softmax normaliser :math:`Z_i = \\sum_j e^{\\beta\\langle x_i, x_j\\rangle}`; ``"usa"``:
:math:`Z_i = n`."""


class SphereAttentionField(nn.Module):
    """The self-attention dynamics of Geshkovski et al. on the sphere, a field ``(t, x) -> dx/dt``.

    .. math::

        f_i(x) = P_{x_i}(a_i), \\qquad a_i = \\frac{1}{Z_i} \\sum_{j=1}^n e^{\\beta \\langle x_i, x_j\\rangle} x_j,
        \\qquad P_x y = y - \\langle x, y\\rangle x,

    with :math:`Z_i = \\sum_j e^{\\beta\\langle x_i, x_j\\rangle}` (``normalization="sa"``) or :math:`Z_i = n`
    (``"usa"``). The state is ``(*batch, n, d)``: ``n`` tokens of width ``d`` per sample; the field is autonomous (it
    ignores ``t``) and has no parameters, so it works in any floating dtype and on any device.

    For ``"sa"`` the weighted average :math:`a_i` is :func:`torch.nn.functional.scaled_dot_product_attention` with
    queries, keys and values all ``x`` and ``scale=beta``. For ``"usa"`` it is written out, ``exp(beta x x^T) x / n``
    (no softmax to reuse); the exponent is at most ``|beta|`` on the sphere, so it overflows only for
    ``beta > 88`` in float32.

    **Staying on the sphere.** The projection makes :math:`\\langle x_i, f_i(x)\\rangle = 0`, so
    :math:`\\frac{d}{dt}|x_i|^2 = 2 \\langle x_i, f_i\\rangle = 0` and the exact flow keeps :math:`|x_i| = 1`. For a
    state on the sphere the output is tangent up to floating-point rounding (the projection is computed as
    ``a - <x, a> x / |x|^2``, tangent for a state off the sphere too). A Runge-Kutta solve is not norm-preserving:
    its local error is not tangent, so ``|x_i|`` drifts by the method's global error, :math:`O(T h^4)` for ``rk4``
    (measured: ``max_i ||x_i(T)| - 1|`` below ``8e-7`` at ``T = 40``, ``h = 0.1``, ``n = 32``, ``d`` in 2, 3, 8,
    ``beta`` in 1, 4, 9, float64, and 16 times smaller when ``h`` halves; the tests assert ``2e-6``). The ``"usa"``
    field is :math:`Z_i / n` times the ``"sa"`` one, up to :math:`e^{\\beta}` times faster: its steps must be that
    much shorter (``rk4`` at ``h = 0.2`` blows up at ``beta = 4``).
    Nothing renormalises the state during the solve; divide by the norm afterwards if exact unit norms matter
    (:mod:`~neuralode_tf.dynamics.clustering` measures cosines, which do not depend on the norms).

    Args:
        beta: The inverse temperature :math:`\\beta` (a finite number; the paper takes ``beta >= 0``).
        normalization: ``"sa"`` (softmax) or ``"usa"`` (divide by ``n``).

    Reference:
        Geshkovski, Letrouit, Polyanskiy, Rigollet. *The emergence of clusters in self-attention dynamics*,
        NeurIPS 2023; *A mathematical perspective on Transformers* (2023), section 2, equations (SA) and (USA).
    """

    def __init__(self, beta: float, normalization: str = "sa") -> None:
        super().__init__()
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta):
            raise ValueError(f"beta must be a finite number, got {beta!r}")
        if normalization not in SPHERE_ATTENTION_NORMALIZATIONS:
            valid = ", ".join(map(repr, SPHERE_ATTENTION_NORMALIZATIONS))
            raise ValueError(f"unknown normalization {normalization!r}; valid: {valid}")
        self.beta = float(beta)
        self.normalization = normalization

    def attention_average(self, x: Tensor) -> Tensor:
        """The weighted average :math:`a_i = Z_i^{-1} \\sum_j e^{\\beta\\langle x_i, x_j\\rangle} x_j`, before the
        projection; shaped like ``x``, ``(*batch, n, d)``."""
        _check_tokens(x)
        if self.normalization == "sa":
            batch = x.shape[:-2]
            flat = x.reshape(-1, *x.shape[-2:])  # SDPA wants at least one batch dimension
            average = F.scaled_dot_product_attention(flat, flat, flat, scale=self.beta)
            return average.reshape(*batch, *x.shape[-2:])
        weights = torch.exp(self.beta * (x @ x.mT))
        return (weights @ x) / x.shape[-2]

    def forward(self, t: Tensor | float, x: Tensor) -> Tensor:
        """:math:`dx/dt = P_x(a)`, the tangent component of :meth:`attention_average` at every token."""
        return tangent_projection(x, self.attention_average(x))

    def extra_repr(self) -> str:
        return f"beta={self.beta}, normalization={self.normalization!r}"


def interaction_energy(x: Tensor, beta: float) -> Tensor:
    """The interaction energy of tokens ``(*batch, n, d)``, per sample ``(*batch)``; ``beta > 0``:

    .. math:: E_\\beta(x) = \\frac{1}{2\\beta n^2} \\sum_{i,j=1}^n e^{\\beta\\langle x_i, x_j\\rangle}.

    Its gradient in :math:`x_i` is :math:`n^{-2} \\sum_j e^{\\beta\\langle x_i, x_j\\rangle} x_j`, so the ``"usa"``
    field is :math:`n\\, P_{x_i} \\nabla_{x_i} E_\\beta` and the ``"sa"`` field
    :math:`(n^2 / Z_i)\\, P_{x_i} \\nabla_{x_i} E_\\beta`: both ascend it,
    :math:`\\frac{d}{dt} E_\\beta = \\sum_i c_i |P_{x_i} \\nabla_{x_i} E_\\beta|^2 \\ge 0` with :math:`c_i = n` or
    :math:`n^2 / Z_i`. It is largest, :math:`e^\\beta / (2\\beta)`, when all tokens coincide.

    Reference: Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers* (2023),
    the interaction energy and the gradient-flow structure of (USA) (their ``E_beta`` may differ from this one by a
    constant factor, which changes no sign).
    """
    _check_tokens(x)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < math.inf:
        raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
    n = x.shape[-2]
    return torch.exp(beta * (x @ x.mT)).sum((-2, -1)) / (2 * beta * n * n)


def tangent_projection(x: Tensor, y: Tensor) -> Tensor:
    """:math:`P_x y = y - \\frac{\\langle x, y\\rangle}{|x|^2} x` token by token (last dimension): the component of
    ``y`` orthogonal to ``x``, which on the unit sphere is the tangent projection :math:`y - \\langle x, y\\rangle x`.
    Dividing by :math:`|x|^2` keeps the result orthogonal to ``x`` when a solver has moved ``x`` slightly off the
    sphere. A zero token is left as ``y`` (its squared norm is clamped away from 0)."""
    squared_norm = (x * x).sum(-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    return y - ((x * y).sum(-1, keepdim=True) / squared_norm) * x


def uniform_sphere_tokens(
    n: int,
    d: int,
    *,
    batch: Sequence[int] = (),
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """``(*batch, n, d)`` tokens drawn independently and uniformly on :math:`S^{d-1}` (normalised standard Gaussians).

    The draw uses its own CPU generator seeded with ``seed`` (the global RNG is untouched) and is then moved to
    ``device``, so a seed gives the same tokens on every device.
    """
    if not (isinstance(n, int) and n >= 1 and isinstance(d, int) and d >= 1):
        raise ValueError(f"n and d must be positive integers, got n={n!r}, d={d!r}")
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(*batch, n, d, generator=generator, dtype=torch.float64)
    return F.normalize(gaussian, dim=-1).to(dtype=dtype, device=device)


def _check_tokens(x: object) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 2:
        what = f"shape {tuple(x.shape)}, dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"the state must be a floating tensor (*batch, n, d) of n tokens on the sphere; got {what}")
