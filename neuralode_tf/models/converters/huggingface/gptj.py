"""GPT-J (Wang & Komatsuzaki 2021) read as an ODE: its parallel block of one LayerNorm is Zhong et al.'s parallel field.

Block ``m`` computes ``x + G_m(x) + F_m(x)`` (Zhong et al. 2022, eq. 4) with ONE LayerNorm ``ln_1`` for both branches,

.. math::

    G_m(x) = D\\big(W_o\\, \\mathrm{MHA}(R(W_q \\hat x), R(W_k \\hat x), W_v \\hat x)\\big), \\qquad
    F_m(x) = D\\big(W_2\\, \\mathrm{gelu}(W_1 \\hat x + b_1) + b_2\\big), \\qquad \\hat x = \\mathrm{LN}_1(x),

one Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)`` (a :class:`~neuralode_tf.fields.ParallelField`).
The projections ``W_q``, ``W_k``, ``W_v`` and ``W_o`` (``out_proj``) have no bias; ``D`` is ``resid_dropout``.

``R`` turns the first ``r = rotary_dim`` channels of each head in GPT-J's interleaved layout ("rotate every two"):
the pair ``(2j, 2j+1)`` by the angle ``p θ_j`` of the model's own sine/cosine table (``embed_positions``: the
rotary module's in transformers 5, each attention's in 4.52), with the same products and sums as Hugging Face, so
to the bit; the other channels pass.

The attention is computed as the model's config says. ``sdpa`` (transformers 5's default for GPT-J) and the others:
``scaled_dot_product_attention`` in the model's dtype. ``eager`` (transformers 4.52's default): the logits
``q kᵀ / sqrt(d_h)`` in float32 whatever the model's dtype, as Hugging Face computes them (4.52 divides by its float32
``sqrt(d_h)``, 5 multiplies by ``d_h^{-1/2}``), then the mask and the softmax in the model's dtype; a float64 model
is then read exactly, and its field carries the float32 rounding of its logits. A query that sees no key gets zero
weights under both readings (Hugging Face's eager attention gives it the mean of the values).

The tokens are ``drop(E[w])`` (plus ``E[s]`` for segment ids ``s``, embedded by the same table); ``ln_f`` follows the
last block and the LM head has a bias. transformers 4.52's ``GPTJForCausalLM`` casts its logits to float32; the
converted model's keep the model's dtype (a float64 model's are Hugging Face's before that rounding).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ....nn._empty_rows import SdpaMask, softmax_weights
from ._attention import TransformersAttention, split_heads
from ._family import Family

__all__ = ["GPTJ"]


def _rotate_pairs(z: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """GPT-J's rotation of the first ``r = cos.shape[-1]`` channels of ``z``: the pair ``(a, b)`` at ``(2j, 2j+1)``
    becomes ``(a, b) cos + (-b, a) sin`` (``cos``, ``sin``: each angle repeated for both channels of its pair,
    broadcast against ``z``); the other channels pass."""
    r = cos.shape[-1]
    rotary = z[..., :r]
    turned = torch.stack((-rotary[..., 1::2], rotary[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat((rotary * cos + turned * sin, z[..., r:]), dim=-1)


def _blocked(mask: SdpaMask | None, n_q: int, n_k: int, device: torch.device) -> Tensor | None:
    """The keys each of the last ``n_q`` of ``n_k`` queries may not see: the mask's complement, or the later keys
    where the mask is ``None`` (causal attention that ``is_causal`` would have said)."""
    if mask is not None:
        return ~mask.allowed
    if n_q == 1:
        return None
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu_(n_k - n_q + 1)


class _GPTJAttention(TransformersAttention):
    """GPT-J's attention: ``q_proj``, ``k_proj``, ``v_proj`` without bias after ``ln_1``, the interleaved rotary,
    ``out_proj``, then ``resid_dropout``; with ``eager`` attention, float32 logits."""

    def __init__(self, layer: Any, config: Any):
        attn = layer.attn
        num_heads = config.num_attention_heads
        head_dim = config.hidden_size // num_heads
        super().__init__(
            layer.ln_1,
            nn.Sequential(attn.out_proj, attn.resid_dropout),
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=True,
            dropout=config.attn_pdrop,
        )
        self.q_proj, self.k_proj, self.v_proj = attn.q_proj, attn.k_proj, attn.v_proj
        self.eager = getattr(config, "_attn_implementation", None) == "eager"
        self.sqrt_head_dim: Tensor | None = getattr(attn, "scale_attn", None)  # 4.52's float32 divisor

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        return split_heads(self.q_proj(h), d), split_heads(self.k_proj(h), d), split_heads(self.v_proj(h), d)

    def qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.project(self.norm(x))
        if self._rotary is not None:
            cos, sin = self._rotary
            q, k = _rotate_pairs(q, cos, sin), _rotate_pairs(k, cos, sin)
        return q, k, v

    def forward(self, x: Tensor) -> Tensor:
        if not self.eager:
            return super().forward(x)
        q, k, v = self.qkv(x)
        if self._kv_cache is None:
            mask = self.attention_mask(x)
        else:
            k, v = self._kv_cache.append(k, v)
            mask = self._cached_mask(q.shape[-2], k.shape[-2], x.device)
        logits = q.float() @ k.float().transpose(-2, -1)
        logits = logits / self.sqrt_head_dim if self.sqrt_head_dim is not None else logits * self.scale
        weights = softmax_weights(logits.to(v.dtype), _blocked(mask, q.shape[-2], k.shape[-2], x.device))
        if self.training and self.dropout:
            weights = nn.functional.dropout(weights, self.dropout)
        return self.out((weights @ v).transpose(-3, -2).flatten(-2))


class GPTJ(Family):
    """GPT-J: ``GPTJModel``, ``GPTJForCausalLM``, ``GPTJForSequenceClassification``."""

    base_classes = ("GPTJModel",)
    layer_classes = ("GPTJBlock",)
    layers_at = "h"
    attention = _GPTJAttention
    mlp_at = ("ln_1", "mlp")
    reading = "parallel"
    final_norm_at = "ln_f"
    token_type_ids = True

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        x = base.wte(input_ids)
        if token_type_ids is not None:
            x = x + base.wte(token_type_ids)
        return base.drop(x)

    def rotary(self, base: Any, x: Tensor, position_ids: Tensor | None) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` ``(B or 1, n, r)``, each angle repeated for both channels of its pair, from GPT-J's own
        table ``[sin θ | cos θ]`` of each position."""
        if position_ids is None:
            position_ids = torch.arange(x.shape[-2], device=x.device)[None]
        module = getattr(base, "rotary_emb", None)  # transformers 5; 4.52 keeps the table in each attention
        table = module.embed_positions if module is not None else base.h[0].attn.embed_positions
        sin, cos = table.to(x.device)[position_ids].to(x.dtype).chunk(2, dim=-1)
        return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
