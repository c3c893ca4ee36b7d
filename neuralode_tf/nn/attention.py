"""Multi-head attention as a residual branch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._conditioning import check_context, check_padding_mask
from ._empty_rows import SdpaMask, attend, sdpa_mask
from ._kv_cache import KVCache
from .rotary import apply_rotary

__all__ = ["AttentionBranch"]

_CROSS_KEYWORDS = {
    "context": "memory",
    "key_padding_mask": "memory_key_padding_mask",
    "query_padding_mask": "key_padding_mask",
}
"""The ``bind`` keyword each value bound to a cross-attention branch comes from (self-attention keeps the names)."""


class _AttentionParameters(nn.Module):
    """The parameters of a pre-norm multi-head attention branch (``norm``, ``qkv`` or ``q``/``kv``, ``proj``), its
    projection into heads and its per-batch conditioning, without a ``forward``: shared by :class:`AttentionBranch`
    and :class:`~neuralode_tf.nn.EvolvingAttentionBranch`, whose ``forward`` also takes and returns the logits (so
    it is no ``AttentionBranch``). The arguments are those of :class:`AttentionBranch`."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        causal: bool = False,
        context_dim: int | None = None,
        bias: bool = True,
        head_dim: int | None = None,
        qkv_bias: bool | None = None,
        out_proj: bool = True,
        prenorm: bool = True,
        norm_bias: bool = True,
    ):
        super().__init__()
        if head_dim is None and dim % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide dim={dim}")
        inner = dim if head_dim is None else num_heads * head_dim
        if not out_proj and inner != dim:
            raise ValueError(f"out_proj=False needs heads {inner} wide together, the width dim={dim}")
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.num_heads = num_heads
        self.causal = causal
        self.norm = nn.LayerNorm(dim, bias=norm_bias) if prenorm else nn.Identity()
        if context_dim is None:
            self.qkv = nn.Linear(dim, 3 * inner, bias=qkv_bias)
        else:
            self.q = nn.Linear(dim, inner, bias=qkv_bias)
            self.kv = nn.Linear(context_dim, 2 * inner, bias=qkv_bias)
        self.proj = nn.Linear(inner, dim, bias=bias) if out_proj else nn.Identity()
        self._bound: dict[str, Tensor | None] = {}

    @property
    def is_cross_attention(self) -> bool:
        return not hasattr(self, "qkv")

    def _conditioned(
        self, x: Tensor, context: Tensor | None, key_padding_mask: Tensor | None
    ) -> tuple[Tensor | None, Tensor | None]:
        """``context`` and ``key_padding_mask`` as given, else as bound, checked against ``x``."""
        context, context_name, context_bound = self._given_or_bound("context", context)
        key_padding_mask, mask_name, mask_bound = self._given_or_bound("key_padding_mask", key_padding_mask)
        if not self.is_cross_attention:
            check_padding_mask(key_padding_mask, mask_name, x.shape[:-1], "x", bound=mask_bound)
        elif context is not None:  # (without one, _project says how to pass it)
            check_context(context, context_name, x, bound=context_bound)
            check_padding_mask(key_padding_mask, mask_name, context.shape[:-1], context_name, bound=mask_bound)
        return context, key_padding_mask

    def _given_or_bound(self, key: str, given: Tensor | None) -> tuple[Tensor | None, str, bool]:
        """The explicit argument ``key``, else the bound value; with the name to report and whether it was bound."""
        if given is not None:
            return given, key, False
        return self._bound.get(key), _CROSS_KEYWORDS[key] if self.is_cross_attention else key, True

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
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def _split_heads(self, z: Tensor) -> Tensor:
        # (*batch, n, H * d_h) -> (*batch, H, n, d_h)
        return z.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2)


