"""Falcon (Almazrouei et al. 2023) read as an ODE: parallel attention and MLP, multi-query or grouped attention.

With ``parallel_attn`` (and always with ``new_decoder_architecture``) block ``m`` computes Zhong et al.'s parallel
residual (2022, eq. 4), ``x + G_m(x) + F_m(x)``, one Euler step of size 1 of ``dx/dt = G_{⌊t⌋}(x) + F_{⌊t⌋}(x)``
(a :class:`~neuralode_tf.fields.ParallelField`), with

.. math::

    G_m(x) = W_o\\, \\mathrm{MQA}\\big(R(q), R(k), v\\big) + b_o, \\quad (q, k, v) = W_{qkv} N_a(x) + b_{qkv},
    \\qquad F_m(x) = W_2\\, \\mathrm{act}(W_1 N_f(x) + b_1) + b_2,

where ``N_a = ln_attn`` and ``N_f = ln_mlp`` when ``new_decoder_architecture`` has ``num_ln_in_parallel_attn = 2``
(Falcon-40B/180B), else ``N_a = N_f = input_layernorm``, one norm for both branches (Falcon-7B). Without
``parallel_attn`` (old architecture) it is the sequential pre-LN block ``x + D_a(G_m(x))``, then
``+ D_h(F_m(.))`` with ``N_f = post_attention_layernorm`` and dropouts ``D_a``, ``D_h`` of the config's
``attention_dropout`` and ``hidden_dropout`` (as Hugging Face applies them to the residual branches): one
Lie-Trotter Euler step of size 1 of the same ODE (Lu et al. 2019). ``MQA`` is multi-head attention whose
``H`` query heads share ``H_kv`` key/value heads: one (``multi_query``, Shazeer 2019), ``num_kv_heads`` groups
(``new_decoder_architecture``: grouped-query attention, Ainslie et al. 2023, the fused projection laid out group by
group as ``[q_1 .. q_{H/H_kv}, k, v]``), or ``H`` (neither: laid out head by head as ``[q, k, v]``); ``R`` the
rotary positions (Su et al. 2021) of the model's own rotary module; the biases are the projections' own (``bias``).
ALiBi positions (``alibi=True``, Press et al. 2022), whose bias Hugging Face rounds to bfloat16, are not read.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ._attention import TransformersAttention
from ._family import Family

__all__ = ["Falcon"]


def _check(layer: Any, config: Any) -> None:
    """Refuse, naming the setting, what this reading does not read exactly (or Hugging Face does not run)."""
    name = type(layer).__name__
    if config.alibi:
        raise TypeError(f"from_transformers cannot read {name} with alibi=True: only rotary positions are read")
    if config.new_decoder_architecture and not config.parallel_attn:
        raise TypeError(
            f"from_transformers cannot read {name} with new_decoder_architecture=True and parallel_attn=False "
            "(a block Hugging Face does not run either)"
        )
    if _parallel(config) and config.hidden_dropout:
        raise TypeError(
            f"from_transformers cannot read {name} with hidden_dropout={config.hidden_dropout} on a parallel block: "
            "its one dropout mask on G + F is no dropout of the parts of a parallel field"
        )


def _parallel(config: Any) -> bool:
    return bool(config.new_decoder_architecture or config.parallel_attn)


def _two_norms(config: Any) -> bool:
    return bool(config.new_decoder_architecture and config.num_ln_in_parallel_attn == 2)


class _FalconAttention(TransformersAttention):
    """Falcon's attention: one fused ``query_key_value`` projection (multi-query, grouped or per-head layout), then
    ``dense``; no dropout on its weights (Hugging Face's rotary path has none)."""

    def __init__(self, layer: Any, config: Any):
        attn = layer.self_attention
        num_heads = config.num_attention_heads
        head_dim = config.hidden_size // num_heads
        if config.new_decoder_architecture:
            num_kv_heads = config.num_kv_heads
        else:
            num_kv_heads = 1 if config.multi_query else num_heads
        out: nn.Module = attn.dense
        if not _parallel(config):
            out = nn.Sequential(attn.dense, nn.Dropout(config.attention_dropout))
        super().__init__(
            layer.ln_attn if _two_norms(config) else layer.input_layernorm,
            out,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=True,
        )
        self.query_key_value = attn.query_key_value
        self.layout = "grouped" if config.new_decoder_architecture else "multi_query" if config.multi_query else "heads"

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        fused = self.query_key_value(h)
        heads, kv, d = self.num_heads, self.num_kv_heads, self.head_dim
        if self.layout == "grouped":  # (.., n, H_kv, H / H_kv + 2, d_h): each group's queries, then its k and v
            grouped = fused.unflatten(-1, (kv, heads // kv + 2, d))
            q, k, v = grouped[..., :-2, :].flatten(-3, -2), grouped[..., -2, :], grouped[..., -1, :]
        elif self.layout == "multi_query":  # (.., n, H + 2, d_h): the queries, then the one k and v
            stacked = fused.unflatten(-1, (heads + 2, d))
            q, k, v = stacked[..., :-2, :], stacked[..., -2:-1, :], stacked[..., -1:, :]
        else:  # (.., n, H, 3, d_h): each head's q, k, v
            per_head = fused.unflatten(-1, (heads, 3, d))
            q, k, v = per_head[..., 0, :], per_head[..., 1, :], per_head[..., 2, :]
        return q.transpose(-3, -2), k.transpose(-3, -2), v.transpose(-3, -2)


class Falcon(Family):
    """Falcon: ``FalconModel``, ``FalconForCausalLM``, ``FalconForSequenceClassification``."""

    base_classes = ("FalconModel",)
    layer_classes = ("FalconDecoderLayer",)
    layers_at = "h"
    embedding_at = "word_embeddings"
    final_norm_at = "ln_f"

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        _check(layer, config)
        if not _parallel(config):
            mlp = nn.Sequential(layer.post_attention_layernorm, layer.mlp, nn.Dropout(config.hidden_dropout))
        else:
            mlp = nn.Sequential(layer.ln_mlp if _two_norms(config) else layer.input_layernorm, layer.mlp)
        return _FalconAttention(layer, config), mlp

    def field(self, config: Any) -> str:
        return "parallel" if _parallel(config) else "split"
