"""Attention-augmented convolution (Bello et al. 2019) with optional evolving attention (Wang et al. 2021, §4.1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .evolving import evolve_logits

__all__ = ["AugmentedConv2d", "LogitChain"]


class LogitChain:
    """The attention logits handed from one :class:`AugmentedConv2d` to the next during a forward pass.

    The model's augmented convolutions share one chain: each reads the logits its predecessor left (its
    ``A^{i-1}``) and leaves its own. The first convolution of the model (``starts_chain``) ignores what a
    previous forward pass left.
    """

    def __init__(self) -> None:
        self.logits: Tensor | None = None


class AugmentedConv2d(nn.Module):
    """``Concat[Conv(x), MHA(x)]``: a convolution whose last ``d_v`` output channels are 2D self-attention.

    Attention augmentation (Bello et al. 2019, eqs. 1-5) of a convolution ``F_in -> F_out``: the
    convolution keeps its kernel, stride and padding with ``F_out - d_v`` output channels, and multi-head
    attention over the ``H × W`` positions of the feature map gives the other ``d_v``:

    .. math::

        O_h = \\mathrm{softmax}\\Big(\\frac{q_h k_h^\\top}{\\sqrt{d_{kh}}} + S^H_h + S^W_h\\Big) v_h, \\qquad
        \\mathrm{MHA}(x) = [O_1, \\dots, O_{N_h}]\\, W^O,

    with ``(q, k, v)`` a 1x1 convolution of ``x`` (``d_k, d_k, d_v`` channels, ``N_h`` heads of
    ``d_{kh} = d_k / N_h`` and ``d_v / N_h``) and ``W^O`` a 1x1 convolution ``d_v -> d_v``. The relative logits
    (eq. 3 of Wang et al., Bello's eq. 4) are ``S^W[i, j] = q̃_i · r^W_{w(j) - w(i)}`` and
    ``S^H[i, j] = q̃_i · r^H_{h(j) - h(i)}`` with ``q̃ = q / √d_kh`` (the scaled queries, as in both papers'
    code) and learned embeddings ``r^W`` (``2W - 1`` rows) and ``r^H`` (``2H - 1``) of width ``d_kh``, shared
    across heads but not layers (Bello §3.2). They are parameters of this module, registered and trained: the
    released evolving-attention code drew them as fresh random tensors on every call, which is a bug, not the
    method. So the attention grid ``size`` is fixed when the module is built.

    A strided convolution (stride ``s``) attends over ``x`` average-pooled by ``s`` (``s × s`` windows, the
    last one partial where the size is odd), so that the attention output matches the convolution's (the
    released code pools ``3 × 3`` windows with stride 2). With ``pool=2`` the attention runs on a further
    2x2-average-pooled map and its output is upsampled bilinearly (the released code does this in the
    first attention stage of its EA-ResNet-50 to save memory, making its maps match the next stage's).

    **Evolving attention** (``evolving=(α, β, k)``, Wang et al. eq. 4): when the chain holds logits of the
    same shape from the previous augmented convolution, ``A^{i-1}``, the pre-softmax logits ``S`` become

    .. math::

        A^i_{\\mathrm{in}} = α A^{i-1} + (1 - α) S, \\qquad
        A^i = β\\, \\mathrm{ReLU}(\\mathrm{Conv}_{k×k}(A^i_{\\mathrm{in}})) + (1 - β) A^i_{\\mathrm{in}},

    the convolution running over the ``HW × HW`` maps with the heads as channels ("same" padding); the
    softmax reads ``A^i`` and the chain receives it. Maps chain where their shapes match, as in the released
    code (``resnet_model.py``: a layer without a matching predecessor applies no rule and starts a new chain),
    and only such a layer has the ``N_h^2 k^2 + N_h`` convolution parameters (``has_evolution``). With
    ``α = β = 0`` the logits are ``S`` and the module computes plain attention augmentation.

    Args:
        conv: The convolution to augment (its ``in_channels``, ``out_channels``, kernel, stride, padding,
            dilation and groups are kept; its weights are not, the convolution is new).
        key_dim: ``d_k``; a multiple of ``num_heads``.
        value_dim: ``d_v``; a multiple of ``num_heads``, below ``out_channels``.
        num_heads: ``N_h``.
        size: ``(H, W)`` of the attention grid (after the stride and ``pool``).
        pool: ``1``, or ``2`` to attend over a 2x2-pooled map and upsample the result.
        evolving: ``(α, β, kernel_size)``, or ``None`` for attention augmentation alone.
        chain: The :class:`LogitChain` shared by the model's augmented convolutions (evolving only).
        starts_chain: This is the model's first augmented convolution.
        has_evolution: The previous augmented convolution's maps have this one's shape (evolving only).
    """

    def __init__(
        self,
        conv: nn.Conv2d,
        *,
        key_dim: int,
        value_dim: int,
        num_heads: int,
        size: tuple[int, int],
        pool: int = 1,
        evolving: tuple[float, float, int] | None = None,
        chain: LogitChain | None = None,
        starts_chain: bool = False,
        has_evolution: bool = False,
    ):
        super().__init__()
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"AugmentedConv2d augments an nn.Conv2d, not {type(conv).__name__}")
        for name, dim in (("key_dim", key_dim), ("value_dim", value_dim)):
            if not (isinstance(dim, int) and dim > 0 and dim % num_heads == 0):
                raise ValueError(f"{name} must be a positive multiple of num_heads={num_heads}, got {dim!r}")
        if value_dim >= conv.out_channels:
            raise ValueError(f"value_dim={value_dim} leaves no channel to the convolution ({conv.out_channels} out)")
        if pool not in (1, 2):
            raise ValueError(f"pool must be 1 or 2, got {pool!r}")
        if evolving is not None and chain is None:
            raise ValueError("evolving attention needs the LogitChain its convolutions share")
        stride = conv.stride[0]
        self.conv = nn.Conv2d(
            conv.in_channels,
            conv.out_channels - value_dim,
            conv.kernel_size,  # type: ignore[arg-type]
            stride=conv.stride,  # type: ignore[arg-type]
            padding=conv.padding,  # type: ignore[arg-type]
            dilation=conv.dilation,  # type: ignore[arg-type]
            groups=conv.groups,
            bias=conv.bias is not None,
        )
        self.qkv = nn.Conv2d(conv.in_channels, 2 * key_dim + value_dim, 1)
        self.out = nn.Conv2d(value_dim, value_dim, 1)
        head_key = key_dim // num_heads
        self.rel_height = nn.Parameter(torch.randn(2 * size[0] - 1, head_key) * head_key**-0.5)
        self.rel_width = nn.Parameter(torch.randn(2 * size[1] - 1, head_key) * head_key**-0.5)
        self.key_dim, self.value_dim, self.num_heads = key_dim, value_dim, num_heads
        self.size, self.stride, self.pool = tuple(size), stride, pool
        self.evolving = evolving
        self._chain = chain
        self.starts_chain = starts_chain
        self.evolution: nn.Conv2d | None = None
        if evolving is not None and has_evolution:
            kernel_size = evolving[2]
            self.evolution = nn.Conv2d(num_heads, num_heads, kernel_size)

    @property
    def out_channels(self) -> int:
        return self.conv.out_channels + self.value_dim

    def forward(self, x: Tensor) -> Tensor:
        """``Concat[Conv(x), MHA(x)]``; an evolving module reads and leaves its logits in the chain."""
        previous = None
        if self.evolving is not None and not self.starts_chain:
            previous = self._chain.logits  # type: ignore[union-attr]
        out, logits = self.attend(x, previous)
        if self.evolving is not None:
            self._chain.logits = logits  # type: ignore[union-attr]
        return out

    def attend(self, x: Tensor, previous: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The output and the logits ``A^i`` ``(B, N_h, HW, HW)`` (``None`` without ``evolving``: the attention
        is then fused, :func:`~torch.nn.functional.scaled_dot_product_attention`), given the previous logits
        ``A^{i-1}`` (or ``None``; used only by a module with :attr:`evolution`, when their shape matches)."""
        h = x
        for factor in (self.stride, self.pool):
            if factor > 1:
                h = F.avg_pool2d(h, factor, ceil_mode=True)
        if tuple(h.shape[-2:]) != self.size:
            raise ValueError(
                f"the attention grid is {tuple(h.shape[-2:])}, this module was built for {self.size} "
                "(its relative position embeddings fix the feature map's size: build the model for this image size)"
            )
        q, k, v = self.qkv(h).split([self.key_dim, self.key_dim, self.value_dim], dim=1)
        q, k, v = (_heads(z, self.num_heads) for z in (q, k, v))  # (B, N_h, HW, d)
        q = q * q.shape[-1] ** -0.5
        relative = self._relative_logits(q)
        if self.evolving is None:  # no logits to hand on: fused attention with the relative logits as a bias
            logits = None
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=relative, scale=1.0)
        else:
            logits = q @ k.transpose(-2, -1) + relative
            if self.evolution is not None and previous is not None and previous.shape == logits.shape:
                alpha, beta, _ = self.evolving
                logits = evolve_logits(previous, logits, self.evolution, alpha=alpha, beta=beta)
            attended = logits.softmax(-1) @ v
        attended = attended.transpose(-2, -1).reshape(x.shape[0], self.value_dim, *self.size)
        attended = self.out(attended)
        conv = self.conv(x)
        if self.pool > 1:
            attended = F.interpolate(attended, size=conv.shape[-2:], mode="bilinear", align_corners=False)
        return torch.cat([conv, attended], dim=1), logits

    def _relative_logits(self, q: Tensor) -> Tensor:
        """``S^H + S^W`` ``(B, N_h, HW, HW)`` of the scaled queries ``q`` ``(B, N_h, HW, d_kh)``."""
        height, width = self.size
        grid = q.unflatten(-2, (height, width))  # (B, N_h, H, W, d)
        rows, cols = torch.arange(height, device=q.device), torch.arange(width, device=q.device)
        query_row, query_col = rows[:, None, None], cols[None, :, None]
        # by_height[..., i_h, i_w, j_h] = q̃_(i_h, i_w) · r^H_{j_h - i_h}, by_width[..., i_h, i_w, j_w] likewise
        by_height = (grid @ self.rel_height.T)[..., query_row, query_col, rows - query_row + height - 1]
        by_width = (grid @ self.rel_width.T)[..., query_row, query_col, cols - query_col + width - 1]
        # by_width[b, n, i_h, i_w, j_w], by_height[b, n, i_h, i_w, j_h] -> [b, n, (i_h, i_w), (j_h, j_w)]
        return (by_height[..., :, None] + by_width[..., None, :]).flatten(-4, -3).flatten(-2)

    def extra_repr(self) -> str:
        return (
            f"key_dim={self.key_dim}, value_dim={self.value_dim}, num_heads={self.num_heads}, size={self.size}, "
            f"pool={self.pool}, evolving={self.evolving}, has_evolution={self.evolution is not None}"
        )


def _heads(z: Tensor, num_heads: int) -> Tensor:
    """``(B, N_h d, H, W) -> (B, N_h, HW, d)``."""
    return z.flatten(-2).unflatten(1, (num_heads, -1)).transpose(-2, -1)
