"""Phi (Li et al. 2023, Phi-1.5; Phi-2) and Phi-3 (Abdin et al. 2024) read as an ODE.

**Phi**: block ``m`` computes the parallel residual of GPT-J (Wang & Komatsuzaki 2021; Zhong et al. 2022, eq. 4)
with ONE LayerNorm for both branches, ``x + D(G_m(x)) + D(F_m(x))``,

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(N_q(W_q \\hat x + b_q)_h), R(N_k(W_k \\hat x + b_k)_h), W_v \\hat x + b_v\\big)
    + b_o, \\qquad F_m(x) = W_2\\, \\mathrm{gelu}(W_1 \\hat x + b_1) + b_2, \\qquad \\hat x = \\mathrm{LN}(x),

one Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` (a :class:`~neuralode_tf.fields.ParallelField`).
``W_o`` is the attention's ``dense``; ``N_q``, ``N_k`` are the per-head LayerNorms ``q_layernorm``, ``k_layernorm``
with ``qk_layernorm`` (else identities), applied before the rotation; ``R`` turns the first
``partial_rotary_factor`` of each head's features (Su et al. 2021; the model's own rotary module); ``D`` is the
block's ``resid_dropout``, drawn once per branch as Hugging Face draws it. The tokens are ``embed_dropout(E[w])``;
``final_layernorm`` follows the last block and the LM head has a bias.

**Phi-3**: LLaMA's sequential block (:mod:`~neuralode_tf.models.converters.huggingface.llama`), ``x + D_a(G_m(x))``,
then ``+ D_f(F_m(.))``: one Lie-Trotter Euler step of size 1 of the same ODE, with

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}(R(q), R(k), v), \\quad (q, k, v) = W_{qkv}\\, \\mathrm{RMSNorm}_1(x), \\qquad
    F_m(x) = W_{down}\\big(\\mathrm{silu}(g) \\odot u\\big), \\quad (g, u) = W_{gate\\_up}\\, \\mathrm{RMSNorm}_2(x),

the fused ``qkv_proj`` laid out as the ``H`` query heads, then the ``H_kv`` key heads, then the value heads, and the
fused ``gate_up_proj`` (the model's own MLP module) as the gate, then the up projection; ``D_a``, ``D_f`` are
``resid_attn_dropout`` and ``resid_mlp_dropout``. Its ``sliding_window``, if the config sets one, masks key ``j`` of
query ``i`` unless ``i - j < window`` on every layer; ``R`` is the model's own rotary module, so with its rope
scaling (LongRoPE's short and long factors, ...) and its ``partial_rotary_factor``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family
from .llama import _window

__all__ = ["Phi", "Phi3"]


class _HeadNormedAttention(TransformersAttention):
    """Attention of separate ``q_proj``, ``k_proj``, ``v_proj`` (``H_kv`` key/value heads) whose queries and keys
    are normalised per head by the attention's ``q_layernorm`` and ``k_layernorm`` when the config sets
    ``qk_layernorm`` (Phi, StableLM); the output projection ``out`` is given by the family."""

    def __init__(self, layer: Any, config: Any, out: nn.Module):
        attn = layer.self_attn
        num_heads = config.num_attention_heads
        super().__init__(
            layer.input_layernorm,
            out,
            num_heads=num_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads,
            head_dim=attn.head_dim,
            scale=attn.head_dim**-0.5,
            causal=True,
            dropout=config.attention_dropout,
        )
        self.q_proj, self.k_proj, self.v_proj = attn.q_proj, attn.k_proj, attn.v_proj
        self.q_norm: nn.Module = attn.q_layernorm if config.qk_layernorm else nn.Identity()
        self.k_norm: nn.Module = attn.k_layernorm if config.qk_layernorm else nn.Identity()

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        q, k = self.q_norm(split_heads(self.q_proj(h), d)), self.k_norm(split_heads(self.k_proj(h), d))
        return q, k, split_heads(self.v_proj(h), d)


class _PhiAttention(_HeadNormedAttention):
    """Phi's attention: its output projection ``dense``, then the block's ``resid_dropout``."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config, nn.Sequential(layer.self_attn.dense, layer.resid_dropout))


class Phi(Family):
    """Phi: ``PhiModel``, ``PhiForCausalLM``, ``PhiForSequenceClassification``."""

    base_classes = ("PhiModel",)
    layer_classes = ("PhiDecoderLayer",)
    layers_at = "layers"
    attention = _PhiAttention
    mlp_at = ("input_layernorm", "mlp", "resid_dropout")
    reading = "parallel"
    final_norm_at = "final_layernorm"

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        return base.embed_dropout(base.embed_tokens(input_ids))


class _Phi3Attention(TransformersAttention):
    """Phi-3's attention: one fused ``qkv_proj`` (``[q_1 .. q_H, k_1 .. k_{H_kv}, v_1 .. v_{H_kv}]``), ``o_proj``,
    then the block's ``resid_attn_dropout``."""

    def __init__(self, layer: Any, config: Any):
        attn = layer.self_attn
        num_heads = config.num_attention_heads
        super().__init__(
            layer.input_layernorm,
            nn.Sequential(attn.o_proj, layer.resid_attn_dropout),
            num_heads=num_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads,
            head_dim=attn.head_dim,
            scale=attn.head_dim**-0.5,
            causal=True,
            window=_window(attn, config),
            dropout=config.attention_dropout,
        )
        self.qkv_proj = attn.qkv_proj

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        sizes = (self.num_heads * d, self.num_kv_heads * d, self.num_kv_heads * d)
        q, k, v = self.qkv_proj(h).split(sizes, dim=-1)
        return split_heads(q, d), split_heads(k, d), split_heads(v, d)


class Phi3(Family):
    """Phi-3: ``Phi3Model``, ``Phi3ForCausalLM``, ``Phi3ForSequenceClassification``."""

    base_classes = ("Phi3Model",)
    layer_classes = ("Phi3DecoderLayer",)
    layers_at = "layers"
    attention = _Phi3Attention
    mlp_at = ("post_attention_layernorm", "mlp", "resid_mlp_dropout")
    embedding_at = "embed_tokens"
    final_norm_at = "norm"
