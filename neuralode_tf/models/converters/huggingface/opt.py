"""OPT (Zhang et al. 2022) read as an ODE: learned positions offset by 2, pre-LN blocks (post-LN for OPT-350m).

With ``do_layer_norm_before`` (every OPT but 350m) block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)``,

.. math::

    G_m(x) = D\\big(W_o\\, \\mathrm{MHA}(s (W_q \\hat x + b_q), W_k \\hat x + b_k, W_v \\hat x + b_v) + b_o\\big),
    \\qquad F_m(x) = D\\big(W_2\\, \\mathrm{relu}(W_1 \\bar x + b_1) + b_2\\big),

``x̂ = LN_1(x)``, ``x̄ = LN_2(x)``, ``s = d_h^{-1/2}`` applied to the queries (as Hugging Face does, before the
product; transformers 4.52 before huggingface/transformers#38290 scaled the logits once more, ``s^2``, which the
reading follows where the installed attention does), causal multi-head attention (Vaswani et al. 2017) and ``D``
the config's ``dropout``: one Lie-Trotter Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` (Lu et al.
2019). Without it (OPT-350m) the block is post-LN, ``x' = N_1(x + G(x))``, ``x'' = N_2(x' + F(x'))`` with ``G``,
``F`` as above but no norm inside, read as BERT's (:mod:`~neuralode_tf.models.converters.huggingface.bert`): one
Lie-Trotter Euler step of size 1 of ``dx/dt = G + P_1 + F + P_2``, ``P_i(x) = N_i(x) - x``
(:class:`~neuralode_tf.models.converters.huggingface.PostNorm`).

The tokens ``x(0) = P_in E[w] + E_pos[p + 2]`` (``P_in = project_in`` where ``word_embed_proj_dim`` differs from
the hidden size, else the identity), with OPT's positions ``p_i = (Σ_{j≤i} a_j) a_i - 1`` of the attention mask
``a`` (so left padding shifts them and padded tokens take ``p = -1``), or the given ``position_ids``. The output
is ``P_out(LN_f(x(L)))``: the final norm (pre-LN models) then ``project_out``. Decoding with a
:class:`~neuralode_tf.nn.KVCache` continues the positions from the cache's length, as Hugging Face does unpadded.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family
from .bert import PostNorm

__all__ = ["OPT", "opt_positions"]


def opt_positions(attention_mask: Tensor) -> Tensor:
    """OPT's positions of Hugging Face's ``attention_mask`` (1 at real tokens): ``cumsum(a) * a - 1`` ``(B, n)``."""
    mask = attention_mask.long()
    return mask.cumsum(-1) * mask - 1


def _scales_twice(attn: nn.Module) -> bool:
    """Whether the installed transformers scales OPT's attention logits twice, ``s^2 q kᵀ`` (the queries, then again
    in the attention function: transformers 4.52 before its fix, huggingface/transformers#38290), rather than once
    (``scaling=1.0`` in the attention call): read from the attention's own ``forward``."""
    try:
        source = inspect.getsource(type(attn).forward)
    except (OSError, TypeError):
        return False
    return "scaling=self.scaling" in source and "scaling=1.0" not in source


class _OPTAttention(TransformersAttention):
    """OPT's attention: ``q_proj`` (scaled by ``d_h^{-1/2}``), ``k_proj``, ``v_proj``, then ``out_proj`` and the
    residual dropout; ``LN_1`` inside for a pre-LN block, none for a post-LN one."""

    def __init__(self, layer: Any, config: Any):
        attn = layer.self_attn
        num_heads = config.num_attention_heads
        head_dim = config.hidden_size // num_heads
        super().__init__(
            layer.self_attn_layer_norm if config.do_layer_norm_before else None,
            nn.Sequential(attn.out_proj, nn.Dropout(config.dropout)),
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=head_dim,
            scale=attn.scaling if _scales_twice(attn) else 1.0,
            causal=True,
            dropout=config.attention_dropout,
        )
        self.query_scale = attn.scaling
        self.q_proj, self.k_proj, self.v_proj = attn.q_proj, attn.k_proj, attn.v_proj

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        q = split_heads(self.q_proj(h) * self.query_scale, d)
        return q, split_heads(self.k_proj(h), d), split_heads(self.v_proj(h), d)


class OPT(Family):
    """OPT: ``OPTModel``, ``OPTForCausalLM``, ``OPTForSequenceClassification``."""

    base_classes = ("OPTModel",)
    layer_classes = ("OPTDecoderLayer",)
    layers_at = "decoder.layers"

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        if config.layerdrop:
            raise TypeError(
                f"from_transformers cannot read {type(layer).__name__} with layerdrop={config.layerdrop}: "
                "blocks skipped at random in training are no field"
            )
        attention = _OPTAttention(layer, config)
        mlp = [layer.fc1, layer.activation_fn, layer.fc2, nn.Dropout(config.dropout)]
        if config.do_layer_norm_before:
            return attention, nn.Sequential(layer.final_layer_norm, *mlp)
        return attention, PostNorm(layer.self_attn_layer_norm), nn.Sequential(*mlp), PostNorm(layer.final_layer_norm)

    def default_positions(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
        """OPT's positions of the attention mask (:func:`opt_positions`), ``0 .. n-1`` without one."""
        return None if attention_mask is None else opt_positions(attention_mask)

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        """``P_in E[w] + E_pos[p + 2]``, ``p`` the positions (``0 .. n-1`` where none are given)."""
        decoder = base.decoder
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)[None]
        x = decoder.embed_tokens(input_ids)
        if decoder.project_in is not None:
            x = decoder.project_in(x)
        return x + decoder.embed_positions(torch.ones_like(input_ids), 0, position_ids=position_ids)

    def final_norm(self, base: Any) -> nn.Module | None:
        decoder = base.decoder
        steps = [m for m in (decoder.final_layer_norm, decoder.project_out) if m is not None]
        return nn.Sequential(*steps) if steps else None
