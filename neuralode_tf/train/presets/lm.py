"""Language-model presets: nanoGPT and the OT-Transformer on text (Kan et al., NeurIPS 2025 version, arXiv
2505.13499; its released code ``KelvinKan/OT-Transformer``), and Zhong et al.'s (2022) Table 4 comparison.

Each model is a registered :class:`~neuralode_tf.models.CausalLM` (:func:`~neuralode_tf.models.create_model`) with
the dataset's ``vocab_size`` and ``block_size``; the builder's ``variant`` picks one of the preset's models
(:data:`LM_VARIANTS`, as ``--set model.variant=ot`` or with ``neuralode-tf compare``). A step's batch is
``batch_size`` windows of ``block_size + 1`` tokens at random starts, and an epoch ``data.windows`` of them
(:class:`~neuralode_tf.data.TokenWindows`: new windows every epoch); the validation loss and perplexity are
written at the end of each epoch (``metrics.csv``) and of the run (``metrics.json``, printed).

* **Released configurations** on the real data (``--set data.root=...``): ``nanogpt_shakespeare_char`` and
  ``ot_nanogpt_shakespeare_char`` (``config/train_shakespeare_char.py``: 5,000 steps of 64 x 4 accumulated windows
  of 256 characters, lr 1e-3 with 100 warm-up steps, weight decay 0.1, clipping at 1.0; one epoch = nanoGPT's
  ``eval_interval`` of 250 steps) and ``ot_gpt2_openwebtext`` (``config/train_gpt2.py``: 60,000 steps of 6 x 40
  windows of 1,024 GPT-2 tokens, lr 6e-4, 2,000 warm-up steps; GPU scale).
* **Reduced** presets on the offline character corpus ``tweets_char``, minutes on 2 CPU cores: ``nanogpt_tweets_char``
  (nanoGPT baseline, OT-Transformer, and without its transport cost; the ``_small`` registry models) and
  ``zhong_nanogpt_tweets_char`` (sequential against parallel blocks, dropout 0, 0.1 and 0.3).

Every LM preset clips the gradient norm at 1.0, as the released nanoGPT code does. With ``grad_accumulation``
the loss *and* the transport cost are divided by the number of micro-batches (the released code divides only the
logged loss, so its gradients grow with the accumulation steps; :func:`~neuralode_tf.train.train`). Left as
PyTorch's defaults, unlike nanoGPT: Adam's ``β2`` (0.999; nanoGPT 0.99 for characters, 0.95 for GPT-2), weight decay
on every parameter (nanoGPT's only on matrices), and the cosine decay to 0 (nanoGPT's to ``lr / 10``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from torch import nn

from ...data import Splits, TokenWindows
from ...models import create_model
from ._registry import Preset, by_preset, register_preset, register_variants

__all__ = ["LM_PRESETS", "LM_VARIANTS"]

Family = Mapping[str, tuple[str, dict[str, Any]]]
"""A preset's models: variant -> (registered model, its overrides)."""

_OT: Family = {
    "baseline": ("nanogpt_char", {}),
    "ot": ("ot_nanogpt_char", {}),
    "ot_unregularized": ("ot_nanogpt_char", {"transport_cost": None}),
}
_OT_SMALL: Family = {name: (f"{model}_small", overrides) for name, (model, overrides) in _OT.items()}
_OT_GPT2: Family = {
    "baseline": ("gpt2_124m", {}),
    "ot": ("ot_gpt2_124m", {}),
    "ot_unregularized": ("ot_gpt2_124m", {"transport_cost": None}),
}
_ZHONG: Family = {
    f"{layer}{suffix}": ("nanogpt_char_small", {"field": field, "dropout": dropout})
    for layer, field in (("sequential", "split"), ("parallel", "parallel"))
    for suffix, dropout in (("", 0.0), ("_dropout", 0.1), ("_dropout_03", 0.3))
}
"""Zhong et al. (2022), Table 4: the sequential (pre-norm GPT, the ``split`` reading, Lie-Trotter) and the parallel
(``x + attn(LN x) + mlp(LN x)``, Euler) layer, each with dropout 0, 0.1 (``_dropout``) and 0.3 (``_dropout_03``),
on ``nanogpt_char_small``'s blocks."""


def _lm(data: Splits) -> dict[str, Any]:
    """A causal language model's ``vocab_size`` and ``block_size``: the dataset's."""
    if not isinstance(data.train, TokenWindows):
        raise TypeError(f"a language model needs token windows; {data.name!r} holds {data.kind!r}")
    return {"vocab_size": data.train.vocab_size, "block_size": data.train.block_size}


def _build(family: Family, data: Splits, variant: str, **overrides: Any) -> nn.Module:
    if variant not in family:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(family)}")
    name, settings = family[variant]
    return create_model(name, **{**_lm(data), **settings, **overrides})