class AttentionBranch(_AttentionParameters):
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
        num_heads: Number of heads ``H``; must divide ``dim`` unless ``head_dim`` is given.
        causal: Mask keys after the query (decoder self-attention).
        context_dim: Width of the key/value source for cross-attention. ``None`` (default) means
            self-attention, with one fused ``qkv`` projection.
        bias: Whether the projections have biases.
        head_dim: Width ``k`` of each head (default ``dim // num_heads``); the heads are ``H k`` wide together,
            e.g. 8 heads of 64 on ``d = 128`` tokens in Sinkformers' Cats & Dogs ViT.
        qkv_bias: Whether the query, key and value projections have biases (default: ``bias``); Sinkformers'
            ViTs (lucidrains' ``vit-pytorch``) have none there.
        out_proj: Project the concatenated heads back with ``W_o`` (default). Without it the heads must be
            ``d`` wide together; Sinkformers' ViT drops ``W_o`` exactly when ``H = 1`` and ``k = d`` (their MNIST
            model).
        prenorm: Normalise ``x`` first (default). ``False`` gives the bare attention for a post-norm block,
            whose LayerNorm comes after the skip (:class:`~neuralode_tf.fields.Sublayer`), or a block without norms.
        norm_bias: Whether the LayerNorm has a bias (nanoGPT's ``bias=False`` drops it with the projections').
        rotary: Rotate queries and keys by their positions (:func:`~neuralode_tf.nn.apply_rotary`, Su et al. 2021);
            self-attention only.
        dropout: Dropout on the attention weights and on the output, in training mode (nanoGPT's ``attn_dropout``
            and ``resid_dropout``). Inside a field it is drawn afresh at every evaluation.

    Shapes:
        ``x``: ``(*batch, n, dim)``, any number of leading dimensions (also none, which torchode's
        per-sample adjoint relies on). ``context``: ``(*batch, m, context_dim)``.
        ``key_padding_mask``: bool ``(*batch, m)``, **True at padding** (the convention of
        :class:`torch.nn.MultiheadAttention`). The output has the shape of ``x``.

    **Padding.** Padded keys get zero attention weight, so the outputs at real positions never depend
    on the padded tokens (their values may be anything finite). A query that may see no key (for
    cross-attention, when a whole memory is padding) has all its attention weights zero, so its attention
    output before the projection ``W_o`` is zero, never NaN (the meaning torch's and Hugging Face's attention
    give a fully masked row). With a self-attention ``key_padding_mask``, padded positions
    are also queries, whose increment is set to zero (never NaN): this branch alone leaves padded
    tokens where they are. In a field with other branches they still move along depth, e.g. under an
    :class:`~neuralode_tf.nn.MLPBranch`, which acts on every position. What holds for a field of
    masked attention and position-wise branches is that real tokens never see padded ones: on a fixed
    grid they follow the trajectory of the sequence without its padded positions
    (``tests/test_nn.py``). Masks are checked at every call: bool, shaped like the tokens (or the
    context) without their width.

    Inside a field the branch is called as ``branch(x)``; per-batch masks, the encoder memory and a
    :class:`~neuralode_tf.nn.KVCache` reach it through :meth:`bind`, which :class:`~neuralode_tf.ContinuousDepth`
    calls with the keyword arguments of its own ``forward``.

    **Key/value cache.** With a cache bound, causal self-attention takes ``x`` to be the tokens after the
    ``L`` the cache holds: it appends their keys and values to its slot and lets query ``i`` (position
    ``L + i``) attend to keys ``0 .. L + i``, as in the forward over all tokens (incremental decoding).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        causal: bool = False,
        context_dim: int | None = None,
        bias: bool = True,
        head_dim: int | None = None,
        qkv_bias: bool | None = None,
        out_proj: bool = True,
        prenorm: bool = True,
        norm_bias: bool = True,
        rotary: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__(
            dim,
            num_heads,
            causal=causal,
            context_dim=context_dim,
            bias=bias,
            head_dim=head_dim,
            qkv_bias=qkv_bias,
            out_proj=out_proj,
            prenorm=prenorm,
            norm_bias=norm_bias,
        )
        if rotary and self.is_cross_attention:
            raise ValueError("rotary positions are for self-attention; cross-attention keys have no shared positions")
        if not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        self.rotary = rotary
        self.dropout = float(dropout)
        self._kv_cache: KVCache | None = None

    def bind(
        self,
        *,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> None:
        """Set the per-batch conditioning used when ``forward`` is not given it explicitly.

        Self-attention uses ``key_padding_mask`` (of the tokens themselves) and ``kv_cache`` and ignores the
        other two; cross-attention uses ``memory`` as its key/value source and ``memory_key_padding_mask`` on it,
        and ignores ``key_padding_mask`` and ``kv_cache`` (its keys come from the memory). So one call can
        condition every branch of a field. The values stay bound until the next call (adjoint methods evaluate
        the field again during backward); ``forward`` checks them against each state it gets. A cache needs
        causal self-attention and no ``key_padding_mask``.
        """
        if self.is_cross_attention:
            self._bound = {"context": memory, "key_padding_mask": memory_key_padding_mask}
            return
        if kv_cache is not None and not self.causal:
            raise ValueError("a KVCache serves causal self-attention: later tokens would change earlier ones here")
        if kv_cache is not None and key_padding_mask is not None:
            raise ValueError("a KVCache takes no key_padding_mask: decode unpadded sequences")
        self._bound, self._kv_cache = {"key_padding_mask": key_padding_mask}, kv_cache

    def forward(self, x: Tensor, context: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        context, key_padding_mask = self._conditioned(x, context, key_padding_mask)
        q, k, v = self._project(x, context)
        cache = self._kv_cache
        if self.rotary:
            start = 0 if cache is None else cache.length
            q, k = apply_rotary(q, start), apply_rotary(k, start)
        if cache is not None:
            k, v = cache.append(k, v)
        n_q, n_k = q.shape[-2], k.shape[-2]
        mask = self._mask(key_padding_mask, n_q, n_k, x.device)
        out = attend(
            q,
            k,
            v,
            mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.causal and mask is None and n_q == n_k,
        )
        out = self.proj(out.transpose(-3, -2).flatten(-2))
        if self.dropout and self.training:
            out = F.dropout(out, self.dropout)
        if key_padding_mask is not None and not self.is_cross_attention:
            out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
        return out

    def _mask(self, key_padding_mask: Tensor | None, n_q: int, n_k: int, device: torch.device) -> SdpaMask | None:
        """The mask of the allowed keys, ``(*batch, 1, n_q, n_k)`` (:func:`sdpa_mask`); ``None`` where every
        key is allowed or ``is_causal`` says it (``n_q = n_k``). Causal self-attention query ``i`` sees keys
        ``≤ n_k - n_q + i``: the queries are the last ``n_q`` tokens (all of them, or those after a cache's)."""
        shift = 0 if self.is_cross_attention else n_k - n_q
        if key_padding_mask is None:  # a mask only where is_causal cannot say it and some key is hidden
            hidden = self.causal and n_q != n_k and (n_q > 1 or self.is_cross_attention)
            return sdpa_mask(torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(shift)) if hidden else None
        allowed = ~key_padding_mask[..., None, None, :]
        if self.causal:
            allowed = allowed & torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(shift)
        return sdpa_mask(allowed)
