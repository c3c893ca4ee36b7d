"""TransEvolve attention (eqs. 6, 9, 12-13): the block state from the block input, then attention at each depth."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...nn._conditioning import check_context, check_padding_mask, check_shape
from ._depth import _scalar_time, depth_signal
from ._masks import _allowed, _masked
from ._modes import _MODES, _PATHS, TransEvolveMode, _exact_path
from ._paths import _key_bias, _part
from ._state import TransEvolveState
from ._tiling import _exp_tiles, _pad_to_8


class TransEvolveAttention(nn.Module):
    """Time-evolving attention (eqs. 6, 9): the attention part of a :class:`TransEvolveField`.

    **Once per block**, from the block input ``x⁰`` (raw, no LayerNorm, as in the code), it computes a
    :class:`TransEvolveState` (:meth:`prepare`, or :meth:`bind` to keep it). Eq. 6 is attention on
    augmented tokens ``[x⁰_i, T]`` with ``D × D`` projections ``W'_Q, W'_K``, ``D = d + d' = 2d``, split
    into token columns ``W_{Q,x}`` (``D × d``) and time columns ``W̃_Q`` (``D × d'``, reshaped to
    ``(D, H, d/H)``), which gives, for head ``h``,

    .. math::

        a_{ij}(T) = \\underbrace{\\frac{Q_{i,h} \\cdot K_{j,h}}{\\sqrt{D/H}}}_{A_0}
            + \\underbrace{Q_i \\cdot \\tilde W_K^{h} T_h}_{A_1 T^\\top}
            + \\underbrace{(\\tilde W_Q^{h} T_h) \\cdot K_j}_{T A_2}
            + \\underbrace{\\textstyle\\sum_\\tau A_3[h, \\tau]\\, T_h[\\tau]^2}_{A_3 (T \\odot T)},
        \\qquad A_3[h, \\tau] = \\tilde W_Q[:, h, \\tau] \\cdot \\tilde W_K[:, h, \\tau]

    with ``W̃^h T_h = Σ_τ W̃[:, h, τ] T_h[τ]``. Conventions follow the official code: ``d' = d``
    (§7.1), ``A0`` scaled by ``1/sqrt(D/H)``, unscaled time terms on the full ``D``-wide ``Q``/``K``, and
    only the diagonal ``τ = τ'`` of the ``T–T`` term.

    **At depth t** (layer ``l = ⌊t⌋`` clamped to ``0 .. L-1``; ``T = T(t)`` from :func:`depth_signal`
    with layer ``l``'s amplitudes), eq. 9 without its skip and without a value projection:

    .. math:: \\mathrm{Attn}(t, x) = \\big[\\mathrm{softmax}(a(T) + M)_h\\, \\mathrm{LN}_l(x)_h\\big]_{h=1..H}\\, W_O^l

    ``M`` is ``-inf`` at masked keys. The ``A_1`` and ``A_3`` terms are constant along the softmax axis
    and cancel: the attention is ``softmax(A0 + 1 b_hᵀ)``, ``b_h[j] = K_j · W̃_Q^h T_h``. The ``mode``
    picks how this is evaluated: ``"fidelity"`` (every term as written), ``"factored"`` (``E = exp(A0)``
    once per block), ``"fused"`` (PyTorch's fused attention), or ``"auto"`` (factored up to
    :data:`AUTO_FACTORED_MAX_TOKENS`, else fused); all agree to float32 rounding. See the documentation
    page *TransEvolve attention: paths and performance*.

    Masks follow :class:`~neuralode_tf.nn.AttentionBranch`: padded keys get zero weight, padded queries a
    zero increment, and a query that may see no key attends to all.

    **Cross-attention** (``cross_attention=True``; eqs. 12-13): queries from the decoder block input
    ``x⁰``, keys from the encoder output ``m`` (``memory``) and values ``LN_l(m)``:

    .. math:: \\mathrm{CrossAttn}(t, x) = \\big[\\mathrm{softmax}(a(T) + M)_h\\, \\mathrm{LN}_l(m)_h\\big]_h\\, W_O^l

    with its own parameters (``T_ed`` of eq. 13). ``M`` masks the source padding (``memory_key_padding_mask``);
    queries at target padding (``key_padding_mask``) get a zero increment. It does not depend on the
    current ``x``: inside a block it is a forcing term.

    Parameters (initialised as in the code): ``w_q``, ``w_k`` (``D × D``, Glorot), and per layer
    ``coeffs`` (``(L, d)``, the amplitudes of ``T``, uniform ``±sqrt(6/d)``), the values' LayerNorm ``norm_weight``,
    ``norm_bias`` (``(L, d)``) and ``w_o`` (``(L, d, d)``, applied as ``heads @ w_o[l]``). The state is
    built outside the solve, so gradients reach ``w_q``, ``w_k`` and ``x⁰`` with ``gradient="backprop"``
    or ``"checkpoint"``, not through an adjoint ODE.

    Args:
        dim: ``d``, even and divisible by ``num_heads``.
        num_heads: ``H``.
        depth: ``L``, the number of layers of the block (the field lives on ``[0, L]``).
        causal: Mask keys after the query (self-attention only).
        cross_attention: Keys and values from the encoder output (``bind(memory=...)``).
        mode: The evaluation path, a :data:`TransEvolveMode`; may be reassigned later.
        time_scale: ``s`` of :func:`depth_signal` (the code's 64).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        *,
        causal: bool = False,
        cross_attention: bool = False,
        mode: TransEvolveMode = "auto",
        time_scale: float = 64.0,
    ):
        super().__init__()
        if causal and cross_attention:
            raise ValueError("cross-attention cannot be causal: every query sees the whole source")
        if dim % num_heads or dim % 2:
            raise ValueError(f"dim={dim} must be even and divisible by num_heads={num_heads}")
        if not (isinstance(depth, int) and depth >= 1):
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        self.mode = mode
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.dim, self.num_heads, self.depth = dim, num_heads, depth
        self.causal, self.cross_attention = causal, cross_attention
        self.time_scale = float(time_scale)
        width = 2 * dim
        self.w_q = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, width)))
        self.w_k = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, width)))
        bound = math.sqrt(6.0 / dim)
        self.coeffs = nn.Parameter(torch.empty(depth, dim).uniform_(-bound, bound))
        self.norm_weight = nn.Parameter(torch.ones(depth, dim))
        self.norm_bias = nn.Parameter(torch.zeros(depth, dim))
        self.w_o = nn.Parameter(torch.stack([nn.init.xavier_uniform_(torch.empty(dim, dim)) for _ in range(depth)]))
        self._state: TransEvolveState | None = None

    @property
    def mode(self) -> TransEvolveMode:
        """The evaluation path used by the next :meth:`prepare`, checked on assignment."""
        return self._mode

    @mode.setter
    def mode(self, mode: TransEvolveMode) -> None:
        if mode not in _MODES:
            raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(map(repr, _MODES))}")
        self._mode = mode

    def prepare(
        self,
        block_input: Tensor,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
    ) -> TransEvolveState:
        """The per-block state of ``x⁰ = block_input`` (``(*batch, n, d)``), for this module's mode.

        ``key_padding_mask`` ``(*batch, n)`` is True at padding of ``x⁰``. Cross-attention also needs
        the encoder output ``memory`` ``(*batch, m, d)``, the source of keys and values, and its
        padding ``memory_key_padding_mask`` ``(*batch, m)``; self-attention takes neither.
        """
        if self.cross_attention != (memory is not None):
            raise ValueError(
                "cross-attention needs memory= (the encoder output)"
                if self.cross_attention
                else "self-attention takes no memory; build it with cross_attention=True"
            )
        check_padding_mask(key_padding_mask, "key_padding_mask", block_input.shape[:-1], "block_input")
        if memory is not None:
            check_context(memory, "memory", block_input)
            check_padding_mask(memory_key_padding_mask, "memory_key_padding_mask", memory.shape[:-1], "memory")
        source = block_input if memory is None else memory
        n, device = block_input.shape[-2], block_input.device
        mode = _exact_path(self.mode, max(n, source.shape[-2]), device)
        pad = key_padding_mask if memory is None else memory_key_padding_mask
        q = block_input @ self.w_q[:, : self.dim].T
        k = source @ self.w_k[:, : self.dim].T
        time_q = self._time_columns(self.w_q)
        q_heads, k_heads = self._split_heads(q), self._split_heads(k)
        scale = 1.0 / math.sqrt(q_heads.shape[-1])
        make_state = functools.partial(
            TransEvolveState,
            mode=mode,
            causal=self.causal,
            keys_full=k,
            time_query=time_q,
            key_padding_mask=pad,
            query_padding_mask=key_padding_mask,
            memory=memory,
            tokens=tuple(block_input.shape[:-1]),
        )
        if mode == "fidelity":
            time_k = self._time_columns(self.w_k)
            return make_state(
                allowed=_allowed(pad, self.causal, n, device),
                scores=q_heads @ k_heads.transpose(-1, -2) * scale,
                query_time=torch.einsum("...iD,Dht->...hit", q, time_k),
                time_time=torch.einsum("Dht,Dht->ht", time_q, time_k),
            )
        queries, keys = _pad_to_8(q_heads * scale), _pad_to_8(k_heads)
        if mode == "fused":
            allowed = None if pad is None else _allowed(pad, self.causal, n, device)
            return make_state(allowed=allowed, queries=queries, keys=keys)
        allowed = _allowed(pad, self.causal, n, device)
        return make_state(allowed=allowed, queries=queries, keys=keys, weights=_exp_tiles(queries, keys, allowed))

    def bind(
        self,
        *,
        block_input: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
    ) -> None:
        """Compute and keep the state of the block input ``block_input`` (with its padding mask).

        ``forward`` then uses it at every depth until the next call. Without ``block_input`` the
        state is cleared. Cross-attention also uses ``memory`` and ``memory_key_padding_mask`` (see
        :meth:`prepare`); self-attention ignores them, so :class:`~neuralode_tf.ContinuousDepth`
        passes ``forward(x, block_input=x, key_padding_mask=m, memory=..., memory_key_padding_mask=...)``
        keywords straight through to every part of a block.
        """
        if block_input is None:
            self._state = None
        elif self.cross_attention:
            self._state = self.prepare(block_input, key_padding_mask, memory, memory_key_padding_mask)
        else:
            self._state = self.prepare(block_input, key_padding_mask)

    def forward(self, t: Tensor | float, x: Tensor, state: TransEvolveState | None = None) -> Tensor:
        """The increment ``Attn(t, x)``, with ``state`` or else the bound one."""
        state = self._state if state is None else state
        if state is None:
            raise RuntimeError(
                "TransEvolveAttention has no block state: call bind(block_input=x0, key_padding_mask=...) (plus "
                "memory=... for cross-attention) before solving, or pass block_input=x to ContinuousDepth's forward"
            )
        check_shape(x.shape[:-1], state.tokens, "x", "block_input", bound=state is self._state)
        layer, signal = self._depth(t)
        source = x if state.memory is None else state.memory
        values = self._split_heads(F.layer_norm(source, (self.dim,), self.norm_weight[layer], self.norm_bias[layer]))
        heads = _PATHS[state.mode](state, signal, values)
        out = heads.transpose(-3, -2).flatten(-2) @ self.w_o[layer]
        if state.query_padding_mask is not None:
            out = out.masked_fill(state.query_padding_mask.unsqueeze(-1), 0.0)
        return out

    def attention_weights(self, t: Tensor | float, state: TransEvolveState | None = None) -> Tensor:
        """The attention matrix at depth ``t``, ``softmax(A0 + 1 b(t)ᵀ + M)``, shaped ``(*batch, H, n, m)``.

        Needs a state from ``mode="fidelity"`` (which keeps ``A0``): ``prepare`` with that mode, or bind one.
        The query-side and ``T–T`` terms are left out because they cancel in the softmax.
        """
        state = self._state if state is None else state
        if state is None or state.mode != "fidelity":
            raise ValueError("attention_weights needs a state prepared in mode='fidelity' (it keeps A0)")
        _, signal = self._depth(t)
        scores = _part(state.scores, "scores", state)
        return _masked(scores + _key_bias(state, signal)[..., None, :], state.allowed).softmax(dim=-1)

    def _depth(self, t: Tensor | float) -> tuple[int, Tensor]:
        """The layer whose parameters act at ``t`` (on ``[l, l + 1)``) and the depth vector ``T(t)``."""
        time = _scalar_time(t)
        layer = min(max(math.floor(time), 0), self.depth - 1)
        return layer, depth_signal(time, self.coeffs[layer], self.num_heads, self.time_scale)

    def _time_columns(self, weight: Tensor) -> Tensor:
        # (D, d) time columns -> (D, H, d/H), head h owning columns h d/H .. (h+1) d/H - 1.
        return weight[:, self.dim :].reshape(weight.shape[0], self.num_heads, -1)

    def _split_heads(self, z: Tensor) -> Tensor:
        # (*batch, n, H * w) -> (*batch, H, n, w)
        return z.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2)
