"""GPT-NeoX (Black et al. 2022; Pythia) read as an ODE: its parallel residual is Zhong et al.'s parallel field.

With ``use_parallel_residual=True`` (the default) block ``m`` computes ``x + G_m(x) + F_m(x)`` with
``G_m(x) = W_o · MHA(R(q), R(k), v)`` of ``LN_1 x`` and ``F_m(x) = W_2 gelu(W_1 LN_2 x)``: one Euler step of
size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` (Zhong et al. 2022, eq. 4; a
:class:`~neuralode_tf.fields.ParallelField`). With ``use_parallel_residual=False`` it is ``x + G_m(x)``, then
``+ F_m(.)``: one Lie-Trotter Euler step of the same ODE (a :class:`~neuralode_tf.fields.SplitField`). The rotary
positions ``R`` turn the first ``rotary_pct`` of each head's features (the model's own rotary module).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ._attention import TransformersAttention
from ._family import Family

__all__ = ["GPTNeoX"]


class _NeoXAttention(TransformersAttention):
    """GPT-NeoX's attention: one ``query_key_value`` projection laid out head by head, ``(H, 3 d_h)``."""

    def __init__(self, layer: Any, config: Any):
        attn = layer.attention
        num_heads = config.num_attention_heads
        head_dim = config.hidden_size // num_heads
        super().__init__(
            layer.input_layernorm,
            nn.Sequential(attn.dense, layer.post_attention_dropout),
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=True,
            dropout=config.attention_dropout,
        )
        self.query_key_value = attn.query_key_value

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        qkv = self.query_key_value(h).unflatten(-1, (self.num_heads, 3 * self.head_dim)).transpose(-3, -2)
        q, k, v = qkv.chunk(3, dim=-1)
        return q, k, v


class GPTNeoX(Family):
    """GPT-NeoX: ``GPTNeoXModel``, ``GPTNeoXForCausalLM``, ``GPTNeoXForSequenceClassification``."""

    base_classes = ("GPTNeoXModel",)
    layer_classes = ("GPTNeoXLayer",)
    layers_at = "layers"
    attention = _NeoXAttention
    mlp_at = ("post_attention_layernorm", "mlp", "post_mlp_dropout")
    final_norm_at = "final_layer_norm"

    def field(self, config: Any) -> str:
        return "parallel" if config.use_parallel_residual else "split"

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        return base.emb_dropout(base.embed_in(input_ids))
