"""TransEvolve (Dutta et al. 2021): attention computed once per block and evolved along depth.

A TransEvolve block of ``L`` layers computes its query/key products once, from the block input
``x⁰`` (eq. 6), and at depth ``l`` only adds a cheap depth-dependent term built from a vector
``T^l`` (eq. 7) before the softmax; the attention is applied to the current tokens without a value
projection (eq. 9). The feed-forward sub-layer is either the usual MLP ("fullFF") or one whose
weights are random rotations evolving with depth around a trainable diagonal (eqs. 10-11,
"randomFF").

Here the block is a field on depth-time ``t ∈ [0, L]``: the layer-``l`` parameters act on
``[l, l + 1)``, while ``T``, and the rotations of the random feed-forward, are functions of the
continuous ``t`` that equal the official code's ``T^l``, ``U^l``, ``V^l`` at ``t = l``. One
Lie-Trotter Euler step per unit of depth is then exactly the discrete block
``x += Attn_l(x); x += FF_l(x)`` for ``l = 0 .. L-1`` (the code's ``EncoderBlock``; its final
LayerNorm is applied outside the field).

The decoder (eqs. 12-13) adds encoder-decoder attention, built the same way with queries from the
decoder block input and keys from the encoder output: :class:`TransEvolveDecoderField` steps causal
self-attention, cross-attention and feed-forward in turn (the code's ``DecoderBlock``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_context, check_padding_mask, check_shape
from ..nn import MLPBranch
from .sharing import WeightSharedField
from .split import SplitField

__all__ = [
    "MODES",
    "AUTO_FACTORED_MAX_TOKENS",
    "depth_signal",
    "EvolvingAttentionState",
    "TransEvolveAttention",
    "RandomFeedForward",
    "TransEvolveField",
    "TransEvolveDecoderField",
]

MODES = ("auto", "fidelity", "factored", "fused")

AUTO_FACTORED_MAX_TOKENS: dict[str, int] = {"cpu": 4096, "cuda": 256}
"""Longest sequence (queries or keys) for which ``mode="auto"`` picks ``"factored"`` (else ``"fused"``), by device type.