def _causal_lm(family: Family, variant: str) -> Callable[..., nn.Module]:
    """The builder ``(data, variant=variant, **overrides)`` of ``family``'s models."""
    return partial(_build, family, variant=variant)


def _variants(family: Family) -> dict[str, dict[str, Any]]:
    return {name: {"variant": name} for name in family}


_SHAKESPEARE = dict(
    epochs=20,
    batch_size=256,
    grad_accumulation=4,
    lr=1e-3,
    weight_decay=0.1,
    warmup_steps=100,
    eval_batch_size=64,
    data=dict(block_size=256, windows=64_000),
)
"""``config/train_shakespeare_char.py``: 64 x 4 windows per step, 5,000 steps in 20 epochs of 250 (its
``eval_interval``)."""

_TWEETS = dict(
    epochs=3,
    batch_size=32,
    lr=2e-3,
    weight_decay=0.1,
    warmup_steps=20,
    data=dict(block_size=64, windows=3200, val_windows=512),
)
"""300 steps of 32 windows of 64 characters (3 epochs of 100 steps); validated on the first 512 windows
(32,769 characters) of the validation text."""

LM_PRESETS: dict[str, Preset] = {
    "nanogpt_shakespeare_char": register_preset(
        "nanogpt_shakespeare_char",
        "nanoGPT's Shakespeare-char GPT (6 layers, 6 heads, d=384, block 256, dropout 0.2), the released OT code's "
        "baseline: 5,000 steps of 64x4 windows, lr 1e-3; needs data.root=<folder of input.txt>",
        "shakespeare_char",
        _causal_lm(_OT, "baseline"),
        **_SHAKESPEARE,
    ),
    "ot_nanogpt_shakespeare_char": register_preset(
        "ot_nanogpt_shakespeare_char",
        "the released OT-Transformer's Shakespeare-char run: 5 composed blocks, d=320, 5 Euler steps, "
        "transport_cost=2 (the released --lmbda=1.0), no LayerNorms, nanoGPT's settings; "
        "needs data.root=<folder of input.txt>",
        "shakespeare_char",
        _causal_lm(_OT, "ot"),
        **_SHAKESPEARE,
    ),
    "ot_gpt2_openwebtext": register_preset(
        "ot_gpt2_openwebtext",
        "not here (GPU scale): the released OT-Transformer GPT-2 124M run on OpenWebText, 12 composed blocks, 10 "
        "Euler steps, transport_cost=0.2 (--lmbda=0.1), 60,000 steps of 6x40 windows of 1,024 tokens (torchrun "
        "with P processes: grad_accumulation=40/P); needs data.root=<folder of train.bin, val.bin>",
        "openwebtext",
        _causal_lm(_OT_GPT2, "ot"),
        epochs=60,
        batch_size=240,
        grad_accumulation=40,
        lr=6e-4,
        weight_decay=0.1,
        warmup_steps=2000,
        eval_batch_size=8,
        data=dict(block_size=1024, windows=240_000, vocab_size=50304),  # nanoGPT's padded GPT-2 vocabulary
    ),
    "nanogpt_tweets_char": register_preset(
        "nanogpt_tweets_char",
        "reduced nanoGPT (d=96, 3 layers) / OT-Transformer (d=80, 2 composed blocks, 5 Euler steps, transport_cost=1) "
        "on the tweets' characters: 300 steps of 32 windows of 64; variants baseline, ot, ot_unregularized",
        "tweets_char",
        _causal_lm(_OT_SMALL, "baseline"),
        **_TWEETS,
    ),
    "zhong_nanogpt_tweets_char": register_preset(
        "zhong_nanogpt_tweets_char",
        "Zhong et al. Table 4 reduced: sequential vs parallel GPT layers (d=96, 3 layers), dropout 0 / 0.1 / 0.3, on "
        "the tweets' characters; variants sequential, parallel, *_dropout (0.1), *_dropout_03 (0.3)",
        "tweets_char",
        _causal_lm(_ZHONG, "parallel"),
        **_TWEETS,
    ),
}
"""The language-model presets by name (see the module docstring); :data:`~neuralode_tf.train.PRESETS` lists them."""

LM_VARIANTS: dict[str, dict[str, dict[str, Any]]] = by_preset({
    "nanogpt_shakespeare_char": _variants(_OT),
    "ot_nanogpt_shakespeare_char": _variants(_OT),
    "ot_gpt2_openwebtext": _variants(_OT_GPT2),
    "nanogpt_tweets_char": _variants(_OT_SMALL),
    "zhong_nanogpt_tweets_char": _variants(_ZHONG),
})
"""The models each LM preset compares, as ``model.variant`` overrides (``neuralode-tf compare PRESET``):
``baseline`` (nanoGPT), ``ot`` (the OT-Transformer) and ``ot_unregularized`` (the same with ``λ = 0``); for
``zhong_nanogpt_tweets_char`` the sequential and parallel layers with dropout 0, 0.1 and 0.3."""

register_variants(LM_VARIANTS)
