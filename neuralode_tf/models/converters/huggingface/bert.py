"""BERT (Devlin et al. 2019) and RoBERTa (Liu et al. 2019) read as an ODE: post-LayerNorm blocks as projected
Euler steps.

A post-LN block ``x' = N_1(x + G(x))``, ``x'' = N_2(x' + F(x'))`` (``G`` the bidirectional attention with its
output projection, ``F`` the feed-forward network, ``N_i`` LayerNorms) is no residual step ``x + h f(x)``: each
sub-layer is an Euler step followed by a projection, ``N_i``. Each projection is read as a part of the field of
its own, the relaxation ``P_i(x) = N_i(x) - x``, whose Euler step of size 1 is the projection itself,
``x + P_i(x) = N_i(x)``. Block ``m`` is then one Lie-Trotter Euler step of size 1 of

.. math:: \\frac{dx}{dt} = G_m(x) + P_{m,1}(x) + F_m(x) + P_{m,2}(x), \\qquad m = \\lfloor t \\rfloor,

stepping the parts in that order: Euler step of ``G``, projection ``N_1``, Euler step of ``F``, projection
``N_2``, the projected Euler step. Other methods and step counts integrate this ODE, in which the normalisation
is a relaxation at rate 1 towards the norm's image: an Euler sub-step of size ``h`` moves the fraction ``h`` of
the way, ``x + h (N_i(x) - x)``, rather than applying ``N_i`` after every step whatever ``h``. Each block's
attention is a :class:`~neuralode_tf.models.converters.huggingface.TransformersAttention` whose ``qkv`` gives
the queries and keys its logits are made of.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from ._attention import TransformersAttention, split_heads
from ._family import Family, Head

__all__ = ["PostNorm", "Bert", "Roberta"]


class PostNorm(nn.Module):
    """The relaxation ``P(x) = N(x) - x`` of a post-norm sub-layer's norm ``N``: its Euler step of size 1 is
    ``N(x)``, the projection that ends the sub-layer.

    A post-LN block ``x' = N_1(x + G(x))``, ``x'' = N_2(x' + F(x'))`` (BERT, RoBERTa) is read as one Lie-Trotter
    Euler step of size 1 of ``dx/dt = G(x) + P_1(x) + F(x) + P_2(x)``: an Euler step of ``G``, the projection
    ``N_1``, an Euler step of ``F``, the projection ``N_2``. Other methods and step counts integrate this ODE, in
    which the norm relaxes ``x`` towards its image at rate 1: an Euler sub-step of size ``h`` moves the fraction
    ``h`` of the way, ``x + h (N(x) - x)``, rather than applying ``N`` after every step whatever ``h``.
    """

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.norm = norm

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x) - x


class _BertAttention(TransformersAttention):
    """BERT's bidirectional attention (``query``, ``key``, ``value``, then ``attention.output.dense``), no norm
    inside: its post-norm is the :class:`PostNorm` part after it."""

    def __init__(self, layer: Any, config: Any):
        attention = layer.attention
        num_heads = config.num_attention_heads
        head_dim = config.hidden_size // num_heads
        super().__init__(
            None,
            nn.Sequential(attention.output.dense, attention.output.dropout),
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=False,
            dropout=config.attention_probs_dropout_prob,
        )
        self.query, self.key, self.value = attention.self.query, attention.self.key, attention.self.value

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        return split_heads(self.query(h), d), split_heads(self.key(h), d), split_heads(self.value(h), d)


def _masked_lm(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    return hf_model.cls(hidden)


def _pooled_classifier(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """``classifier(dropout(pooler(h)))``: the pooler reads the first token, ``tanh(W h_0 + b)``."""
    return hf_model.classifier(hf_model.dropout(hf_model.base_model.pooler(hidden)))


class Bert(Family):
    """BERT encoders: ``BertModel``, ``BertForMaskedLM``, ``BertForSequenceClassification``."""

    base_classes: tuple[str, ...] = ("BertModel",)
    layer_classes: tuple[str, ...] = ("BertLayer",)
    token_type_ids = True
    heads: Mapping[str, Head] = {"masked_lm": _masked_lm, "sequence_classification": _pooled_classifier}
    layers_at = "encoder.layer"

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        if config.is_decoder or hasattr(layer, "crossattention"):
            raise TypeError(
                f"from_transformers cannot read {type(layer).__name__} with is_decoder=True: only encoders are read"
            )
        relative = getattr(layer.attention.self, "position_embedding_type", "absolute")
        if relative != "absolute":
            raise TypeError(
                f"from_transformers cannot read {type(layer.attention.self).__name__} with "
                f"position_embedding_type={relative!r}: only absolute positions are read"
            )
        feed_forward = nn.Sequential(layer.intermediate, layer.output.dense, layer.output.dropout)
        post_norms = PostNorm(layer.attention.output.LayerNorm), PostNorm(layer.output.LayerNorm)
        return _BertAttention(layer, config), post_norms[0], feed_forward, post_norms[1]

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        return base.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)


def _roberta_masked_lm(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    return hf_model.lm_head(hidden)


def _roberta_classifier(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """RoBERTa's classification head reads the first token: ``W_2 tanh(W_1 h_0 + b_1) + b_2``."""
    return hf_model.classifier(hidden)


class Roberta(Bert):
    """RoBERTa encoders, BERT's blocks with positions counted from the padding id: ``RobertaModel``,
    ``RobertaForMaskedLM``, ``RobertaForSequenceClassification``."""

    base_classes = ("RobertaModel",)
    layer_classes = ("RobertaLayer",)
    heads = {"masked_lm": _roberta_masked_lm, "sequence_classification": _roberta_classifier}