CPU, measured by ``python -m benchmarks.transevolve`` (``benchmarks/results/transevolve_cpu.json``, d = 256,
8 heads, depth 6, forward + backward; 2026-11-24): ``factored`` is the faster exact path at every measured
length (1.05x / 1.05x / 1.02x / 1.04x / 0.92x the standard stack's speed at n = 256 / 1k / 2k / 3k / 4k, against
0.95x / 0.84x / 0.63x / 0.67x / 0.65x for ``fused``), but it holds ``n × n``
weights per head (2 GB against 0.6 GB at n = 4k, batch 1), so beyond the measured range ``auto`` switches
to ``fused``, whose memory stays ``O(n)``.
CUDA: a placeholder, not yet measured on a GPU. Other devices use the CUDA value."""


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


@dataclass
class EvolvingAttentionState:
    """What a block computes once from its input ``x⁰`` and every layer of the block reuses.

    With ``D = 2d`` (augmented width, see :class:`TransEvolveAttention`), ``Q = x⁰ W_{Q,x}ᵀ`` and
    ``K = s W_{K,x}ᵀ`` of shape ``(*batch, n, D)`` and ``(*batch, m, D)``, where the key source
    ``s`` is ``x⁰`` (self-attention, ``m = n``) or the encoder output (cross-attention), ``W̃_Q``,
    ``W̃_K`` the time columns reshaped to ``(D, H, d/H)``, and per-head slices ``Q_h``, ``K_h`` of
    width ``D/H`` (below, ``j`` runs over the ``m`` keys, ``i`` over the ``n`` queries):

    * ``keys_full``, ``(*batch, m, D)``: ``K``, and ``time_query``, ``(D, H, d/H)``: ``W̃_Q``. The
      depth-``t`` key bias (code: ``A1K`` times ``T``; paper: ``A_2``) is
      ``b_h[j] = K_j · Σ_τ W̃_Q[:, h, τ] T_h[τ](t)``, one ``(m × D)(D × H)`` product per
      evaluation. Every mode uses it.
    * ``scores`` (``A0``), ``(*batch, H, n, m)``: ``Q_h K_hᵀ / sqrt(D/H)``, unmasked, and
      ``query_time`` (``A1Q``; paper ``A_1``), ``(*batch, H, n, d/H)``: ``Q_i · W̃_K[:, h, τ]``, and
      ``time_time`` (``A2``; paper ``A_3``), ``(H, d/H)``: ``Σ_D W̃_Q[D, h, τ] W̃_K[D, h, τ]``.
      Fidelity only: the last two terms are constant along the softmax axis and cancel.
    * ``queries``, ``(*batch, H, n, P)``: ``Q_h / sqrt(D/H)``, and ``keys``, ``(*batch, H, m, P)``:
      ``K_h``, both zero-padded to ``P``, the next multiple of 8. Factored and fused.
    * ``weights``: ``E = exp(A0 - max_j A0)`` over the allowed keys, 0 elsewhere, as a tuple of row
      tiles ``(*batch, H, r, m)`` (see :func:`_exp_tiles`). Factored only.

    ``allowed`` is a boolean mask, True where a query may attend a key, broadcastable to
    ``(*batch, H, n, m)``, or None when all may; in fused mode a causal mask without padding is left
    to ``scaled_dot_product_attention(is_causal=True)`` instead. ``key_padding_mask`` ``(*batch, m)``
    is True at padding keys, ``query_padding_mask`` ``(*batch, n)`` at padding queries, whose
    increment is zeroed (for self-attention both are the tokens' padding). ``memory`` is the encoder
    output for cross-attention, whose LayerNorm gives the values, and None for self-attention.
    ``tokens`` is the shape ``(*batch, n)`` of the block input: the state serves tokens of that shape only.
    """

    mode: str
    causal: bool
    keys_full: Tensor
    time_query: Tensor
    key_padding_mask: Tensor | None
    allowed: Tensor | None
    tokens: tuple[int, ...]
    query_padding_mask: Tensor | None = None
    memory: Tensor | None = None
    scores: Tensor | None = None
    query_time: Tensor | None = None
    time_time: Tensor | None = None
    weights: tuple[Tensor, ...] | None = None
    queries: Tensor | None = None
    keys: Tensor | None = None


class TransEvolveAttention(nn.Module):
    """Time-evolving self-attention (eqs. 6, 9): the attention part of a :class:`TransEvolveField`.

    **Once per block**, from the block input ``x⁰`` (raw, no LayerNorm, as in the code), it
    computes an :class:`EvolvingAttentionState` (:meth:`prepare`, or :meth:`bind` to keep it). Eq. 6
    is attention on augmented tokens ``[x⁰_i, T]`` with augmented projections ``W'_Q, W'_K``
    of size ``D × D``, ``D = d + d'``, split into token columns ``W_{Q,x}`` (``D × d``) and time
    columns ``W̃_Q`` (``D × d'``), which gives

    .. math::

        a_{ij}(T) = \\underbrace{\\frac{Q_{i,h} \\cdot K_{j,h}}{\\sqrt{D/H}}}_{A_0}
            + \\underbrace{Q_i \\cdot \\tilde W_K^{h} T_h}_{A_1 T^\\top}
            + \\underbrace{(\\tilde W_Q^{h} T_h) \\cdot K_j}_{T A_2}
            + \\underbrace{\\textstyle\\sum_\\tau A_3[h, \\tau]\\, T_h[\\tau]^2}_{A_3 (T \\odot T)},
        \\qquad A_3[h, \\tau] = \\tilde W_Q[:, h, \\tau] \\cdot \\tilde W_K[:, h, \\tau]

    for head ``h``, with ``W̃^h T_h = Σ_τ W̃[:, h, τ] T_h[τ]`` (time columns reshaped to
    ``(D, H, d/H)``). Conventions follow the official code (Layer1/Layer2), not the looser text of
    the paper: ``d' = d`` (the paper's choice, §7.1; the code's ``time_dim = 64`` only works when
    ``d/H = 64``, here ``T_h`` always has ``d/H`` entries); ``Q`` and ``K`` have width ``D = 2d``
    and ``A0`` is scaled by ``1/sqrt(D/H)``, not the paper's ``1/sqrt(d/H)``; the time terms are
    unscaled and use the full ``D``-wide ``Q``/``K`` with head ``h``'s slice ``T_h``; the ``T–T``
    term keeps only the diagonal ``τ = τ'``, as the code's ``A2`` does.

    **At depth t** (layer ``l = ⌊t⌋`` clamped to ``0 .. L-1``; ``T = T(t)`` from
    :func:`depth_signal` with layer ``l``'s amplitudes):

    .. math:: \\mathrm{Attn}(t, x) = \\big[\\mathrm{softmax}(a(T) + M)_h\\, \\mathrm{LN}_l(x)_h\\big]_{h=1..H}\\, W_O^l

    (eq. 9 without its skip; no value projection, ``M`` is ``-inf`` at masked keys). The query-side
    term and the ``T–T`` term are constant along the softmax (key) axis, so they cancel: the
    attention is exactly ``softmax(A0 + 1 b_hᵀ)`` with a per-key bias ``b_h[j] = K_j · W̃_Q^h T_h``
    (which is also why ``W̃_K``, the time columns of ``w_k``, have a zero gradient up to rounding).
    Modes:

    * ``"fidelity"``: every term of eq. 6 as written, masked, softmax, applied. The reference.
    * ``"factored"``: ``E = exp(A0 - rowmax)`` is computed once per block (in row tiles of at most
      8 MiB), and depth-``t`` attention is ``(E diag(e^b) V) / (E e^b)``, one matmul of ``E`` with
      ``[e^b ⊙ V, e^b]``: no exponentials over ``n²`` per layer.
    * ``"fused"``: :func:`torch.nn.functional.scaled_dot_product_attention` on ``Q_h, K_h`` with
      values ``[e^b ⊙ V, e^b]`` (zero-padded to the query/key width), then numerator / denominator:
      the kernel's ``softmax(A0)`` reweighted by ``e^b`` and renormalised is ``softmax(A0 + b)``.
      This module builds no ``n × n`` tensor (whether the kernel does is up to PyTorch's dispatch):
      padding is a ``(*batch, 1, 1, n)`` mask and a causal mask without padding is
      ``is_causal=True``; only causal together with padding builds an ``n × n`` boolean mask.
    * ``"auto"``: ``"factored"`` when queries and keys number at most
      :data:`AUTO_FACTORED_MAX_TOKENS` for the device (4096 on the CPU, where it is the faster
      path at every measured length), else ``"fused"``.

    In factored and fused mode, ``b`` is shifted by its maximum over the non-padding keys (per batch and head), so
    ``e^b <= 1`` never overflows. If a row's denominator falls below ``tiny / eps`` of the dtype (its
    keys' ``e^b`` underflowed, e.g. a causal row that cannot see the largest-bias key when ``b``
    spans more than ~80), the evaluation is recomputed as a plain softmax of ``A0 + b``; the check
    reads one boolean on the host.

    All modes agree with ``"fidelity"`` to float32 rounding in outputs and gradients.

    Masks follow :class:`~neuralode_tf.nn.AttentionBranch`: ``key_padding_mask`` is True at
    padding (bool, ``(*batch, n)``); padded keys get zero weight, so real queries never depend on
    padded tokens; padded queries get a zero increment; a query that may see no key attends to all.

    **Cross-attention** (``cross_attention=True``; eqs. 12-13, the code's ``Layer1(x, enc)``): the
    same construction with queries from the decoder block input ``x⁰`` and keys from the encoder
    output ``m``, ``A0 = (x⁰ W_{Q,x}ᵀ)_h (m W_{K,x}ᵀ)_hᵀ / sqrt(D/H)``, ``b_h[j] = (m W_{K,x}ᵀ)_j ·
    W̃_Q^h T_h``, computed once per block, and values from the encoder output:

    .. math:: \\mathrm{CrossAttn}(t, x) = \\big[\\mathrm{softmax}(a(T) + M)_h\\, \\mathrm{LN}_l(m)_h\\big]_h\\, W_O^l

    (eq. 13 without its skip, with the code's LayerNorm on ``m``; ``M`` masks padding of the source
    keys, ``memory_padding_mask``; queries at target padding, ``key_padding_mask``, get a zero
    increment, while the code's ``-1e9`` on whole target-padding rows leaves their softmax
    unchanged). The increment does not depend on the current ``x``: inside a block it is a forcing
    term that varies with depth only through ``T(t)`` and ``l``. It has its own ``w_q``, ``w_k``,
    ``coeffs`` (the independent ``T_ed`` of eq. 13), LayerNorm and ``w_o``.

    Parameters, initialised as in the code: ``w_q``, ``w_k`` (its ``WQ``, ``WK``: ``D × D``, once
    per block, Glorot uniform), and per layer ``coeffs`` (``(L, d)``, uniform ``±sqrt(6/d)``), the
    LayerNorm on the values ``norm_weight``, ``norm_bias`` (``(L, d)``; torch's ``eps = 1e-5``,
    Keras's is ``1e-3``) and ``w_o`` (its ``WO``: ``(L, d, d)``, Glorot, no bias, applied as
    ``heads @ w_o[l]``). The code's dropout is left out.

    The state is built outside the solve, so gradients reach ``w_q``, ``w_k`` and ``x⁰`` with
    ``adjoint="backprop"`` or ``"checkpoint"``, not through an adjoint ODE (``adjoint="adjoint"``).

    Args:
        dim: ``d``, even and divisible by ``num_heads``.
        num_heads: ``H``.
        depth: ``L``, the number of layers of the block (the field lives on ``[0, L]``).
        causal: Mask keys after the query (self-attention only).
        cross_attention: Keys and values from the encoder output (``bind(memory=...)``).
        mode: One of :data:`MODES`.
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
        mode: str = "auto",
        time_scale: float = 64.0,
    ):
        super().__init__()
        if causal and cross_attention:
            raise ValueError("cross-attention cannot be causal: every query sees the whole source")
        if dim % num_heads or dim % 2:
            raise ValueError(f"dim={dim} must be even and divisible by num_heads={num_heads}")
        if not (isinstance(depth, int) and depth >= 1):
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(map(repr, MODES))}")
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
        self.dim, self.num_heads, self.depth = dim, num_heads, depth
        self.causal, self.cross_attention = causal, cross_attention
        self.mode, self.time_scale = mode, float(time_scale)
        width = 2 * dim
        self.w_q = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, width)))
        self.w_k = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, width)))
        bound = math.sqrt(6.0 / dim)
        self.coeffs = nn.Parameter(torch.empty(depth, dim).uniform_(-bound, bound))
        self.norm_weight = nn.Parameter(torch.ones(depth, dim))
        self.norm_bias = nn.Parameter(torch.zeros(depth, dim))
        self.w_o = nn.Parameter(torch.stack([nn.init.xavier_uniform_(torch.empty(dim, dim)) for _ in range(depth)]))
        self._state: EvolvingAttentionState | None = None

    def prepare(
        self,
        block_input: Tensor,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_padding_mask: Tensor | None = None,
    ) -> EvolvingAttentionState:
        """The per-block state of ``x⁰ = block_input`` (``(*batch, n, d)``), for this module's mode.

        ``key_padding_mask`` ``(*batch, n)`` is True at padding of ``x⁰``. Cross-attention also needs
        the encoder output ``memory`` ``(*batch, m, d)``, the source of keys and values, and its
        padding ``memory_padding_mask`` ``(*batch, m)``; self-attention takes neither.
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
            check_padding_mask(memory_padding_mask, "memory_padding_mask", memory.shape[:-1], "memory")
        source = block_input if memory is None else memory
        n = block_input.shape[-2]
        mode = self.mode
        if mode == "auto":
            limit = AUTO_FACTORED_MAX_TOKENS.get(block_input.device.type, AUTO_FACTORED_MAX_TOKENS["cuda"])
            mode = "factored" if max(n, source.shape[-2]) <= limit else "fused"
        query_pad = key_padding_mask
        pad = query_pad if memory is None else memory_padding_mask
        q = block_input @ self.w_q[:, : self.dim].T
        k = source @ self.w_k[:, : self.dim].T
        time_q = self._time_columns(self.w_q)
        q_heads, k_heads = self._split_heads(q), self._split_heads(k)
        scale = 1.0 / math.sqrt(q_heads.shape[-1])
        common = dict(
            mode=mode,
            causal=self.causal,
            keys_full=k,
            time_query=time_q,
            key_padding_mask=pad,
            query_padding_mask=query_pad,
            memory=memory,
            tokens=tuple(block_input.shape[:-1]),
        )
        if mode == "fidelity":
            time_k = self._time_columns(self.w_k)
            return EvolvingAttentionState(
                **common,
                allowed=_allowed(pad, self.causal, n, block_input.device),
                scores=q_heads @ k_heads.transpose(-1, -2) * scale,
                query_time=torch.einsum("...iD,Dht->...hit", q, time_k),
                time_time=torch.einsum("Dht,Dht->ht", time_q, time_k),
            )
        queries, keys = _pad_to_8(q_heads * scale), _pad_to_8(k_heads)
        if mode == "fused":
            allowed = None if pad is None else _allowed(pad, self.causal, n, block_input.device)
            return EvolvingAttentionState(**common, allowed=allowed, queries=queries, keys=keys)
        allowed = _allowed(pad, self.causal, n, block_input.device)
        return EvolvingAttentionState(
            **common, allowed=allowed, queries=queries, keys=keys, weights=_exp_tiles(queries, keys, allowed)
        )

    def bind(
        self,
        *,
        block_input: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_padding_mask: Tensor | None = None,
    ) -> None:
        """Compute and keep the state of the block input ``block_input`` (with its padding mask).

        ``forward`` then uses it at every depth until the next call. Without ``block_input`` the
        state is cleared. Cross-attention also uses ``memory`` and ``memory_padding_mask`` (see
        :meth:`prepare`); self-attention ignores them, so :class:`~neuralode_tf.ContinuousDepth`
        passes ``forward(x, block_input=x, key_padding_mask=m, memory=..., memory_padding_mask=...)``
        keywords straight through to every part of a block.
        """
        if block_input is None:
            self._state = None
        elif self.cross_attention:
            self._state = self.prepare(block_input, key_padding_mask, memory, memory_padding_mask)
        else:
            self._state = self.prepare(block_input, key_padding_mask)

    def forward(self, t: Tensor | float, x: Tensor, state: EvolvingAttentionState | None = None) -> Tensor:
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
        heads = _APPLY[state.mode](state, signal, values)
        out = heads.transpose(-3, -2).flatten(-2) @ self.w_o[layer]
        if state.query_padding_mask is not None:
            out = out.masked_fill(state.query_padding_mask.unsqueeze(-1), 0.0)
        return out

    def attention_weights(self, t: Tensor | float, state: EvolvingAttentionState | None = None) -> Tensor:
        """The attention matrix at depth ``t``, ``softmax(A0 + 1 b(t)ᵀ + M)``, shaped ``(*batch, H, n, m)``.

        Needs a state from ``mode="fidelity"`` (which keeps ``A0``): ``prepare`` with that mode, or bind one.
        The query-side and ``T–T`` terms are left out because they cancel in the softmax.
        """
        state = self._state if state is None else state
        if state is None or state.mode != "fidelity":
            raise ValueError("attention_weights needs a state prepared in mode='fidelity' (it keeps A0)")
        _, signal = self._depth(t)
        return _masked(state.scores + _key_bias(state, signal)[..., None, :], state.allowed).softmax(dim=-1)

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


def _key_bias(state: EvolvingAttentionState, signal: Tensor) -> Tensor:
    """``b_h[j] = K_j · Σ_τ W̃_Q[:, h, τ] T_h[τ]``, shape ``(*batch, H, m)``."""
    direction = torch.einsum("Dht,ht->Dh", state.time_query, signal)
    return (state.keys_full @ direction).transpose(-1, -2)


def _softmax_apply(logits: Tensor, allowed: Tensor | None, values: Tensor) -> Tensor:
    return _masked(logits, allowed).softmax(dim=-1) @ values


def _fidelity(state: EvolvingAttentionState, signal: Tensor, values: Tensor) -> Tensor:
    """``softmax(A0 + A1 Tᵀ + T A2 + A3 (T ⊙ T) + M) V``, every term of eq. 6 as written."""
    query_side = torch.einsum("...hit,ht->...hi", state.query_time, signal)
    both_sides = (state.time_time * signal * signal).sum(-1)
    logits = (
        state.scores + query_side[..., :, None] + _key_bias(state, signal)[..., None, :] + both_sides[:, None, None]
    )
    return _softmax_apply(logits, state.allowed, values)


def _key_weight(state: EvolvingAttentionState, bias: Tensor) -> Tensor:
    """``e^{b - shift}`` per key, ``(*batch, H, m, 1)``, with ``shift`` the largest bias of a non-padding key.

    So ``e^{b - shift} <= 1`` never overflows. Padding keys get ``e^0 = 1`` (they are masked anyway); a
    sample whose keys are all padding (whose rows attend to every key, see :func:`_allowed`) is shifted as
    if unpadded.
    """
    if state.key_padding_mask is None:
        return torch.exp(bias - bias.amax(dim=-1, keepdim=True).detach()).unsqueeze(-1)
    pad = state.key_padding_mask[..., None, :]
    pad = pad & ~pad.all(dim=-1, keepdim=True)
    shift = bias.masked_fill(pad, -math.inf).amax(dim=-1, keepdim=True).detach()
    return torch.exp((bias - shift).masked_fill(pad, 0.0)).unsqueeze(-1)


def _key_weighted(values: Tensor, key_weight: Tensor, width: int) -> Tensor:
    """``[e^b ⊙ V, e^b]``, zero-padded to ``width`` columns."""
    weighted = torch.cat([values * key_weight, key_weight], dim=-1)
    return F.pad(weighted, (0, width - weighted.shape[-1]))


def _normalised(state: EvolvingAttentionState, weighted_sum: Tensor, bias: Tensor, values: Tensor) -> Tensor:
    """``numerator / denominator`` from the columns of ``weighted_sum = P [e^b ⊙ V, e^b, 0...]``.

    If a row's denominator fell below ``tiny / eps`` of the dtype (its keys' ``e^b`` underflowed, e.g. a
    causal row that cannot see the largest-bias key when ``b`` spans more than ~80), that row, and only
    that row, is recomputed as a plain softmax of ``A0 + b``: the other rows, and so the other samples of
    the batch, keep their own result to the last bit. The check reads one boolean on the host.
    """
    width = values.shape[-1]
    numerator, denominator = weighted_sum[..., :width], weighted_sum[..., width : width + 1]
    info = torch.finfo(denominator.dtype)
    underflow = denominator < info.tiny / info.eps
    if not bool(underflow.any()):
        return numerator / denominator
    scores = state.queries @ state.keys.transpose(-1, -2)
    allowed = state.allowed
    if allowed is None and state.causal:
        allowed = _allowed(None, True, scores.shape[-2], scores.device)
    softmax = _softmax_apply(scores + bias[..., None, :], allowed, values)
    return torch.where(underflow, softmax, numerator / denominator.masked_fill(underflow, 1.0))


def _factored(state: EvolvingAttentionState, signal: Tensor, values: Tensor) -> Tensor:
    """``(E diag(e^b) V) / (E e^b)``: one matmul of each tile of ``E`` with ``[e^b ⊙ V, e^b]``."""
    bias = _key_bias(state, signal)
    weighted = _key_weighted(values, _key_weight(state, bias), _round_up_8(values.shape[-1] + 1))
    weighted_sum = torch.cat([tile @ weighted for tile in state.weights], dim=-2)
    return _normalised(state, weighted_sum, bias, values)


def _fused(state: EvolvingAttentionState, signal: Tensor, values: Tensor) -> Tensor:
    """``scaled_dot_product_attention(Q, K, [e^b ⊙ V, e^b])``, then numerator / denominator.

    The kernel's softmax of ``A0`` times the key weights ``e^b``, renormalised, is ``softmax(A0 + b)``.
    The values are padded to the query/key width: with unequal widths the CPU kernels fall back to the
    math path, which materialises the ``n × n`` weights.
    """
    bias = _key_bias(state, signal)
    weighted = _key_weighted(values, _key_weight(state, bias), state.queries.shape[-1])
    is_causal = state.causal and state.allowed is None
    weighted_sum = F.scaled_dot_product_attention(
        state.queries, state.keys, weighted, attn_mask=state.allowed, is_causal=is_causal, scale=1.0
    )
    return _normalised(state, weighted_sum, bias, values)


_APPLY: dict[str, Callable[[EvolvingAttentionState, Tensor, Tensor], Tensor]] = {
    "fidelity": _fidelity,
    "factored": _factored,
    "fused": _fused,
}


def _allowed(pad: Tensor | None, causal: bool, n: int, device: torch.device) -> Tensor | None:
    """True where a query may attend a key, ``(*batch, 1, 1 or n, n)``; None when every pair may."""
    allowed = None if pad is None else ~pad[..., None, None, :]
    if causal:
        lower = torch.ones(n, n, dtype=torch.bool, device=device).tril()
        allowed = lower if allowed is None else allowed & lower
    # A query that may see no key (all keys padding, or a padded query under a causal mask) attends
    # to every key instead of producing NaN; its increment is zeroed.
    return None if allowed is None else allowed | ~allowed.any(dim=-1, keepdim=True)


def _masked(scores: Tensor, allowed: Tensor | None) -> Tensor:
    return scores if allowed is None else scores.masked_fill(~allowed, -math.inf)


def _round_up_8(size: int) -> int:
    return size + (-size % 8)


def _pad_to_8(z: Tensor) -> Tensor:
    """Zero-pad the last dimension to a multiple of 8 (matmul and fused attention kernels prefer such widths)."""
    return F.pad(z, (0, _round_up_8(z.shape[-1]) - z.shape[-1]))


_TILE_BYTES = 8 * 2**20
"""Size of one tile of the factored weights ``E``. glibc serves allocations above 32 MiB with fresh
``mmap`` pages that fault on first touch every time, which made the backward pass of an untiled
``E`` (one ``n × n`` gradient per layer) 3x slower at n = 1k; tiles this small are reused from the heap."""


def _exp_tiles(queries: Tensor, keys: Tensor, allowed: Tensor | None) -> tuple[Tensor, ...]:
    """``E = exp(A0 - max_j A0)`` (0 at masked keys) in row tiles of at most :data:`_TILE_BYTES`."""
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


def _scalar_time(t: Tensor | float) -> float:
    if isinstance(t, Tensor):
        if t.numel() != 1:
            raise ValueError(
                "TransEvolve fields take one depth-time per evaluation; per-sample times (torchode's per_sample) "
                f"are not supported, got t of shape {tuple(t.shape)}"
            )
        return float(t.detach())
    return float(t)


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
        hidden_dim: Hidden width (default ``4 d``, even).
    """

    def __init__(self, dim: int, hidden_dim: int | None = None):
        super().__init__()
        hidden_dim = 4 * dim if hidden_dim is None else hidden_dim
        self.norm = nn.LayerNorm(dim)
        self.expand = _RandomProjection(dim, hidden_dim)
        self.contract = _RandomProjection(hidden_dim, dim)

    def forward(self, t: Tensor | float, x: Tensor) -> Tensor:
        time = _scalar_time(t)
        return self.contract(torch.relu(self.expand(self.norm(x), time)), time)


