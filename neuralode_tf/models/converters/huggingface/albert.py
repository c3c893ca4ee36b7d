"""ALBERT (Lan et al. 2020) read as an ODE: one post-LayerNorm block shared by every depth, an autonomous field.

ALBERT's block is BERT's post-LN block (:mod:`~neuralode_tf.models.converters.huggingface.bert`),
``x' = N_1(x + W_o [softmax(d_h^{-1/2} q_h k_hᵀ + M) v_h]_h)``, ``x'' = N_2(x' + W_2 φ(W_1 x' + b_1) + b_2)``
(``attention``: ``query``, ``key``, ``value``, ``dense``, ``LayerNorm``; then ``ffn``, the activation,
``ffn_output``, ``full_layer_layer_norm``), read as a Lie-Trotter Euler step of size 1 of
``G(x) + P_1(x) + F(x) + P_2(x)`` with the post-norms as relaxations
:class:`~neuralode_tf.models.converters.huggingface.PostNorm`, ``P = N - I``. Its two parameter reductions (§3.1) are
read as they are:

* **Factorised embedding**: word, position and segment embeddings of width ``embedding_size`` (LayerNorm, dropout),
  then ``embedding_hidden_mapping_in`` to the hidden size, ``x(0) = W_e e + b_e``: part of the embedding.
* **Cross-layer sharing**: ALBERT's ``num_hidden_layers`` blocks apply ONE layer (``num_hidden_groups = 1``,
  ``inner_group_num = 1``, the released models). Every block's parts are the same modules, so the field is
  autonomous, ``dx/dt = f(x)`` on ``[0, L]``, ``f`` the same at every depth-time ``t``: a
  :class:`~neuralode_tf.fields.WeightSharedField` of one layer over ``[0, L]`` (Zhong et al. 2022's ``k = 1``). Hence
  (``tests/test_hf_encoders.py``): the flow of ``[0, L]`` is the flow of ``[0, 1]`` composed ``L`` times; a step
  size need not align with the block boundaries (a fixed grid of step ``3/4`` on ``[0, 3]`` takes 4 equal steps,
  inserting no grid point at the integers, where a stack of distinct blocks takes 6); and the field declares no
  jumps (``jump_times`` is empty), so adaptive solvers step across the integer times. The default solve, one
  Lie-Trotter step per block, is still ALBERT's discrete stack exactly.

Other groupings are read as Hugging Face applies them: block ``i`` of ``num_hidden_layers = L`` applies the
``inner_group_num`` layers of group ``int(i / (L / G))`` of ``num_hidden_groups = G`` in turn, so the stack has
``L · inner_group_num`` blocks; where each of the ``k`` distinct layers covers ``D / k`` consecutive blocks (``G``
dividing ``L``, one layer per group) the field is a weight-shared field of ``k`` layers, jumping at ``jD/k``, else
one of the ``D`` blocks (the repeated ones sharing their parts).

Heads: ``AlbertForMaskedLM`` (``predictions``: dense to the embedding width, activation, LayerNorm, decoder) and
``AlbertForSequenceClassification`` (the pooler, ``tanh`` of a dense layer on the first token, then dropout and
``classifier``). transformers 4.52 and 5 build the same modules (4.52 picks the attention class by implementation
and reads ``position_embedding_type``, of which only ``"absolute"`` is read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from ....fields import SplitField, WeightSharedField
from ._attention import TransformersAttention, split_heads
from ._family import Family
from .bert import PostNorm

__all__ = ["Albert"]


class _AlbertAttention(TransformersAttention):
    """ALBERT's bidirectional attention (``query``, ``key``, ``value``, then ``dense`` and its dropout); its
    ``LayerNorm`` is the :class:`PostNorm` part after it."""

    def __init__(self, attention: Any, config: Any):
        head_dim = attention.attention_head_size
        super().__init__(
            None,
            nn.Sequential(attention.dense, attention.output_dropout),
            num_heads=attention.num_attention_heads,
            num_kv_heads=attention.num_attention_heads,
            head_dim=head_dim,
            scale=head_dim**-0.5,
            causal=False,
            dropout=config.attention_probs_dropout_prob,
        )
        self.query, self.key, self.value = attention.query, attention.key, attention.value

    def project(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        d = self.head_dim
        return split_heads(self.query(h), d), split_heads(self.key(h), d), split_heads(self.value(h), d)


def _masked_lm(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    return hf_model.predictions(hidden)


def _pooled_classifier(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """``classifier(dropout(tanh(W h_0 + b)))``: the pooler reads the first token."""
    base = hf_model.base_model
    return hf_model.classifier(hf_model.dropout(base.pooler_activation(base.pooler(hidden[:, 0]))))


class Albert(Family):
    """ALBERT encoders: ``AlbertModel``, ``AlbertForMaskedLM``, ``AlbertForSequenceClassification``."""

    base_classes = ("AlbertModel",)
    layer_classes = ("AlbertLayer",)
    token_type_ids = True
    heads = {"masked_lm": _masked_lm, "sequence_classification": _pooled_classifier}

    def layers(self, base: Any) -> Sequence[nn.Module]:
        """The layers in the order Hugging Face applies them: for each of the ``num_hidden_layers`` blocks the
        ``inner_group_num`` layers of its group (the same modules again wherever a group is applied again)."""
        config = base.config
        depth, groups = config.num_hidden_layers, config.num_hidden_groups
        layer_groups = base.encoder.albert_layer_groups
        return [layer for i in range(depth) for layer in layer_groups[int(i / (depth / groups))].albert_layers]

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        relative = getattr(layer.attention, "position_embedding_type", "absolute")
        if relative != "absolute":
            raise TypeError(
                f"from_transformers cannot read {type(layer.attention).__name__} with "
                f"position_embedding_type={relative!r}: only absolute positions are read"
            )
        feed_forward = nn.Sequential(layer.ffn, layer.activation, layer.ffn_output)
        post_norms = PostNorm(layer.attention.LayerNorm), PostNorm(layer.full_layer_layer_norm)
        return _AlbertAttention(layer.attention, config), post_norms[0], feed_forward, post_norms[1]

    def blocks(self, base: Any) -> tuple[str | nn.Module, list[tuple[nn.Module, ...]]]:
        """``(field, sets)``: the blocks that apply one layer share its parts (the same modules), and the field is a
        :class:`~neuralode_tf.fields.WeightSharedField` over ``[0, D]``, ``D = len(sets)``: of the ``k`` distinct
        layers where each covers ``D / k`` consecutive blocks in turn (one layer: autonomous), else of the blocks."""
        _, per_block = super().blocks(base)
        layers = self.layers(base)
        shared: dict[int, tuple[nn.Module, ...]] = {}
        for layer, parts in zip(layers, per_block):
            shared.setdefault(id(layer), parts)
        sets = [shared[id(layer)] for layer in layers]
        distinct, depth = list(shared.values()), len(sets)
        runs = all(parts is distinct[i * len(distinct) // depth] for i, parts in enumerate(sets))
        return WeightSharedField([SplitField(*parts) for parts in (distinct if runs else sets)], depth), sets

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        x = base.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
        return base.encoder.embedding_hidden_mapping_in(x)
