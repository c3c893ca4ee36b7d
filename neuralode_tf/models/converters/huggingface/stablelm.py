"""StableLM (Tow et al. 2023, StableLM-3B-4E1T; Bellagente et al. 2024, StableLM 2) read as an ODE.

Block ``m`` computes ``x + G_m(x)``, then ``+ D(F_m(.))`` (one Lie-Trotter Euler step of size 1 of
``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)``), or with ``use_parallel_residual`` the parallel residual
``x + G_m(x) + D(F_m(x))`` of one LayerNorm (Zhong et al. 2022, eq. 4: one Euler step, a
:class:`~neuralode_tf.fields.ParallelField`), with

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(N_q(W_q \\hat x + b_q)_h), R(N_k(W_k \\hat x + b_k)_h),
    W_v \\hat x + b_v\\big),
    \\qquad F_m(x) = W_{down}\\big(\\mathrm{silu}(W_{gate} \\bar x) \\odot W_{up} \\bar x\\big),

``x̂ = LN_1(x)`` (``input_layernorm``) and ``x̄ = LN_2(x)`` (``post_attention_layernorm``), or ``x̄ = x̂`` in the
parallel block. The biases ``b_q``, ``b_k``, ``b_v`` are there with ``use_qkv_bias``; ``N_q``, ``N_k`` are
the per-head LayerNorms ``q_layernorm``, ``k_layernorm`` (one LayerNorm per query, respectively key/value, head)
with ``qk_layernorm``, else identities, applied before the rotation ``R`` of the first ``partial_rotary_factor`` of
each head's features (Su et al. 2021; the model's own rotary module); grouped-query attention (Ainslie et al. 2023)
when ``num_key_value_heads < num_attention_heads``. ``D`` is the block's ``dropout`` (``hidden_dropout``), which
Hugging Face applies to the MLP branch only.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ._family import Family
from .phi import _HeadNormedAttention

__all__ = ["StableLm"]


class _StableLmAttention(_HeadNormedAttention):
    """StableLM's attention: the per-head-normalised queries and keys of Phi's, output projection ``o_proj``."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config, layer.self_attn.o_proj)


class StableLm(Family):
    """StableLM: ``StableLmModel``, ``StableLmForCausalLM``, ``StableLmForSequenceClassification``."""

    base_classes = ("StableLmModel",)
    layer_classes = ("StableLmDecoderLayer",)
    layers_at = "layers"
    embedding_at = "embed_tokens"
    final_norm_at = "norm"

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        norm = layer.input_layernorm if config.use_parallel_residual else layer.post_attention_layernorm
        return _StableLmAttention(layer, config), nn.Sequential(norm, layer.mlp, layer.dropout)

    def field(self, config: Any) -> str:
        return "parallel" if config.use_parallel_residual else "split"
