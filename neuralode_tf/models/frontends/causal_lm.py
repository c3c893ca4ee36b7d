"""A decoder-only language model over any reading of its blocks, with key/value-cached generation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ...nn import AttentionBranch, KVCache, MLPBranch
from ...nn._conditioning import check_padding_mask
from .._generation import check_cacheable, check_sampling, sample_next
from .._inputs import check_token_ids, warn_if_dropout_samples
from ..readings.blocks import _evolving_settings, _transformer_sets
from ..readings.stack import _named_field, stack_encoder

__all__ = ["CausalLM"]


class CausalLM(nn.Module):
    """A GPT (Radford et al. 2019; nanoGPT's layout) whose stack of blocks is read as continuous depth.

    .. math::

        x(0) = E[\\mathrm{tokens}] + P, \\qquad \\frac{dx}{dt} = f(t, x) \\text{ on } [0, T], \\qquad
        \\mathrm{logits} = N\\big(x(T)\\big)\\, E^\\top

    ``E`` is the token embedding, tied to the output projection (``tie_weights``), ``P`` the learned positions
    (``positions="rotary"``: none here, the attention rotates queries and keys instead,
    :func:`~neuralode_tf.nn.apply_rotary`) and ``N`` the final LayerNorm. The blocks are pre-norm causal
    self-attention (:class:`~neuralode_tf.nn.AttentionBranch` ``(causal=True)``, through
    ``scaled_dot_product_attention``) and an MLP, with nanoGPT's dropout (embeddings, attention weights,
    both branch outputs) and initialisation (``N(0, 0.02)``, output projections ``0.02/sqrt(2 depth)``).
    The default, ``field="split"`` with one Lie-Trotter Euler step per layer, is the discrete GPT.

    ``field="composed"`` is the released OT-Transformer code (``KelvinKan/OT-Transformer``, ``model.py``): the
    whole stack with its inner residuals and ``N`` inside the field, ``x' = N(B_D ∘ ... ∘ B_1(x))`` on
    ``[0, 1]``, Euler with ``steps`` steps, and the head reading ``x(T)`` with no norm after it; ``norms=False``
    switches every LayerNorm off, as its Shakespeare run does. With ``transport_cost=λ`` the solve carries the
    kinetic energy and reports ``λ/2 · mean e(T)`` as the encoder's
    :attr:`~neuralode_tf.ContinuousDepth.regularization` (Kan et al. 2025, eq. 8), which the training loop adds to
    the loss (:func:`~neuralode_tf.continuous.regularization`). The released code adds ``λ · mean e(T)`` (no
    ``1/2``), so its ``lmbda`` is ``transport_cost = 2 lmbda`` here.

    **Causality.** Every reading is causal in the positions, so every fixed-grid solve is exactly causal:
    the logits at ``i`` do not depend on tokens after ``i`` (``tests/test_causal_lm.py`` checks their gradient is
    0.0). An adaptive solve is not, and warns (:class:`~neuralode_tf.numerics.CausalityWarning`). TransEvolve
    (Dutta et al. 2021) is not offered: its blocks compute their attention products once from the block input,
    which this single-stack reading does not pass, and a cache would have to hold those products per block.

    Args:
        vocab_size: Number of token ids.
        dim, depth, num_heads: Width ``d``, number of blocks ``D`` and attention heads (must divide ``d``).
        block_size: The longest context; :meth:`generate` crops to it as nanoGPT does.
        field: The name of a reading of the model's own blocks (:data:`~neuralode_tf.models.FIELDS`: ``"split"``,
            ``"parallel"``, ``"composed"``, ``"node"``, ``"evolving"``, ``"discrete"``), or a ready-made field
            module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out ``mlp_hidden``, ``num_sets``, ``evolving``).
        positions: ``"learned"`` (GPT's) or ``"rotary"`` (Su et al. 2021).
        mlp_hidden: Hidden width of the MLPs (default ``4 d``).
        dropout: nanoGPT's dropout probability (drawn afresh at every field evaluation in training mode).
        norms: ``False`` removes every LayerNorm (the released OT code's Shakespeare run).
        tie_weights: Share ``E`` between the embedding and the output projection (GPT-2's).
        bias: Biases in the linear layers and LayerNorms (nanoGPT's ``bias``; its ``train.py`` default is False).
        num_sets: Independent parameter sets (weight sharing, Zhong et al. 2022).
        transport_cost: ``λ`` of the kinetic-energy regularisation (``None``: none).
        evolving: For ``field="evolving"``: :class:`~neuralode_tf.nn.EvolvingAttentionBranch` settings; it takes
            none of ``positions="rotary"``, ``norms=False``, ``dropout``, ``bias=False``.
        **solve_options: Settings of :func:`~neuralode_tf.models.stack_encoder` (``method``, ``steps``,
            ``step_size``, ``t1``, ``inner_residuals``, any argument of :func:`~neuralode_tf.solve`).

    Shapes:
        ``tokens``: integer ids ``(B, n)``, ``n <= block_size``; ``key_padding_mask``: bool ``(B, n)``, True at
        padding. Logits: ``(B, n, vocab_size)``.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        depth: int,
        num_heads: int,
        *,
        block_size: int,
        field: str | nn.Module = "split",
        positions: Literal["learned", "rotary"] = "learned",
        mlp_hidden: int | None = None,
        dropout: float = 0.0,
        norms: bool = True,
        tie_weights: bool = True,
        bias: bool = True,
        num_sets: int | None = None,
        transport_cost: float | None = None,
        evolving: Mapping[str, Any] | None = None,
        **solve_options: Any,
    ):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("block_size", block_size)):
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if positions not in ("learned", "rotary"):
            raise ValueError(f"positions must be 'learned' or 'rotary', got {positions!r}")
        settings = _evolving_settings(field, evolving)
        if settings is not None:
            refused = [
                name
                for name, given in [
                    ("positions='rotary'", positions != "learned"),
                    ("norms=False", not norms),
                    ("dropout", dropout != 0),
                    ("bias=False", not bias),
                    ("evolving['causal'] (it is causal)", "causal" in settings),
                ]
                if given
            ]
            if refused:
                raise ValueError(f"field='evolving' (EvolvingAttentionBranch) takes no {', '.join(refused)}")
            settings = {**settings, "causal": True}
        attention = dict(causal=True, bias=bias, norm_bias=bias, rotary=positions == "rotary", dropout=dropout)
        mlp = dict(bias=bias, norm_bias=bias, dropout=dropout)
        sets = _named_field(
            field,
            lambda _: _transformer_sets(
                dim, num_heads, depth, mlp_hidden, num_sets, False, settings, norm="pre" if norms else "none",
                attention=None if settings is not None else attention, mlp=mlp,
            ),
            mlp_hidden=mlp_hidden,
            num_sets=num_sets,
            evolving=evolving,
        )
        rotated = isinstance(field, nn.Module) and any(getattr(m, "rotary", False) for m in field.modules())
        if isinstance(field, nn.Module) and positions == "rotary" and not rotated:
            raise ValueError("positions='rotary' needs AttentionBranch(rotary=True) in the ready-made field")
        self.block_size = block_size
        self.embed = nn.Embedding(vocab_size, dim)
        self.pos_embed = nn.Embedding(block_size, dim) if positions == "learned" else None
        self.drop = nn.Dropout(dropout)
        final_norm = nn.LayerNorm(dim, bias=bias) if norms else None
        inside = field == "composed"
        self.encoder = stack_encoder(
            field, depth, sets, final_norm=final_norm if inside else None, transport_cost=transport_cost,
            **solve_options,
        )
        self.norm = final_norm if final_norm is not None and not inside else nn.Identity()
        self.head = nn.Linear(dim, vocab_size, bias=False)
        _init_gpt2([self.embed, self.pos_embed, self.head, *([self.encoder] if sets is not None else [])], depth)
        if tie_weights:
            self.head.weight = self.embed.weight

    def embeddings(self, tokens: Tensor, start: int = 0, *, check_range: bool = True) -> Tensor:
        """``x(0)`` ``(B, n, dim)`` of ``tokens`` ``(B, n)`` at positions ``start .. start + n - 1``: token plus learned
        position embeddings (rotary positions enter in the attention), then dropout. An id outside ``[0, vocab_size)``
        raises ``ValueError`` (one synchronisation with the device; ``check_range=False`` skips it, for known ids)."""
        check_token_ids(tokens, "tokens", self.embed.num_embeddings if check_range else None)
        if tokens.ndim != 2 or not tokens.shape[1]:
            raise ValueError(f"tokens must be (B, n) with n >= 1, got shape {tuple(tokens.shape)}")
        if start + tokens.shape[1] > self.block_size:
            held = f"{start} cached and " if start else ""
            raise ValueError(f"{held}{tokens.shape[1]} tokens exceed block_size={self.block_size}")
        x = self.embed(tokens)
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(start, start + tokens.shape[1], device=tokens.device))
        return self.drop(x)

    def forward_features(
        self, tokens: Tensor, key_padding_mask: Tensor | None = None, *, kv_cache: KVCache | None = None
    ) -> Tensor:
        """``N(x(T))`` ``(B, n, dim)``. With a ``kv_cache`` (:class:`~neuralode_tf.nn.KVCache`) ``tokens`` continue
        the ``kv_cache.length`` tokens it holds, which are not recomputed, and the cache grows by ``n``; the field's
        attention must be :class:`~neuralode_tf.nn.AttentionBranch` ``(causal=True)``, whose ``bind`` takes it."""
        if kv_cache is None:
            x = self.embeddings(tokens)
            check_padding_mask(key_padding_mask, "key_padding_mask", x.shape[:-1], "tokens")
            return self.norm(self.encoder(x, key_padding_mask=key_padding_mask))
        if key_padding_mask is not None:
            raise ValueError("a kv_cache takes no key_padding_mask: decode unpadded sequences")
        check_cacheable(self)
        return self._cached_features(tokens, kv_cache)

    def _cached_features(self, tokens: Tensor, kv_cache: KVCache, check_range: bool = True) -> Tensor:
        """:meth:`forward_features` with a cache, once
        :func:`~neuralode_tf.models._generation.check_cacheable` has passed."""
        x = self.embeddings(tokens, kv_cache.length, check_range=check_range)
        with kv_cache.extending(tokens.shape[1]):
            x = self.encoder(x, kv_cache=kv_cache)
        return self.norm(x)

    def forward_head(self, features: Tensor) -> Tensor:
        """Logits ``(B, n, vocab_size)`` of the features."""
        return self.head(features)

    def forward(
        self, tokens: Tensor, key_padding_mask: Tensor | None = None, *, kv_cache: KVCache | None = None
    ) -> Tensor:
        """Next-token logits ``(B, n, vocab_size)`` at every position (:meth:`forward_features`)."""
        return self.forward_head(self.forward_features(tokens, key_padding_mask, kv_cache=kv_cache))

    @torch.no_grad()
    def generate(
        self,
        prompt: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        *,
        cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Sample ``max_new_tokens`` tokens after ``prompt`` ``(B, n0)``; returns ``(B, n0 + max_new_tokens)``.

        Each token is drawn from ``softmax(logits / temperature)`` at the last position, restricted to the
        ``top_k`` most likely (``top_k=1``: greedy), with ``generator``. The context is the last ``block_size``
        tokens (nanoGPT's crop). With ``cache=True`` (:class:`~neuralode_tf.nn.KVCache`) each step runs the solve
        on the new token alone, reading the earlier tokens' keys and values per solver step, stage and layer;
        its logits equal those of recomputing the whole context up to rounding (``tests/test_causal_lm.py``).
        Once the context is longer than ``block_size`` the window slides, every kept token's position (and, for
        all but the first, its earlier context) changes, so the cache is refilled from the window at every
        step: beyond ``block_size`` cached generation recomputes as ``cache=False`` does.

        The cache needs a fixed sequence of evaluations: ``cache=True`` raises ``ValueError`` for an adaptive
        method (which picks its steps from the state), torchdiffeq's iterated ``implicit_adams``/``fixed_adams``,
        ``compile``, and ``field="evolving"`` (its state carries ``n × n`` logit maps, whose rows for a new token
        would need the earlier rows of every stage; not implemented). ``cache=False`` works with every model.
        Call ``eval()`` first: in training mode dropout makes every step random (a ``UserWarning`` says so).
        An id of ``prompt`` outside ``[0, vocab_size)`` raises ``ValueError``; it is checked once, not per token.
        """
        check_token_ids(prompt, "prompt", self.embed.num_embeddings)
        warn_if_dropout_samples(self, "generate()", stacklevel=4)  # (4: past torch.no_grad's wrapper)
        check_sampling(prompt, max_new_tokens, temperature, top_k)
        if cache:
            check_cacheable(self)
        tokens, kv_cache = prompt, KVCache()
        for _ in range(max_new_tokens):  # the ids were checked above (the prompt) or sampled: not checked again
            window = tokens[:, -self.block_size :]
            if not cache:
                logits = self.forward_head(self.norm(self.encoder(self.embeddings(window, check_range=False))))
            else:  # checked once above, not per token
                if not kv_cache.length or kv_cache.length >= self.block_size:
                    kv_cache.clear()
                new = tokens[:, -1:] if kv_cache.length else window
                logits = self.forward_head(self._cached_features(new, kv_cache, check_range=False))
            tokens = torch.cat([tokens, sample_next(logits[:, -1], temperature, top_k, generator)], dim=1)
        kv_cache.clear()  # the branches keep it bound until the next forward: free its tensors now
        return tokens


def _init_gpt2(parts: list[nn.Module | None], depth: int) -> None:
    """GPT-2's initialisation of ``parts`` (the model's own, not a ready-made field) as nanoGPT writes it: linear and
    embedding weights ``N(0, 0.02)``, biases 0, and the projections that end a residual branch (attention ``W_o``,
    the MLP's ``W_2``) ``N(0, 0.02 / sqrt(2 depth))`` (Radford et al. 2019, §2.3). LayerNorms keep ``(1, 0)``."""
    modules = [module for part in parts if part is not None for module in part.modules()]
    for module in modules:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    for module in modules:
        if isinstance(module, (AttentionBranch, MLPBranch)):
            last = module.proj if isinstance(module, AttentionBranch) else module.fc2
            if isinstance(last, nn.Linear):  # (an AttentionBranch without W_o has none)
                nn.init.normal_(last.weight, std=0.02 / math.sqrt(2 * depth))