class _TransEvolveBlock(SplitField):
    """A TransEvolve block as a split field whose last part is the depth-varying feed-forward stack."""

    @property
    def feed_forward(self) -> WeightSharedField:
        return self.terms[-1]

    @property
    def jump_times(self) -> list[float]:
        """The layer boundaries ``1 .. L-1``, where the parameters change."""
        return self.feed_forward.jump_times


class TransEvolveField(_TransEvolveBlock):
    """One TransEvolve block of ``L`` layers as a field on depth-time ``[0, L]`` (Dutta et al. 2021, §6).

    .. math:: \\frac{dx}{dt} = \\mathrm{Attn}(t, x; x^0) + \\mathrm{FF}(t, x)

    with :class:`TransEvolveAttention` (state from the block input ``x⁰``) and, per layer, a
    :class:`RandomFeedForward` (``feed_forward="random"``, TransEvolve-randomFF) or a
    :class:`~neuralode_tf.nn.MLPBranch` (``"full"``, TransEvolve-fullFF; GELU where the code uses
    ReLU). Layer ``l`` acts on ``[l, l + 1)`` (the feed-forward part is a
    :class:`~neuralode_tf.fields.WeightSharedField` of the ``L`` layers). :attr:`parts` is
    ``(attention, feed_forward)``, so one Lie-Trotter Euler step per unit of depth is the discrete
    block ``x += Attn_l(x); x += FF_l(x)``, ``l = 0 .. L-1``::

        field = TransEvolveField(64, num_heads=4, depth=3)
        field.attention.bind(block_input=x, key_padding_mask=pad)
        y = solve(field, x, [0, 3], method="lie_trotter", steps=3).y1
        # or: ContinuousDepth(field, t1=3, method="lie_trotter")(x, block_input=x, key_padding_mask=pad)

    The code's block-final LayerNorm is not part of the field. **Padding:** real tokens never depend
    on padded ones (padded keys get zero attention weight), so on a fixed grid they follow the
    trajectory of the sequence without its padded positions; padded tokens get a zero attention
    increment but still move under the feed-forward, which acts on every position.

    Args:
        dim, num_heads, depth, causal, mode, time_scale: As in :class:`TransEvolveAttention`.
        feed_forward: ``"random"`` or ``"full"``.
        hidden_dim: Hidden width of the feed-forward layers (default ``4 dim``).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        *,
        feed_forward: str = "random",
        hidden_dim: int | None = None,
        causal: bool = False,
        mode: str = "auto",
        time_scale: float = 64.0,
    ):
        feed_forward_part = _feed_forward(feed_forward, dim, hidden_dim, depth)
        attention = TransEvolveAttention(dim, num_heads, depth, causal=causal, mode=mode, time_scale=time_scale)
        super().__init__(attention, feed_forward_part)

    @property
    def attention(self) -> TransEvolveAttention:
        return self.terms[0]


class TransEvolveDecoderField(_TransEvolveBlock):
    """One TransEvolve decoder block of ``L`` layers as a field on depth-time ``[0, L]`` (eqs. 12-13).

    .. math:: \\frac{dy}{dt} = \\mathrm{SelfAttn}(t, y; y^0) + \\mathrm{CrossAttn}(t; y^0, m) + \\mathrm{FF}(t, y)

    with a causal :class:`TransEvolveAttention` whose state comes from the decoder block input
    ``y⁰`` (eq. 12, ``A^{dec}``), a cross-attention one (``cross_attention=True``; eq. 12,
    ``A^{ed}``: queries from ``y⁰``, keys and values from the encoder output ``m``) and, per layer,
    the feed-forward of :class:`TransEvolveField`. :attr:`parts` is ``(self_attention,
    cross_attention, feed_forward)``, so one Lie-Trotter Euler step per unit of depth is the code's
    ``DecoderBlock`` loop ``y += SelfAttn_l(y); y += CrossAttn_l(y); y += FF_l(y)``,
    ``l = 0 .. L-1`` (eq. 13 followed by eq. 11 or 3)::

        field = TransEvolveDecoderField(64, num_heads=4, depth=3)
        block = ContinuousDepth(field, t1=3, method="lie_trotter")
        y = block(y0, block_input=y0, key_padding_mask=tgt_pad, memory=m, memory_padding_mask=src_pad)

    Every part is causal in the target positions. The code's block-final LayerNorm is not part of
    the field. Padding (``key_padding_mask`` of the target, ``memory_padding_mask`` of the source)
    acts as in :class:`TransEvolveField`: real target tokens never depend on padded target or source
    tokens, while padded target tokens still move under the feed-forward.

    Args:
        dim, num_heads, depth, mode, time_scale: As in :class:`TransEvolveAttention`.
        feed_forward, hidden_dim: As in :class:`TransEvolveField`.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        depth: int,
        *,
        feed_forward: str = "random",
        hidden_dim: int | None = None,
        mode: str = "auto",
        time_scale: float = 64.0,
    ):
        feed_forward_part = _feed_forward(feed_forward, dim, hidden_dim, depth)
        settings = dict(mode=mode, time_scale=time_scale)
        self_attention = TransEvolveAttention(dim, num_heads, depth, causal=True, **settings)
        cross_attention = TransEvolveAttention(dim, num_heads, depth, cross_attention=True, **settings)
        super().__init__(self_attention, cross_attention, feed_forward_part)

    @property
    def self_attention(self) -> TransEvolveAttention:
        return self.terms[0]

    @property
    def cross_attention(self) -> TransEvolveAttention:
        return self.terms[1]


def _feed_forward(kind: str, dim: int, hidden_dim: int | None, depth: int) -> WeightSharedField:
    """A block's ``depth`` feed-forward layers, ``"random"`` (eq. 11) or ``"full"`` (eq. 3), ``l`` on ``[l, l+1)``."""
    layer_types: dict[str, type[nn.Module]] = {"random": RandomFeedForward, "full": MLPBranch}
    if kind not in layer_types:
        raise ValueError(f"unknown feed_forward {kind!r}; valid: 'random', 'full'")
    return WeightSharedField([layer_types[kind](dim, hidden_dim) for _ in range(depth)], depth)
