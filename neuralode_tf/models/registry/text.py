"""Text and signal classifiers: the tweets models, Kan et al.'s IMDb classifiers with their stand-in, TransEvolve's
ListOps classifier and the MNIST-1D transformer, registered on import."""

from __future__ import annotations

from ..frontends.signal import SignalClassifier
from ..frontends.text import TextClassifier
from ..frontends.transevolve import TRANSEVOLVE_VARIANTS, TransEvolveClassifier
from ._registry import register_model

# Text and signal classifiers ----------------------------------------------------------------------------------

_TINY_TEXT = dict(dim=64, num_heads=4)
_SINKFORMERS_IMDB = dict(
    num_classes=2, dim=256, num_heads=8, mlp_hidden=1024, norm="post", activation="relu", pooling="max"
)
_IMDB_DOC = (
    "Sinkformers' IMDb encoder (lyeoni's nlp-tutorial), as Kan et al. (2025, Appendix B) run it: post-LN, ReLU, "
    "d = 256, 8 heads, d_ff = 1024, max pooling (its dropout 0.1 inside the blocks is left out: it would make the "
    "field random); vocab_size is the data's (Sinkformers': 16,000)."
)
_OT_TEXT = dict(depth=3, field="composed", steps=8, transport_cost=0.5)

register_model(
    "text_tweets", TextClassifier, "Pre-norm text classifier, d = 64, 4 heads, 2 blocks, 3 classes (the tweets "
    "sentiment corpus).",
    num_classes=3, **_TINY_TEXT, depth=2,
)
register_model(
    "ea_text_tweets", TextClassifier, "text_tweets with 4 evolving-attention blocks (Wang et al. 2021) at the largest "
    "values of the paper's text search grid, α = β = 0.4 (§4.2), 3x3 convolutions.",
    num_classes=3, **_TINY_TEXT, depth=4, field="evolving", evolving=dict(alpha=0.4, beta=0.4, kernel_size=3),
)
register_model(
    "ot_imdb_baseline", TextClassifier, f"{_IMDB_DOC} 6 discrete blocks: Kan et al.'s baseline (Table 4).",
    **_SINKFORMERS_IMDB, depth=6, field="discrete",
)
register_model(
    "ot_imdb_ode", TextClassifier, f"{_IMDB_DOC} The OT-Transformer: 3 blocks composed into one field on [0, 1], "
    "8 Euler steps, λ = 0.5.",
    **_SINKFORMERS_IMDB, **_OT_TEXT,
)
register_model(
    "ot_imdb_ode_tweets", TextClassifier, "ot_imdb_ode at d = 64, 4 heads, d_ff = 256, 3 classes (the ot_imdb_tweets "
    "stand-in, on tweets).",
    **{**_SINKFORMERS_IMDB, "num_classes": 3, **_TINY_TEXT, "mlp_hidden": 256}, **_OT_TEXT,
)
register_model(
    "transformer_listops", TextClassifier, "The Transformer of Dutta et al.'s (2021) ListOps comparison at toy scale: "
    "6 pre-norm blocks, d = 64, 4 heads, mean pooling, 10 classes.",
    num_classes=10, **_TINY_TEXT, depth=6,
)
register_model(
    "signal_mnist1d", SignalClassifier, "MNIST-1D classifier: patches of 4 samples, d = 64, 4 heads, 4 pre-norm "
    "blocks, 10 classes.",
    num_classes=10, patch=4, **_TINY_TEXT, depth=4,
)
register_model(
    "transevolve_listops", TransEvolveClassifier, "TransEvolve-randomFF-2 (2 blocks of depth 3) at toy scale: d = 64, "
    "4 heads, mean pooling over the real tokens, 10 classes (ListOps); the other variants of TRANSEVOLVE_VARIANTS are "
    "overrides.",
    num_classes=10, **_TINY_TEXT, **TRANSEVOLVE_VARIANTS["randomFF-2"],
)
