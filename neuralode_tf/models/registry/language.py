"""The language models of the registry (:class:`~neuralode_tf.models.CausalLM`): nanoGPT's baselines and the
released OT-Transformer runs (Kan et al. 2025, ``KelvinKan/OT-Transformer``), registered on import."""

from __future__ import annotations

from ..frontends.causal_lm import CausalLM
from ._registry import register_model

_NANOGPT = dict(bias=False)  # nanoGPT's train.py default, which its configs and the OT code's runs keep
_CHAR = dict(_NANOGPT, block_size=256, dropout=0.2)  # config/train_shakespeare_char.py
_GPT2 = dict(_NANOGPT, vocab_size=50304, dim=768, depth=12, num_heads=12, block_size=1024, dropout=0.0)
_OT_CHAR = dict(field="composed", steps=5, transport_cost=2.0, norms=False)  # --cts=True --steps=5 --lmbda=1.0
_CHAR_SMALL = dict(_NANOGPT, block_size=64, dropout=0.0)  # nanoGPT's CPU recipe: block 64, no dropout
_CHAR_DOC = "vocab_size is the data's (Shakespeare: 65 characters)."
_LAMBDA_DOC = (
    "The released loss adds λ · mean e(T), without eq. 8's 1/2 (KineticEnergy's 'code' convention), so "
    "transport_cost (eq. 8's λ, the library's convention) = 2 × the released --lmbda regularises exactly as that run."
)

register_model(
    "nanogpt_char", CausalLM, "nanoGPT's Shakespeare-char GPT, the baseline of the released OT-Transformer code "
    "(config/train_shakespeare_char.py, train.py's bias=False): 6 layers, 6 heads, d = 384, block 256, dropout "
    f"0.2, learned positions, tied head; the split reading, whose one Lie-Trotter Euler step per layer is the "
    f"discrete GPT. {_CHAR_DOC}",
    **_CHAR, dim=384, depth=6, num_heads=6,
)
register_model(
    "ot_nanogpt_char", CausalLM, "The released OT-Transformer's Shakespeare-char run (KelvinKan/OT-Transformer "
    "README: --cts=True --steps=5 --lmbda=1.0 --n_layer=5 --n_head=5 --n_embd=320): the 5 blocks with their skips "
    "composed into one field on [0, 1], 5 Euler steps, transport_cost = 2.0 (--lmbda=1.0), every LayerNorm off "
    f"(train.py switches them off for this run), block 256, dropout 0.2. {_LAMBDA_DOC} {_CHAR_DOC}",
    **_CHAR, dim=320, depth=5, num_heads=5, **_OT_CHAR,
)
register_model(
    "gpt2_124m", CausalLM, "GPT-2 124M as nanoGPT trains it from scratch (config/train_gpt2.py, train.py's "
    "bias=False): 12 layers, 12 heads, d = 768, block 1024, vocab 50304 (GPT-2's 50257 padded to a multiple of 64), "
    "no dropout, the split reading (the discrete GPT): 123,587,328 parameters besides the position embeddings, "
    "nanoGPT's 123.59M.",
    **_GPT2,
)
register_model(
    "ot_gpt2_124m", CausalLM, "The released OT-Transformer's OpenWebText run (--cts=True --steps=10 --lmbda=0.1): "
    "gpt2_124m's 12 blocks and final LayerNorm composed into one field on [0, 1], 10 Euler steps, transport_cost = "
    f"0.2 (--lmbda=0.1), LayerNorms on. {_LAMBDA_DOC}",
    **_GPT2, field="composed", steps=10, transport_cost=0.2,
)
register_model(
    "nanogpt_char_small", CausalLM, "nanogpt_char reduced to train on 2 CPU cores in minutes: d = 96, 3 layers, 3 "
    f"heads, block 64, no dropout (nanoGPT's CPU recipe); same reading. {_CHAR_DOC}",
    **_CHAR_SMALL, dim=96, depth=3, num_heads=3,
)
register_model(
    "ot_nanogpt_char_small", CausalLM, "ot_nanogpt_char reduced as nanogpt_char_small: d = 80, 2 layers, 2 heads, "
    f"block 64, no dropout; same reading, 5 Euler steps, norms off, and transport_cost = 1.0 (half the released "
    f"strength: the stand-in's own choice, with which its comparison is recorded). {_CHAR_DOC}",
    **_CHAR_SMALL, dim=80, depth=2, num_heads=2, **dict(_OT_CHAR, transport_cost=1.0),
)
