"""Wang et al. (2021), Table 5: parameters and FLOPs of Transformer-Lite / -Base and their EA-Transformers."""

from __future__ import annotations

from ..flops import seq2seq_flops
from .seq2seq import Seq2Seq

__all__ = ["evolving_table5_models", "evolving_table5_costs"]

_TABLE5 = {"Lite": (160, 160, 0.1), "Base": (512, 2048, 0.5)}  # width d, FFN width, the encoder's α (§4.3)


def evolving_table5_models(vocab_size: int = 100) -> dict[str, tuple[Seq2Seq, Seq2Seq]]:
    """The ``(Transformer, EA-Transformer)`` pairs of Wang et al. (2021), Table 5, by name (``"Lite"``, ``"Base"``).

    Transformer-Lite (Wu et al. 2020) has ``d = 160`` and FFN width 160, Transformer-Base (Vaswani et al.
    2017) ``d = 512`` and FFN width 2048; both 6 + 6 layers and 8 heads. The EA-Transformer is the paper's
    (§4.3): ``Seq2Seq(field="evolving")``, whose 3x3 convolutions (eq. 4, heads as channels) act in the
    encoder self-attention, the decoder self-attention and the encoder-decoder attention separately
    (§3.5, Fig. 3), with ``β = 0.1``, and whose skip connections ``α A^{i-1}`` are in the encoder only:
    ``α = 0.1`` (Lite) or ``α = 0.5`` (Base) there, ``α = 0`` in the decoder.
    """
    models = {}
    for name, (dim, hidden, alpha) in _TABLE5.items():
        sizes = dict(dim=dim, num_heads=8, encoder_depth=6, decoder_depth=6, mlp_hidden=hidden)
        evolving = Seq2Seq(vocab_size, **sizes, field="evolving", evolving={"alpha": alpha, "beta": 0.1})
        models[name] = (Seq2Seq(vocab_size, **sizes), evolving)
    return models


def evolving_table5_costs(length: int = 30, vocab_size: int = 100) -> dict[str, tuple[int, int, int, int]]:
    """Wang et al. (2021), Table 5: ``(parameters, EA parameters, FLOPs, EA FLOPs)`` of the models of
    :func:`evolving_table5_models`, by name.

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
    for name, (vanilla, evolving) in evolving_table5_models(vocab_size).items():
        costs[name] = (
            _non_embedding_parameters(vanilla),
            _non_embedding_parameters(evolving),
            seq2seq_flops(vanilla, length, length),
            seq2seq_flops(evolving, length, length),
        )
    return costs


def _non_embedding_parameters(model: Seq2Seq) -> int:
    embeddings = {id(p) for module in (model.src_embed, model.tgt_embed, model.output) for p in module.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
