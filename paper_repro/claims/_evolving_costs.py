"""Wang et al. (2021), Table 5: parameters and FLOPs of Transformer-Lite / -Base and their EA-Transformers, counted
as the paper counts them. The models are the library's registered ``transformer_lite``, ``ea_transformer_lite``,
``transformer_base`` and ``ea_transformer_base`` (:func:`neuralode_tf.models.create_model`)."""

from __future__ import annotations

from neuralode_tf.flops import seq2seq_flops
from neuralode_tf.models import Seq2Seq, create_model

TABLE5 = {"Lite": ("transformer_lite", "ea_transformer_lite"), "Base": ("transformer_base", "ea_transformer_base")}
"""The registered ``(Transformer, EA-Transformer)`` of each row of Table 5."""


def table5_models(vocab_size: int = 100) -> dict[str, tuple[Seq2Seq, Seq2Seq]]:
    """The ``(Transformer, EA-Transformer)`` pairs of Table 5 by name (``"Lite"``, ``"Base"``), with a vocabulary
    of ``vocab_size`` tokens (which no count below depends on)."""
    return {
        name: (create_model(vanilla, src_vocab_size=vocab_size), create_model(evolving, src_vocab_size=vocab_size))
        for name, (vanilla, evolving) in TABLE5.items()
    }


def evolving_table5_costs(length: int = 30, vocab_size: int = 100) -> dict[str, tuple[int, int, int, int]]:
    """Wang et al. (2021), Table 5: ``(parameters, EA parameters, FLOPs, EA FLOPs)`` of the models of
    :func:`table5_models`, by name.

    As the paper counts them (§4.3, following HAT): parameters without the embeddings and the output
    projection; FLOPs of one ``length``-token source and target pair by
    :func:`~neuralode_tf.flops.seq2seq_flops` (matrix products, attention scores and their application,
    convolutions, 2 per multiply-add, from explicit formulas), the output projection left out: the same
    counts on every torch build. ``α`` and ``β`` weigh element-wise sums, so neither count depends on
    them. The EA model adds ``6 · 3`` convolutions of ``8 · 8 · 9 + 8`` parameters and, on a
    ``length × length`` map, ``2 · 8 · length² · 8 · 9`` FLOPs each. Its FLOPs also count the initial
    logit maps ``A^0`` of the ODE state (:meth:`~neuralode_tf.fields.EvolvingAttentionField.initial_state`),
    which the discrete network does not compute: the first layer's projections and ``Q Kᵀ`` once more for
    each of its evolving branches (one in the encoder, two in the decoder), ``2 · length · 3d² + 2 · length² · d``
    FLOPs each.
    """
    costs = {}
    for name, (vanilla, evolving) in table5_models(vocab_size).items():
        costs[name] = (
            non_embedding_parameters(vanilla),
            non_embedding_parameters(evolving),
            seq2seq_flops(vanilla, length, length),
            seq2seq_flops(evolving, length, length),
        )
    return costs


def non_embedding_parameters(model: Seq2Seq) -> int:
    """Parameters of ``model`` without its embeddings and output projection (Table 5's count)."""
    embeddings = {id(p) for module in (model.src_embed, model.tgt_embed, model.output) for p in module.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
