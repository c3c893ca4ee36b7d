"""The attention of a Hugging Face block as a residual branch: the block's own projections around one
:func:`torch.nn.functional.scaled_dot_product_attention`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ....nn import KVCache
from ....nn._conditioning import check_padding_mask
from ....nn._empty_rows import SdpaMask, attend, sdpa_mask
from ....nn.rotary import rotate

__all__ = ["AttentionMasks", "TransformersAttention", "split_heads"]


def split_heads(z: Tensor, head_dim: int) -> Tensor:
    """``(B, n, H * d_h) -> (B, H, n, d_h)``."""
    return z.unflatten(-1, (-1, head_dim)).transpose(-3, -2)


class AttentionMasks:
    """The boolean attention masks of one padding mask, built once and shared by the attention modules of a model
    (:func:`~neuralode_tf.models.from_transformers` gives its blocks one): each mask, keyed by length, device,
    causality and window, is built for the first module that needs it and reused by the others until another
    padding mask (a new tensor, or this one changed in place) arrives."""

    def __init__(self) -> None:
        self._padding: tuple[Tensor | None, int] = (None, 0)
        self._masks: dict[tuple[int, torch.device, bool, int | None], SdpaMask | None] = {}

    def get(
        self, padding: Tensor | None, n: int, device: torch.device, causal: bool, window: int | None
    ) -> SdpaMask | None:
        """The mask ``(B or 1, 1, n, n)`` of the allowed keys (:func:`~neuralode_tf.nn._empty_rows.sdpa_mask`), or
        ``None`` where ``is_causal`` (or nothing) says it all."""
        version = 0 if padding is None else padding._version
        if padding is not self._padding[0] or version != self._padding[1]:
            self._padding, self._masks = (padding, version), {}
        key = (n, device, causal, window if window is not None and n > window else None)
        if key not in self._masks:
            self._masks[key] = _mask(padding, *key)
        return self._masks[key]


def _mask(padding: Tensor | None, n: int, device: torch.device, causal: bool, window: int | None) -> SdpaMask | None:
    if padding is None and window is None:
        return None
    i = torch.arange(n, device=device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=device)
    if causal:
        allowed = i[:, None] >= i[None, :]
    if window is not None:
        allowed = allowed & (i[:, None] - i[None, :] < window)
    if padding is None:
        return sdpa_mask(allowed[None, None])
    return sdpa_mask(allowed & ~padding[..., None, None, :])


class TransformersAttention(nn.Module):
    """Self-attention of a Hugging Face block, ``x -> W_o · [head_1, ..., head_H]`` with no skip connection:

    .. math::

        \\mathrm{head}_h = \\mathrm{softmax}\\Big(s\\, R(q_h)\\, R(k_{g(h)})^\\top + M\\Big)\\, v_{g(h)},
        \\qquad (q, k, v) = \\mathrm{project}(N(x))

    (Vaswani et al. 2017, eq. 1), where ``N`` is the block's pre-norm (identity for a post-norm block), ``s`` the
    block's scale, ``R`` rotary positions bound per forward (identity without them), ``g(h)`` the key/value
    head of query head ``h`` (grouped-query attention, Ainslie et al. 2023: ``H / H_kv`` query heads share one),
    and ``M`` is ``-inf`` where attention is not allowed: at padded keys, after the query (``causal``) and
    ``window`` or more positions before it (sliding window: key ``j`` of query ``i`` needs ``i - j < window``).
    A query that may see no key (a row that is all padding, a left-padded query under a causal mask) has all its
    attention weights zero: its head outputs are zero, as in Hugging Face's default ``sdpa`` attention in
    transformers 5, so the converted model equals that model at every position, padded ones included (transformers
    4.52 gives such queries other values; all other positions are equal under both).

    A subclass (one per family) defines :meth:`project`, the block's own query/key/value projections, which
    hold the block's parameters (shared, not copied). :meth:`qkv` gives the ``R(q), R(k), v`` that the attention
    weights are made of, so a reading that needs the logits ``s R(q) R(k)ᵀ`` (evolving attention, Wang et al.
    2021) can compute them from it and :attr:`scale`.

    Args:
        norm: The block's pre-norm ``N``, or ``None`` (post-norm block).
        out: ``W_o`` (with the block's dropout after it, if any).
        num_heads, num_kv_heads, head_dim: ``H``, ``H_kv`` and ``d_h``.
        scale: ``s`` (usually ``d_h^{-1/2}``).
        causal: Mask the keys after each query (decoders).
        window: Sliding-window width, or ``None``.
        dropout: Dropout on the attention weights in training mode (the block's own).
        softcap: ``c`` of attention-logit soft-capping (Gemma 2), or ``None``: the logits ``s R(q) R(k)ᵀ`` become
            ``c tanh(logits / c)`` before the mask and the softmax. ``scaled_dot_product_attention`` cannot cap, so
            with it the attention is computed explicitly (logits, cap, mask, softmax, dropout, times ``v``, in the
            tokens' dtype; the query heads of one key/value head in one matrix product, without copying keys or
            values per query head), under the same masks, KV cache included; a query that may see no key still gets
            all-zero weights.

    **Key/value cache** (causal attention): with a :class:`~neuralode_tf.nn.KVCache` bound, ``x`` holds the tokens after
    the ``L`` the cache holds; their rotated keys and values join the call's slot and query ``i`` (position ``L + i``)
    attends to the keys ``0 .. L + i`` (within the window), as the forward over all tokens does.

    Attributes:
        masks: The :class:`AttentionMasks` it takes its mask from (its own, or one shared by a model's blocks).
    """

    def __init__(
        self,
        norm: nn.Module | None,
        out: nn.Module,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        scale: float,
        causal: bool,
        window: int | None = None,
        dropout: float = 0.0,
        softcap: float | None = None,
    ):
        super().__init__()
        self.norm = norm if norm is not None else nn.Identity()
        self.out = out
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scale, self.causal, self.window, self.dropout = scale, causal, window, dropout
        self.softcap = softcap
        self.masks = AttentionMasks()
        self._key_padding_mask: Tensor | None = None
        self._rotary: tuple[Tensor, Tensor] | None = None
        self._kv_cache: KVCache | None = None

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries ``(B, H, n, d_h)``, keys and values ``(B, H_kv, n, d_h)`` of the normalised tokens ``h``."""
        raise NotImplementedError(f"{type(self).__name__} must define project(h) -> (q, k, v)")

    def bind(
        self,
        *,
        key_padding_mask: Tensor | None = None,
        rotary: tuple[Tensor, Tensor] | None = None,
        kv_cache: KVCache | None = None,
    ) -> None:
        """Set the per-forward conditioning: ``key_padding_mask`` bool ``(B, n)``, True at padding, ``rotary``,
        the ``(cos, sin)`` of the tokens' positions, each ``(B or 1, n, r)`` (Hugging Face's rotary embedding
        module's output), and a ``kv_cache`` (causal attention, no padding). :class:`~neuralode_tf.ContinuousDepth`
        calls it with the keywords of its forward; the attention mask is built at the first evaluation after it,
        once for all modules sharing :attr:`masks`."""
        if kv_cache is not None and not self.causal:
            raise ValueError("a KVCache serves causal attention: later tokens would change earlier ones here")
        if kv_cache is not None and key_padding_mask is not None:
            raise ValueError("a KVCache takes no padding: decode unpadded sequences")
        self._kv_cache = kv_cache
        self._key_padding_mask = key_padding_mask
        self._rotary = None if rotary is None else (rotary[0].unsqueeze(-3), rotary[1].unsqueeze(-3))

    def qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``R(q), R(k), v`` of the tokens ``x``: normalised, projected, rotated by the bound positions."""
        q, k, v = self.project(self.norm(x))
        if self._rotary is not None:
            cos, sin = self._rotary
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        return q, k, v

    @property
    def key_padding_mask(self) -> Tensor | None:
        """The bound padding mask, bool ``(B, n)``, True at padding (``None``: no padding bound)."""
        return self._key_padding_mask

    def attention_mask(self, x: Tensor) -> SdpaMask | None:
        """The mask ``(B or 1, 1, n, n)`` of the tokens ``x`` (:func:`~neuralode_tf.nn._empty_rows.sdpa_mask`:
        where query ``i`` may attend to key ``j``, the complement of ``M``'s ``-inf`` entries, and the queries that
        see no key), from the bound padding; ``None`` where there is no mask or ``is_causal`` says it all.

        Raises:
            ValueError: the bound padding mask does not fit ``x``.
        """
        check_padding_mask(self._key_padding_mask, "key_padding_mask", x.shape[:-1], "x", bound=True)
        return self.masks.get(self._key_padding_mask, x.shape[-2], x.device, self.causal, self.window)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        if self._kv_cache is None:
            mask = self.attention_mask(x)
        else:
            k, v = self._kv_cache.append(k, v)
            mask = self._cached_mask(q.shape[-2], k.shape[-2], x.device)
        dropout = self.dropout if self.training else 0.0
        if self.softcap is not None:
            out = self._capped_attention(q, k, v, mask, dropout, self.softcap)
        else:
            gqa = {"enable_gqa": True} if self.num_kv_heads != self.num_heads else {}
            is_causal = self.causal and mask is None and q.shape[-2] == k.shape[-2]
            out = attend(q, k, v, mask, dropout_p=dropout, is_causal=is_causal, scale=self.scale, **gqa)
        return self.out(out.transpose(-3, -2).flatten(-2))

    def _capped_attention(
        self, q: Tensor, k: Tensor, v: Tensor, mask: SdpaMask | None, dropout: float, cap: float
    ) -> Tensor:
        """``softmax(c tanh(s q kᵀ / c) + M) v`` ``(B, H, n_q, d_h)``, the ``G = H / H_kv`` query heads of a key/value
        head stacked along the queries (``(B, H_kv, G n_q, d_h)``) so that keys and values are read in place."""
        batch, heads, n_q, head_dim = q.shape
        n_k = k.shape[-2]
        logits = (q.reshape(batch, k.shape[-3], -1, head_dim) @ k.transpose(-2, -1)).mul_(self.scale / cap).tanh()
        # c tanh(.) in place where no gradient needs tanh's output kept
        logits = (logits * cap if logits.requires_grad else logits.mul_(cap)).unflatten(-2, (-1, n_q))
        if mask is not None:
            logits.masked_fill_(~mask.allowed.unsqueeze(-3), -torch.inf)
        elif self.causal and n_q > 1:
            later = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu_(n_k - n_q + 1)
            logits.masked_fill_(later, -torch.inf)
        weights = logits.softmax(-1)
        if dropout:
            weights = nn.functional.dropout(weights, dropout)
        out = (weights.flatten(-3, -2) @ v).view(batch, heads, n_q, head_dim)
        return out if mask is None else out.masked_fill_(mask.blind, 0.0)

    def _cached_mask(self, n_q: int, n_k: int, device: torch.device) -> SdpaMask | None:
        """The mask of the last ``n_q`` of ``n_k`` tokens: query ``i`` sees keys ``j <= n_k - n_q + i`` within the
        window; ``None`` where it hides no key (one new token before the window is full) or ``is_causal`` says it."""
        window = self.window if self.window is not None and n_k > self.window else None
        if (n_q == 1 or n_q == n_k) and window is None:
            return None
        i = torch.arange(n_k - n_q, n_k, device=device)[:, None]
        j = torch.arange(n_k, device=device)[None]
        allowed = j <= i if window is None else (j <= i) & (i - j < window)
        return sdpa_mask(allowed[None, None])
