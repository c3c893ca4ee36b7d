"""Multi-head attention as a residual branch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["AttentionBranch"]


class AttentionBranch(nn.Module):
    """Pre-LayerNorm multi-head attention: ``x -> W_o · MHA(LN(x), kv, kv)``, with no skip connection.

    .. math::

        \\mathrm{head}_h = \\mathrm{softmax}\\Big(
            \\frac{(LN(x) W_q^h)(kv\\, W_k^h)^\\top}{\\sqrt{d_h}} + M\\Big)\\, kv\\, W_v^h,
        \\qquad \\mathrm{out} = [\\mathrm{head}_1, \\dots, \\mathrm{head}_H]\\, W_o

    (Vaswani et al. 2017, eq. 1; pre-norm as in Xiong et al. 2020), where ``kv = LN(x)`` for
    self-attention and the given ``context`` for cross-attention, and ``M`` is ``-inf`` at masked
    keys. The product runs through :func:`torch.nn.functional.scaled_dot_product_attention`, so
    fused kernels are used where PyTorch has them.

    Args:
        dim: Width ``d`` of the tokens.
        num_heads: Number of heads ``H``; must divide ``dim``.
        causal: Mask keys after the query (decoder self-attention).
        context_dim: Width of the key/value source for cross-attention. ``None`` (default) means
            self-attention, with one fused ``qkv`` projection.
        bias: Whether the projections have biases.

    Shapes:
        ``x``: ``(*batch, n, dim)``, any number of leading dimensions (also none, which torchode's
        per-sample adjoint relies on). ``context``: ``(*batch, m, context_dim)``.
        ``key_padding_mask``: bool ``(*batch, m)``, **True at padding** (the convention of
        :class:`torch.nn.MultiheadAttention`). The output has the shape of ``x``.

    With a self-attention ``key_padding_mask``, padded positions are also queries whose increment
    is set to zero, so padding tokens stay where they are along depth and never produce NaN.

    Inside a field the branch is called as ``branch(x)``; per-batch masks and the encoder memory
    reach it through :meth:`bind`, which :class:`~neuralode_tf.ContinuousDepth` calls with the
    keyword arguments of its own ``forward``.
    """

    def __init__(
        self, dim: int, num_heads: int, *, causal: bool = False, context_dim: int | None = None, bias: bool = True
    ):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide dim={dim}")
        self.num_heads = num_heads
        self.causal = causal
        self.norm = nn.LayerNorm(dim)
        if context_dim is None:
            self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        else:
            self.q = nn.Linear(dim, dim, bias=bias)
            self.kv = nn.Linear(context_dim, 2 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self._bound: dict[str, Tensor | None] = {}

    def bind(
        self,
        *,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_padding_mask: Tensor | None = None,
        **_: object,
    ) -> None:
        """Set the per-batch conditioning used when ``forward`` is not given it explicitly.

        Self-attention uses ``key_padding_mask`` (of the tokens themselves); cross-attention uses
        ``memory`` as its key/value source and ``memory_padding_mask`` on it. Other keywords are
        ignored, so one call can condition every branch of a field. The values stay bound until
        the next call (adjoint methods evaluate the field again during backward).
        """
        if self.is_cross_attention:
            self._bound = {"context": memory, "key_padding_mask": memory_padding_mask}
        else:
            self._bound = {"key_padding_mask": key_padding_mask}

    @property
    def is_cross_attention(self) -> bool:
        return not hasattr(self, "qkv")

    def forward(self, x: Tensor, context: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        context = self._bound.get("context") if context is None else context
        key_padding_mask = self._bound.get("key_padding_mask") if key_padding_mask is None else key_padding_mask
        q, k, v = self._project(x, context)
        mask = self._mask(key_padding_mask, q.shape[-2], k.shape[-2], x.device)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal and mask is None)
        out = self.proj(out.transpose(-3, -2).flatten(-2))
        if key_padding_mask is not None and not self.is_cross_attention:
            out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
        return out

    def _project(self, x: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """Per-head queries, keys and values of ``LN(x)`` (keys and values from ``context`` for
        cross-attention), each ``(*batch, H, tokens, d_h)``."""
        name = type(self).__name__
        h = self.norm(x)
        if self.is_cross_attention:
            if context is None:
                raise ValueError(f"this {name} was built for cross-attention: pass context= or bind(memory=...)")
            q = self.q(h)
            k, v = self.kv(context).chunk(2, dim=-1)
        else:
            if context is not None:
                raise ValueError(
                    f"this {name} does self-attention; build it with context_dim= (EvolvingAttentionBranch: "
                    "cross_attention=True) to pass context"
                )
            q, k, v = self.qkv(h).chunk(3, dim=-1)
        return tuple(self._split_heads(z) for z in (q, k, v))

    def _split_heads(self, z: Tensor) -> Tensor:
        # (*batch, n, H * d_h) -> (*batch, H, n, d_h)
        return z.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2)

    def _mask(self, key_padding_mask: Tensor | None, n_q: int, n_k: int, device: torch.device) -> Tensor | None:
        """Boolean mask, True where attention is allowed, shaped ``(*batch, 1, n_q, n_k)``."""
        if key_padding_mask is None:
            return None
        allowed = ~key_padding_mask.bool()[..., None, None, :]
        if self.causal:
            allowed = allowed & torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()
        # A query that may see no key at all (e.g. a padded query under a causal mask) attends to
        # everything instead of producing NaN; for self-attention its output is zeroed above.
        return allowed | ~allowed.any(dim=-1, keepdim=True)
