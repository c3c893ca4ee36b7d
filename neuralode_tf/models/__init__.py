"""Model front-ends: continuous-depth transformers for images (ViT, timm conversion), sets, text, signals and
sequence-to-sequence tasks.

Every model takes a field (or builds the default one) and the solve settings of its
:class:`~neuralode_tf.ContinuousDepth` stack(s) (``method``, ``steps`` / ``step_size``,
``adjoint``, ...). The default, ``method="lie_trotter"`` with one Euler step per unit of
depth-time, computes the discrete pre-norm network the field was read from. A model's parameter
count is ``sum(p.numel() for p in model.parameters())``.
"""

from .blocks import FIELDS, stack_encoder, transformer_field
from .discrete import DiscreteStack
from .evolving_costs import evolving_table5_costs, evolving_table5_models
from .node import NODETransformer
from .seq2seq import EncoderDecoder, Seq2Seq, decoder_field
from .set_reference import ReferenceMAB, ReferenceSetTransformer, reference_isab
from .set_transformer import MAB, PMA, InducedAttentionBranch, SetTransformer, isab_field
from .signal import SignalClassifier
from .text import PAD, TextClassifier, TokenEmbedding, sinusoidal_positions
from .timm import ContinuousVisionTransformer, continuous_from_timm
from .transevolve import (
    TRANSEVOLVE_VARIANTS,
    TransEvolveClassifier,
    TransEvolveDecoder,
    TransEvolveEncoder,
    TransEvolveSeq2Seq,
)
from .transevolve_counts import table2_parameter_counts
from .vit import VIT_PRESETS, ViT, vit_preset

__all__ = [
    "PAD",
    "sinusoidal_positions",
    "TokenEmbedding",
    "FIELDS",
    "transformer_field",
    "stack_encoder",
    "NODETransformer",
    "DiscreteStack",
    "TextClassifier",
    "decoder_field",
    "EncoderDecoder",
    "Seq2Seq",
    "evolving_table5_models",
    "evolving_table5_costs",
    "MAB",
    "PMA",
    "InducedAttentionBranch",
    "isab_field",
    "SetTransformer",
    "ReferenceMAB",
    "reference_isab",
    "ReferenceSetTransformer",
    "SignalClassifier",
    "ViT",
    "VIT_PRESETS",
    "vit_preset",
    "ContinuousVisionTransformer",
    "continuous_from_timm",
    "TRANSEVOLVE_VARIANTS",
    "TransEvolveEncoder",
    "TransEvolveDecoder",
    "TransEvolveClassifier",
    "TransEvolveSeq2Seq",
    "table2_parameter_counts",
]
