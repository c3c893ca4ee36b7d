"""GPT-2 (Radford et al. 2019) read as an ODE: pre-LayerNorm blocks with ``Conv1D`` projections.

Block ``m`` computes ``x + G_m(x)``, then ``+ F_m(.)`` with ``G_m(x) = W_o · MHA(LN_1 x)`` (one fused ``c_attn``
projection, a ``Conv1D``: ``x W + b``) and ``F_m(x) = c_proj(gelu(c_fc(LN_2 x)))``: one Lie-Trotter Euler step of
size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` on ``[0, L]``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family

__all__ = ["GPT2"]


class _GPT2Attention(TransformersAttention):
    """GPT-2's attention: queries, keys and values from one ``c_attn`` (a ``Conv1D``), split in three."""

    def __init__(self, block: Any, config: Any, index: int):
        attn = block.attn
        dim, num_heads = config.hidden_size, config.num_attention_heads
        head_dim = dim // num_heads
        scale = head_dim**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= index + 1
        super().__init__(
            block.ln_1,
            nn.Sequential(attn.c_proj, attn.resid_dropout),
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=head_dim,
            scale=scale,
            causal=True,
            dropout=attn.attn_dropout.p,
        )
        self.c_attn = attn.c_attn

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.c_attn(h).chunk(3, dim=-1)
        return split_heads(q, self.head_dim), split_heads(k, self.head_dim), split_heads(v, self.head_dim)


class GPT2(Family):
    """GPT-2: ``GPT2Model``, ``GPT2LMHeadModel``, ``GPT2ForSequenceClassification``."""

    base_classes = ("GPT2Model",)
    layer_classes = ("GPT2Block",)
    layers_at = "h"
    final_norm_at = "ln_f"
    token_type_ids = True

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        if hasattr(layer, "crossattention"):
            raise TypeError(
                f"from_transformers cannot read {type(layer).__name__} with cross-attention "
                "(add_cross_attention=True): only self-attention decoders are read"
            )
        return _GPT2Attention(layer, config, index), nn.Sequential(layer.ln_2, layer.mlp)

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)[None]
        x = base.wte(input_ids) + base.wpe(position_ids)
        if token_type_ids is not None:
            x = x + base.wte(token_type_ids)
        return base.drop(x)
