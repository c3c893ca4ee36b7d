"""LLaMA-style decoders (Touvron et al. 2023; Mistral, Qwen2) read as an ODE.

Block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)`` with

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(W_q \\hat x), R(W_k \\hat x), W_v \\hat x\\big), \\quad
    F_m(x) = W_{down}\\big(\\mathrm{silu}(W_{gate} \\bar x) \\odot W_{up} \\bar x\\big),

``x̂ = RMSNorm_1(x)``, ``x̄ = RMSNorm_2(x)`` (Zhang & Sennrich 2019), ``R`` the rotary positions (Su et al. 2021)
that the model's own rotary module computes, with whatever rope scaling its config selects (linear, dynamic,
YaRN, LLaMA 3, ...), and grouped-query attention (Ainslie et al. 2023) when ``num_key_value_heads <
num_attention_heads``; SwiGLU (Shazeer 2020) is the model's own MLP module. One Lie-Trotter Euler step of size 1
of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)``. Mistral's sliding window, and Qwen2's on the layers its config
names, masks key ``j`` of query ``i`` unless ``i - j < window``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family

__all__ = ["Llama"]

_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def _window(attn: Any, config: Any) -> int | None:
    """The sliding window of a layer as Hugging Face's SDPA path applies it: the attention's own where it has one
    (Qwen2 in recent transformers, per layer), else the config's unless ``use_sliding_window`` switches it off
    (Mistral; Qwen2 in older transformers, every layer)."""
    if hasattr(attn, "sliding_window"):
        return attn.sliding_window
    return getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None


class _LlamaAttention(TransformersAttention):
    """LLaMA's attention: separate ``q_proj``, ``k_proj``, ``v_proj`` (``H_kv`` key/value heads), ``o_proj``, after
    the block's ``input_layernorm`` (none with ``pre_norm=False``: OLMo-2 normalises the branch's output instead)."""

    def __init__(self, layer: Any, config: Any, *, pre_norm: bool = True):
        attn = layer.self_attn
        missing = [name for name in _ATTENTION if not hasattr(attn, name)]
        if missing:
            raise TypeError(f"from_transformers cannot read {type(attn).__name__}: it lacks {missing}")
        num_heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // num_heads
        super().__init__(
            layer.input_layernorm if pre_norm else None,
            attn.o_proj,
            num_heads=num_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=True,
            window=_window(attn, config),
            dropout=config.attention_dropout,
        )
        self.q_proj, self.k_proj, self.v_proj = attn.q_proj, attn.k_proj, attn.v_proj

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        return split_heads(self.q_proj(h), d), split_heads(self.k_proj(h), d), split_heads(self.v_proj(h), d)


class Llama(Family):
    """LLaMA-style decoders: ``LlamaModel``, ``MistralModel``, ``Qwen2Model``, with their ``*ForCausalLM`` and
    ``*ForSequenceClassification``."""

    base_classes: tuple[str, ...] = ("LlamaModel", "MistralModel", "Qwen2Model")
    layer_classes: tuple[str, ...] = ("LlamaDecoderLayer", "MistralDecoderLayer", "Qwen2DecoderLayer")
    layers_at = "layers"
    attention: Callable[[Any, Any], nn.Module] | None = _LlamaAttention
    mlp_at = ("post_attention_layernorm", "mlp")
    embedding_at = "embed_tokens"
    final_norm_at = "norm"
