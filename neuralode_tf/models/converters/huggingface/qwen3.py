"""Qwen3 (Qwen team 2025) read as an ODE: LLaMA's blocks with queries and keys normalised per head.

Block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)``, as LLaMA's
(:mod:`~neuralode_tf.models.converters.huggingface.llama`),
with the queries and keys of each head RMS-normalised before the rotary positions (Dehghani et al. 2023's QK-norm):

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(N_q(W_q \\hat x)_h), R(N_k(W_k \\hat x)_h), W_v \\hat x\\big), \\qquad
    \\hat x = \\mathrm{RMSNorm}_1(x),

``N_q``, ``N_k`` the block's own ``q_norm``, ``k_norm`` (RMSNorms over one head's ``d_h`` features, ``d_h`` the
config's ``head_dim``, which may differ from ``d / H``) and ``F_m`` the SwiGLU MLP after ``RMSNorm_2``. One
Lie-Trotter Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` per block. A sliding window applies to the
layers the config selects (``layer_types`` under transformers 5; under transformers 4, whose attention mask is
built once for the model, to every layer when ``use_sliding_window`` is set).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ._attention import split_heads
from .llama import Llama, _LlamaAttention

__all__ = ["Qwen3"]


class _Qwen3Attention(_LlamaAttention):
    """LLaMA's attention with ``q_norm`` and ``k_norm`` on each head's queries and keys, before the rotation."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config)
        attn = layer.self_attn
        self.q_norm, self.k_norm = attn.q_norm, attn.k_norm
        if not hasattr(attn, "layer_type"):  # transformers 4: the model's one mask has the window on every layer
            self.window = config.sliding_window if config.use_sliding_window else None

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        q, k = self.q_norm(split_heads(self.q_proj(h), d)), self.k_norm(split_heads(self.k_proj(h), d))
        return q, k, split_heads(self.v_proj(h), d)


class Qwen3(Llama):
    """Qwen3: ``Qwen3Model``, ``Qwen3ForCausalLM``, ``Qwen3ForSequenceClassification``."""

    base_classes = ("Qwen3Model",)
    layer_classes = ("Qwen3DecoderLayer",)
    attention = _Qwen3Attention
