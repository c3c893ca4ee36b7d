"""Model front-ends: continuous-depth transformers for sets, text and sequence-to-sequence tasks.

Every model takes a field (or builds the default one) and the solve settings of its
:class:`~neuralode_tf.ContinuousDepth` stack(s) (``method``, ``steps`` / ``step_size``,
``adjoint``, ...). The default, ``method="lie_trotter"`` with one Euler step per unit of
depth-time, computes the discrete pre-norm network the field was read from. A model's parameter
count is ``sum(p.numel() for p in model.parameters())``.
"""

from .seq2seq import Seq2Seq, decoder_field
from .set_transformer import MAB, PMA, InducedAttentionBranch, SetTransformer, isab_field
from .signal import SignalClassifier
from .text import PAD, TextClassifier, TokenEmbedding, encoder_field, sinusoidal_positions

# --- ViT and timm conversion (vit.py, timm.py): exports go here ---------------------------------

# ------------------------------------------------------------------------------------------------

__all__ = [
    "PAD",
    "sinusoidal_positions",
    "TokenEmbedding",
    "encoder_field",
    "TextClassifier",
    "decoder_field",
    "Seq2Seq",
    "MAB",
    "PMA",
    "InducedAttentionBranch",
    "isab_field",
    "SetTransformer",
    "SignalClassifier",
    # --- ViT and timm conversion exports go here ---
]
