"""Parameter counts of TransEvolve's Table 2 (Dutta et al. 2021, §7.1) as built here.

The paper's figures (Transformer-base 65M; randomFF-1, randomFF-2, fullFF-1, fullFF-2 27M, 33M, 53M,
59M) are matched **approximately**: no single configuration gives all five to the nearest million
(see :func:`table2_parameter_counts`).
"""

from __future__ import annotations

import torch
from torch import nn

from neuralode_tf.models import TRANSEVOLVE_VARIANTS, Seq2Seq, TransEvolveSeq2Seq


def table2_parameter_counts(vocab_size: int = 32000) -> dict[str, int]:
    """Parameter counts of the Table 2 models as built here, approximate matches of the paper's figures.

    ``d = 512``, ``H = 8`` heads, 6 + 6 layers (§7.1) and one vocabulary of ``V = vocab_size`` tokens
    tied three ways: source, target and output (§6, "embedding layer tied to the output logit layer";
    the code's ``EmbeddingSharedWeights``, notes §1.6). Keys: the four
    :data:`~neuralode_tf.models.TRANSEVOLVE_VARIANTS` and ``"Transformer-base"``, a
    :class:`~neuralode_tf.models.Seq2Seq` with 6 + 6 layers, MLP width 2048 and ``share_embeddings=True``.
    The models are built on the ``meta`` device: nothing is allocated.

    **Per component** (notes §1.3-1.7), with ``D = d + H t`` and the code's ``time_dim`` ``t = 64``,
    the only value its depth vector admits (``t = d / H``, notes §1.4; the paper's ``d' = H t = d``):

    * attention products (``Layer1``, core_layers.py 16-59): ``w_q`` and ``w_k`` of ``D × D``, no
      bias, ``2 D² = 2,097,152``; one per encoder block, two per decoder block (self and cross);
    * attention at one depth (``Layer2``, core_layers.py 73-107): ``coeffs`` ``d``, ``W_O`` ``d²``
      and the values' LayerNorm ``2d``, ``d² + 3d = 263,680``; one per encoder layer, two per decoder layer;
    * feed-forward ``F`` (``Layer3``, core_layers.py 167-195): full ``2d + 8d² + 5d = 2,100,736``
      (LayerNorm, ``d → 4d → d`` with biases); random ``9d = 4,608`` (LayerNorm; ``d`` singular values
      and ``4d`` biases, then ``d`` and ``d``; the code's ``TemporalProjection`` also keeps ``3d``
      singular values it never uses, notes §1.5);
    * one LayerNorm ``2d`` per block (``output_normalization``) and the embedding ``V d``.

    With ``B`` blocks of ``L`` layers in the encoder and in the decoder (``B L = 6``):

    .. math:: N = B\\,(3 \\cdot 2D^2 + 4d) + 6\\,\\big(3\\,(d^2 + 3d) + 2F\\big) + V d

    At ``V = 32000`` (the code's default ``input_dim``, notes §1.8) against Table 2:

    ================  ==========  =====  ================
    model             here        paper  gap
    ================  ==========  =====  ================
    randomFF-1        27,479,040  27M    +0.48M (+1.8%)
    randomFF-2        33,772,544  33M    +0.77M (+2.3%)
    fullFF-1          52,632,576  53M    -0.37M (-0.7%)
    fullFF-2          58,926,080  59M    -0.07M (-0.1%)
    Transformer-base  60,524,544  65M    -4.48M (-6.9%)
    ================  ==========  =====  ================

    **Why no configuration matches all five.** The vocabulary size, how many ways the table is tied,
    an output bias and any extra LayerNorms add the same number to every variant, so putting
    randomFF-2 at 33M and fullFF-1 at 53M needs ``N(fullFF-1) - N(randomFF-2) > 19M``; it is
    ``12 (F_full - F_random) - (3 · 2D² + 4d) = 25,153,536 - 6,293,504 = 18,860,032``. Only a query/key
    width of about 940-1010 instead of ``D = 1024`` (``t`` = 59-63) would fit, and then ``V`` is
    32-33k, which leaves Transformer-base at 60.5-61.1M: 65M needs ``V d`` of 20.4-21.4M (``V`` of 39.8-41.7k).

    * randomFF-1, fullFF-1 and fullFF-2 round to the paper's figure at ``V = 32000``.
    * randomFF-2 rounds to 34M, not 33M: its three extra ``Layer1`` over randomFF-1 add
      ``6 D² = 6.29M`` (the paper's figures differ by 6M), and no ``V`` rounds both it to 33M
      (``V ≤ 31,467``) and fullFF-1 to 53M (``V ≥ 31,742``).
    * Transformer-base: the paper quotes 65M from Vaswani et al. (2017, Table 3), whose WMT En-De
      model has a shared vocabulary of about 37000 BPE tokens; this architecture has 63,084,544
      parameters at ``V = 37000`` (-2.9%). Vaswani et al. do not say how they counted, and the last
      ~2M are not in the architecture (pre-norm here adds only two final LayerNorms).
    """
    dim, heads, layers = 512, 8, 6
    counts = {}
    with torch.device("meta"):
        base = Seq2Seq(
            vocab_size, dim=dim, num_heads=heads, encoder_depth=layers, decoder_depth=layers, share_embeddings=True
        )
        counts["Transformer-base"] = _count(base)
        for name, variant in TRANSEVOLVE_VARIANTS.items():
            counts[name] = _count(TransEvolveSeq2Seq(vocab_size, dim, heads, **variant))
    return counts


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
