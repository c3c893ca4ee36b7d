"""DistilBERT (Sanh et al. 2019) read as an ODE: BERT's post-LayerNorm blocks as projected Euler steps.

A DistilBERT block is BERT's (Devlin et al. 2019) with six of its twelve blocks, no segment embedding and no pooler:

.. math::

    x' = N_{\\mathrm{sa}}\\big(x + W_o\\, [\\mathrm{softmax}(d_h^{-1/2} q_h k_h^\\top + M)\\, v_h]_h\\big),
    \\qquad x'' = N_{\\mathrm{out}}\\big(x' + W_2\\, \\phi(W_1 x' + b_1) + b_2\\big)

(``q_lin``, ``k_lin``, ``v_lin``, ``out_lin``; the feed-forward ``ffn``: ``lin1``, the activation, ``lin2``, dropout;
``N`` the ``sa_layer_norm`` and ``output_layer_norm``). As for BERT
(:mod:`~neuralode_tf.models.converters.huggingface.bert`), block ``m`` is one Lie-Trotter Euler step of size 1 of
``dx/dt = G_m(x) + P_{m,1}(x) + F_m(x) + P_{m,2}(x)`` with the post-norms read as relaxations
:class:`~neuralode_tf.models.converters.huggingface.PostNorm`, ``P = N - I``. The embedding is
``dropout(LayerNorm(E[ids] + P[positions]))``, positions ``0 .. n-1`` whatever the padding (learned, or the
sinusoids of ``sinusoidal_pos_embds``, stored in the same table). Heads: ``DistilBertForMaskedLM`` (``vocab_transform``,
the activation, ``vocab_layer_norm``, ``vocab_projector``) and ``DistilBertForSequenceClassification`` (the first
token through ``pre_classifier``, ReLU, dropout, ``classifier``).

transformers 4.52 and 5 differ in the attention's class (4.52: ``MultiHeadSelfAttention`` for eager attention,
``DistilBertSdpaAttention`` for the default ``sdpa``; 5: ``DistilBertSelfAttention``), in the eager mask (4.52 fills
padded keys with the dtype's minimum, 5 with ``-inf``) and in the embedding's signature (4.52 takes no
``position_ids``): the projections, norms and dropouts read here are the same modules in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family
from .bert import PostNorm

__all__ = ["DistilBert"]


class _DistilBertAttention(TransformersAttention):
    """DistilBERT's bidirectional attention: ``q_lin``, ``k_lin``, ``v_lin``, then ``out_lin`` (no dropout after it);
    its post-norm is the :class:`PostNorm` part after it."""

    def __init__(self, attention: Any, config: Any):
        super().__init__(
            None,
            attention.out_lin,
            num_heads=attention.n_heads,
            num_kv_heads=attention.n_heads,
            head_dim=attention.attention_head_size,
            scale=attention.attention_head_size**-0.5,
            causal=False,
            dropout=config.attention_dropout,
        )
        self.query, self.key, self.value = attention.q_lin, attention.k_lin, attention.v_lin

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        return split_heads(self.query(h), d), split_heads(self.key(h), d), split_heads(self.value(h), d)


def _masked_lm(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """``vocab_projector(vocab_layer_norm(act(vocab_transform(h))))``."""
    return hf_model.vocab_projector(hf_model.vocab_layer_norm(hf_model.activation(hf_model.vocab_transform(hidden))))


def _first_token_classifier(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """``classifier(dropout(ReLU(pre_classifier(h_0))))``: the first token."""
    pooled = torch.relu(hf_model.pre_classifier(hidden[:, 0]))
    return hf_model.classifier(hf_model.dropout(pooled))


class DistilBert(Family):
    """DistilBERT encoders: ``DistilBertModel``, ``DistilBertForMaskedLM``, ``DistilBertForSequenceClassification``."""

    base_classes = ("DistilBertModel",)
    layer_classes = ("TransformerBlock",)
    heads = {"masked_lm": _masked_lm, "sequence_classification": _first_token_classifier}

    def layers(self, base: Any) -> Sequence[nn.Module]:
        return base.transformer.layer

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        post_norms = PostNorm(layer.sa_layer_norm), PostNorm(layer.output_layer_norm)
        return _DistilBertAttention(layer.attention, config), post_norms[0], layer.ffn, post_norms[1]

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        embeddings = base.embeddings
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)[None]
        x = embeddings.word_embeddings(input_ids) + embeddings.position_embeddings(position_ids)
        return embeddings.dropout(embeddings.LayerNorm(x))
