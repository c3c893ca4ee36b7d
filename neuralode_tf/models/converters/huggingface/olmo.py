"""OLMo (Groeneveld et al. 2024) and OLMo 2 (Team OLMo 2024) read as an ODE.

An OLMo block is LLaMA's (:mod:`~neuralode_tf.models.converters.huggingface.llama`): ``x + G_m(x)``, then ``+ F_m(.)``,
with LayerNorms that have no parameters, ``N(x) = (x - \\bar x) / \\sqrt{\\mathrm{var}(x) + ε}``, and, with the config's
``clip_qkv = c``, the projections clipped before the heads are split:

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(C(W_q \\hat x)), R(C(W_k \\hat x)), C(W_v \\hat x)\\big), \\qquad
    C(z) = \\min(\\max(z, -c), c),

``x̂ = N(x)``, ``R`` the rotary positions of the model's own rotary module and ``F_m`` the SwiGLU MLP after ``N``.
An OLMo 2 block has no pre-norm: its RMSNorms act on each branch's output, and on the whole query and key
projections (all heads together) before the heads are split,

.. math::

    G_m(x) = N_a\\Big(W_o\\, \\mathrm{GQA}\\big(R(N_q(W_q x)), R(N_k(W_k x)), W_v x\\big)\\Big), \\qquad
    F_m(x) = N_f\\big(\\mathrm{SwiGLU}(x)\\big).

Both: one Lie-Trotter Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` per block. The norms are the
model's own modules, which compute in float32 whatever the model's dtype: a float64 model is read exactly, but its
field carries float32 rounding (about 1e-7), below which no solve's error falls.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ._attention import split_heads
from .llama import Llama, _LlamaAttention

__all__ = ["Olmo", "Olmo2"]


class _OlmoAttention(_LlamaAttention):
    """LLaMA's attention with the projections clipped to ``[-c, c]`` (``clip_qkv``; none where it is ``None``)."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config)
        self.clip = config.clip_qkv

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if self.clip is None:
            return super().project(h)
        q, k, v = (projection(h).clamp(-self.clip, self.clip) for projection in (self.q_proj, self.k_proj, self.v_proj))
        return split_heads(q, self.head_dim), split_heads(k, self.head_dim), split_heads(v, self.head_dim)


class _Olmo2Attention(_LlamaAttention):
    """OLMo 2's attention: no pre-norm, ``q_norm`` and ``k_norm`` over the whole projections, and
    ``post_attention_layernorm`` on the output."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config, pre_norm=False)
        self.out = nn.Sequential(layer.self_attn.o_proj, layer.post_attention_layernorm)
        self.q_norm, self.k_norm = layer.self_attn.q_norm, layer.self_attn.k_norm

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        q, k = self.q_norm(self.q_proj(h)), self.k_norm(self.k_proj(h))
        return split_heads(q, d), split_heads(k, d), split_heads(self.v_proj(h), d)


class Olmo(Llama):
    """OLMo: ``OlmoModel``, ``OlmoForCausalLM``, ``OlmoForSequenceClassification``."""

    base_classes = ("OlmoModel",)
    layer_classes = ("OlmoDecoderLayer",)
    attention = _OlmoAttention


class Olmo2(Llama):
    """OLMo 2: ``Olmo2Model``, ``Olmo2ForCausalLM``, ``Olmo2ForSequenceClassification``."""

    base_classes = ("Olmo2Model",)
    layer_classes = ("Olmo2DecoderLayer",)
    attention = _Olmo2Attention
    mlp_at = ("mlp", "post_feedforward_layernorm")
