"""Encoder-decoders: the reversal models, the Transformer Base / Lite of the translation papers and TransEvolve's
encoder-decoder, registered on import."""

from __future__ import annotations

from ..frontends.seq2seq import Seq2Seq
from ..frontends.transevolve import TRANSEVOLVE_VARIANTS, TransEvolveSeq2Seq
from ._registry import register_model
from .text import _TINY_TEXT

# Encoder-decoders ---------------------------------------------------------------------------------------------

_TABLE5 = dict(num_heads=8, encoder_depth=6, decoder_depth=6)
_TABLE5_DOC = (
    "of Wang et al. (2021), Table 5: 6 + 6 layers, 8 heads; the EA-Transformer (§4.3) has 3x3 convolutions (eq. 4, "
    "heads as channels) in the encoder self-, decoder self- and encoder-decoder attention (§3.5, Fig. 3) with "
    "β = 0.1, and skips α A^{i-1} in the encoder only (α = 0 in the decoder)."
)

register_model(
    "seq2seq_reverse", Seq2Seq, "Encoder-decoder of 2 + 2 pre-norm blocks, d = 64, 4 heads (the toy seq2seq tasks).",
    **_TINY_TEXT, encoder_depth=2, decoder_depth=2,
)
register_model(
    "transformer_reverse", Seq2Seq, "The Transformer of Dutta et al.'s (2021) translation comparison at toy scale: "
    "6 + 6 pre-norm blocks, d = 64, 4 heads.",
    **_TINY_TEXT, encoder_depth=6, decoder_depth=6,
)
register_model(
    "transformer_lite", Seq2Seq, f"Transformer-Lite (Wu et al. 2020), d = 160, FFN width 160, {_TABLE5_DOC}",
    dim=160, mlp_hidden=160, **_TABLE5,
)
register_model(
    "ea_transformer_lite", Seq2Seq, f"EA-Transformer-Lite, α = 0.1, d = 160, FFN width 160, {_TABLE5_DOC}",
    dim=160, mlp_hidden=160, **_TABLE5, field="evolving", evolving=dict(alpha=0.1, beta=0.1),
)
register_model(
    "transformer_base", Seq2Seq, f"Transformer-Base (Vaswani et al. 2017), d = 512, FFN width 2048, {_TABLE5_DOC}",
    dim=512, mlp_hidden=2048, **_TABLE5,
)
register_model(
    "ea_transformer_base", Seq2Seq, f"EA-Transformer-Base, α = 0.5, d = 512, FFN width 2048, {_TABLE5_DOC}",
    dim=512, mlp_hidden=2048, **_TABLE5, field="evolving", evolving=dict(alpha=0.5, beta=0.1),
)

# TransEvolve (Dutta et al. 2021) ------------------------------------------------------------------------------

register_model(
    "transevolve_reverse", TransEvolveSeq2Seq, "TransEvolve-randomFF-2 encoder-decoder (2 blocks of depth 3 per side) "
    "at toy scale: d = 64, 4 heads; the other variants of TRANSEVOLVE_VARIANTS are overrides.",
    **_TINY_TEXT, **TRANSEVOLVE_VARIANTS["randomFF-2"],
)
