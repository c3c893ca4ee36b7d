"""ELECTRA (Clark et al. 2020) read as an ODE: BERT's post-LayerNorm blocks, after a factorised embedding.

ELECTRA's blocks are BERT's (:mod:`~neuralode_tf.models.converters.huggingface.bert`): block ``m`` is one Lie-Trotter
Euler step of size 1 of ``dx/dt = G_m(x) + P_{m,1}(x) + F_m(x) + P_{m,2}(x)``, the post-norms read as relaxations
:class:`~neuralode_tf.models.converters.huggingface.PostNorm`, ``P = N - I``. Its embedding has its own width
``embedding_size``
(word, position and segment embeddings, LayerNorm, dropout), projected to the hidden size by ``embeddings_project``
where the two differ, ``x(0) = W_p e + b_p`` (§3.2: the generator is smaller than the discriminator, and both share
the embeddings). Heads: ``ElectraForMaskedLM``, the generator's (``generator_predictions``: dense to the embedding
width, GELU, LayerNorm; then ``generator_lm_head``), and ``ElectraForSequenceClassification`` (its classification
head on the first token: dropout, dense, GELU, dropout, ``out_proj``). transformers 4.52 and 5 build the same modules
(4.52 picks the self-attention class by attention implementation and reads ``position_embedding_type``, of which only
``"absolute"`` is read, as for BERT).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from .bert import Bert

__all__ = ["Electra"]


def _generator_masked_lm(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    return hf_model.generator_lm_head(hf_model.generator_predictions(hidden))


def _first_token_classifier(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """ELECTRA's classification head reads the first token: ``W_2 GELU(W_1 h_0 + b_1) + b_2`` (with dropouts)."""
    return hf_model.classifier(hidden)


class Electra(Bert):
    """ELECTRA encoders (discriminators and generators): ``ElectraModel``, ``ElectraForMaskedLM``,
    ``ElectraForSequenceClassification``."""

    base_classes = ("ElectraModel",)
    layer_classes = ("ElectraLayer",)
    heads = {"masked_lm": _generator_masked_lm, "sequence_classification": _first_token_classifier}

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        x = super().embed(base, input_ids, position_ids, token_type_ids)
        project = getattr(base, "embeddings_project", None)
        return x if project is None else project(x)
