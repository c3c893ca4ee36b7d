"""StarCoder2 (Lozhkov et al. 2024) read as an ODE: LLaMA's decoder with LayerNorms, biases and residual dropout.

Block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)`` with

.. math::

    G_m(x) = D_r\\big(W_o\\, \\mathrm{GQA}(R(W_q \\hat x + b_q), R(W_k \\hat x + b_k), W_v \\hat x + b_v) + b_o\\big),
    \\quad F_m(x) = D_r\\big(W_{proj}\\, \\mathrm{gelu}(W_{fc} \\bar x + b_{fc}) + b_{proj}\\big),

``x̂ = LN_1(x)``, ``x̄ = LN_2(x)`` (pre-LayerNorm, Xiong et al. 2020), ``R`` the rotary positions (Su et al. 2021) of
the model's own rotary module, grouped-query attention (Ainslie et al. 2023) with ``num_key_value_heads`` key/value
heads and, with a ``sliding_window``, key ``j`` of query ``i`` masked unless ``i - j < window``; ``D_r`` is dropout
with the config's ``residual_dropout`` (identity in eval mode; ``F``'s is inside the model's own MLP module,
``c_fc``/``c_proj``). The biases are the projections' own (``use_bias``). One Lie-Trotter Euler step of size 1 of
``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` (Lu et al. 2019); ``x(0)`` is the token embedding after the config's
``embedding_dropout``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from .llama import Llama, _LlamaAttention

__all__ = ["Starcoder2"]


class _Starcoder2Attention(_LlamaAttention):
    """LLaMA's attention (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, with their biases) after ``LN_1``, with
    the residual dropout after ``o_proj``."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config)
        self.out = nn.Sequential(layer.self_attn.o_proj, nn.Dropout(config.residual_dropout))


class Starcoder2(Llama):
    """StarCoder2: ``Starcoder2Model``, ``Starcoder2ForCausalLM``, ``Starcoder2ForSequenceClassification``."""

    base_classes = ("Starcoder2Model",)
    layer_classes = ("Starcoder2DecoderLayer",)
    attention = _Starcoder2Attention

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        x = base.embed_tokens(input_ids)
        return nn.functional.dropout(x, p=base.config.embedding_dropout, training=base.training)
