"""Gemma (Gemma Team 2024, arXiv:2403.08295) and Gemma 2 (Gemma Team 2024, arXiv:2408.00118) read as an ODE.

A Gemma block is LLaMA's (:mod:`~neuralode_tf.models.converters.huggingface.llama`): ``x + G_m(x)``, then ``+ F_m(.)``
with

.. math::

    G_m(x) = W_o\\, \\mathrm{GQA}\\big(R(W_q \\hat x), R(W_k \\hat x), W_v \\hat x\\big), \\quad
    F_m(x) = W_{down}\\big(\\mathrm{gelu}(W_{gate} \\bar x) \\odot W_{up} \\bar x\\big),

where the norms are ``N(x) = x / \\mathrm{rms}(x) \\odot (1 + w)`` (the model's own modules, which compute in float32
whatever the model's dtype), the MLP is the model's GeGLU (Shazeer 2020) with its tanh-approximated GELU, ``d_h`` is
the config's ``head_dim`` (which may differ from ``d / H``) and ``x(0) = \\sqrt{d}\\, E[w]``, with ``\\sqrt d``
rounded as Hugging Face rounds it: to the model's dtype (transformers 4.52's ``normalizer``), or to float32 and then
the model's dtype (transformers 5's ``embed_scale`` buffer, which the embedding module applies itself).

A Gemma 2 block adds a norm after each branch ("sandwich" norms) and caps its attention logits:

.. math::

    G_m(x) = N_2\\Big(W_o\\, \\mathrm{softmax}\\big(c \\tanh(s\\, R(q) R(k)^\\top / c) + M\\big)\\, v\\Big), \\quad
    F_m(x) = N_4\\big(\\mathrm{GeGLU}(N_3(x))\\big),

``(q, k, v)`` projected from ``N_1(x)``, ``s = `` ``query_pre_attn_scalar^{-1/2}``, ``c = `` ``attn_logit_softcapping``
and ``M`` the causal and padding mask, narrowed to a window of ``sliding_window`` keys on the layers Hugging Face
makes local (every other layer from the first; transformers 5 names them in ``config.layer_types``).
``*ForCausalLM`` caps its logits too: ``c_f \\tanh(W_{lm} h / c_f)``, ``c_f = `` ``final_logit_softcapping``;
sequence classification is not capped (neither version caps it). The attention cap is read as the installed
attention applies it: transformers 5 runs Gemma 2 with its ``eager`` attention (it refuses ``sdpa``), which caps;
transformers 4.52 runs it with ``sdpa`` by default, whose kernel DROPS the cap whatever the config says, so a model
built or loaded there without ``attn_implementation="eager"`` is read WITHOUT
attention-logit capping, as it computes, with a warning saying so
(the final-logit cap stays).
The reading is fixed at conversion: convert again after changing the model's attention implementation.

Both: one Lie-Trotter Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` per block.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor, nn

from ._family import causal_lm_head, last_token_head
from .llama import Llama, _LlamaAttention

__all__ = ["Gemma", "Gemma2", "capped_causal_lm_head"]


def capped_causal_lm_head(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """Gemma 2's ``*ForCausalLM``: ``c_f tanh(lm_head(h) / c_f)``, ``c_f`` the config's ``final_logit_softcapping``
    (no cap where it is ``None``)."""
    logits = causal_lm_head(hf_model, hidden, input_ids)
    cap = hf_model.config.final_logit_softcapping
    return logits if cap is None else torch.tanh(logits / cap) * cap


def _attention_softcap(config: Any) -> float | None:
    """``attn_logit_softcapping`` as the model's attention implementation applies it: not at all under ``sdpa``
    (transformers 4.52's default for Gemma 2, whose kernel ignores it), else as the config says (``eager``, and the
    flash and flex kernels, which take it). Under ``sdpa`` with a cap in the config it warns: the model then computes
    no cap, and so does its reading."""
    if getattr(config, "_attn_implementation", None) == "sdpa":
        if config.attn_logit_softcapping is not None:
            warnings.warn(
                f"this Gemma 2 model runs sdpa attention, which ignores attn_logit_softcapping="
                f"{config.attn_logit_softcapping}: it is read without the cap, as Hugging Face computes it; load it "
                "with attn_implementation='eager' for the capped model",
                stacklevel=2,
            )
        return None
    return config.attn_logit_softcapping


class _GemmaAttention(_LlamaAttention):
    """LLaMA's attention, causal only: transformers 5's ``use_bidirectional_attention`` is refused by name."""

    def __init__(self, layer: Any, config: Any):
        if getattr(config, "use_bidirectional_attention", None):
            raise TypeError(
                f"from_transformers cannot read {type(layer).__name__} with use_bidirectional_attention=True: "
                "it reads causal Gemma decoders"
            )
        super().__init__(layer, config)


class _Gemma2Attention(_GemmaAttention):
    """Gemma 2's attention: ``query_pre_attn_scalar^{-1/2}`` for the scale, capped logits, and the block's
    ``post_attention_layernorm`` after ``o_proj`` (the first sandwich norm)."""

    def __init__(self, layer: Any, config: Any):
        super().__init__(layer, config)
        self.out = nn.Sequential(layer.self_attn.o_proj, layer.post_attention_layernorm)
        self.scale = config.query_pre_attn_scalar**-0.5
        self.softcap = _attention_softcap(config)


class Gemma(Llama):
    """Gemma: ``GemmaModel``, ``GemmaForCausalLM``, ``GemmaForSequenceClassification``."""

    base_classes = ("GemmaModel",)
    layer_classes = ("GemmaDecoderLayer",)
    attention = _GemmaAttention

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        """``sqrt(d) E[w]``: the embedding module's own scale (transformers 5), else ``sqrt(d)`` rounded to the
        embedding's dtype as transformers 4.52's model forward rounds it."""
        tokens = base.embed_tokens(input_ids)
        if hasattr(base.embed_tokens, "embed_scale"):
            return tokens
        return tokens * torch.tensor(base.config.hidden_size**0.5, dtype=tokens.dtype)


class Gemma2(Gemma):
    """Gemma 2: ``Gemma2Model``, ``Gemma2ForCausalLM`` (capped logits), ``Gemma2ForSequenceClassification``."""

    base_classes = ("Gemma2Model",)
    layer_classes = ("Gemma2DecoderLayer",)
    attention = _Gemma2Attention
    mlp_at = ("pre_feedforward_layernorm", "mlp", "post_feedforward_layernorm")  # type: ignore[assignment]
    heads = {"causal_lm": capped_causal_lm_head, "sequence_classification": last_token_head}
