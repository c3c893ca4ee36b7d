"""Mixtral (Jiang et al. 2024) read as an ODE: Mistral's attention and a sparse mixture of experts as the MLP.

Block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)``: ``G_m`` is Mistral's attention after ``RMSNorm_1``
(:mod:`~neuralode_tf.models.converters.huggingface.llama`: rotary ``q, k``, grouped-query attention, the config's
sliding window) and ``F_m`` the routed MLP after ``RMSNorm_2``, ``x̄ = RMSNorm_2(x)``:

.. math::

    F_m(x) = \\sum_{e \\in \\mathrm{top}_k(p)} \\frac{p_e}{\\sum_{e' \\in \\mathrm{top}_k(p)} p_{e'}}\\, E_e(\\bar x),
    \\qquad p = \\mathrm{softmax}(W_g \\bar x), \\quad
    E_e(\\bar x) = W_{2,e}\\big(\\mathrm{silu}(W_{1,e} \\bar x) \\odot W_{3,e} \\bar x\\big)

per token (Shazeer et al. 2017; Fedus et al. 2022): the ``k = num_experts_per_tok`` experts of highest router
probability, their probabilities renormalised. ``F_m`` is the model's own module (``block_sparse_moe`` in
transformers 4, ``mlp`` in 5), so its routing is Hugging Face's to the bit: the router's softmax runs in float32 in
both versions, so a float64 model's mixing weights carry float32 precision; the router logits it also returns
(transformers 4) are dropped. One Lie-Trotter Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)``. The
top-k choice makes ``F_m`` piecewise smooth in ``x``: it jumps where the ranking of two experts swaps, so
adaptive and higher-order solves may meet discontinuities of the field.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from .llama import Llama, _LlamaAttention

__all__ = ["Mixtral"]


class _RoutedMLP(nn.Module):
    """The model's sparse mixture-of-experts module as a branch ``x -> F(x)`` (its mixed output only)."""

    def __init__(self, moe: nn.Module):
        super().__init__()
        self.moe = moe

    def forward(self, x: Tensor) -> Tensor:
        out = self.moe(x)
        return out[0] if isinstance(out, tuple) else out


class Mixtral(Llama):
    """Mixtral: ``MixtralModel``, ``MixtralForCausalLM``, ``MixtralForSequenceClassification``."""

    base_classes = ("MixtralModel",)
    layer_classes = ("MixtralDecoderLayer",)

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        moe = getattr(layer, "block_sparse_moe", None) or layer.mlp
        return _LlamaAttention(layer, config), nn.Sequential(layer.post_attention_layernorm, _RoutedMLP(moe))
