"""The presets on the offline stand-in datasets (vision, text, sets, signals, ListOps, sequence reversal) and their
variants. Each model is a registered configuration of :mod:`neuralode_tf.models`
(:func:`~neuralode_tf.models.create_model`) built on the dataset's shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from ...data import Splits
from ...models import TRANSEVOLVE_VARIANTS, create_model, model_config
from ...models.frontends.seq2seq import ATTENTIONS
from ._ablations import ablations
from ._builders import AA_RESNET_ABLATIONS, _vocabulary_size, classes, images, pairs, registered, resnet, tokens
from ._registry import by_preset, register_preset, register_variants

__all__ = ["TRANSEVOLVE_LISTOPS_VARIANTS", "EA_VARIANTS", "EA_REVERSE", "ZHONG_REVERSE_VARIANTS"]


def _transevolve_settings(variant: str) -> dict[str, Any]:
    if variant not in TRANSEVOLVE_VARIANTS:
        raise ValueError(
            f"unknown variant {variant!r}; valid: 'transformer', {', '.join(map(repr, TRANSEVOLVE_VARIANTS))}"
        )
    return TRANSEVOLVE_VARIANTS[variant]


def _listops(data: Splits, variant: str = "randomFF-2", **overrides: Any) -> nn.Module:
    """ListOps classifiers of Dutta et al.'s comparison: the registered ``transformer_listops`` (6 pre-norm blocks,
    ``variant="transformer"``) or ``transevolve_listops`` with a variant of
    :data:`~neuralode_tf.models.TRANSEVOLVE_VARIANTS` (6 layers in 1 or 2 blocks); d = 64, 4 heads, mean pooling
    over the real tokens."""
    if variant == "transformer":
        return create_model("transformer_listops", **{**tokens(data), **overrides})
    return create_model("transevolve_listops", **{**tokens(data), **_transevolve_settings(variant), **overrides})


def _transevolve_seq2seq(data: Splits, variant: str = "randomFF-2", **overrides: Any) -> nn.Module:
    """Encoder-decoders of Dutta et al.'s translation comparison at toy scale: the registered ``transformer_reverse``
    (6 + 6 pre-norm blocks, ``variant="transformer"``) or ``transevolve_reverse`` with a TransEvolve variant (6
    layers in 1 or 2 blocks per side); d = 64, 4 heads."""
    if variant == "transformer":
        return create_model("transformer_reverse", **{**pairs(data), **overrides})
    vocab = {"vocab_size": _vocabulary_size(data)}
    return create_model("transevolve_reverse", **{**vocab, **_transevolve_settings(variant), **overrides})


TRANSEVOLVE_LISTOPS_VARIANTS: dict[str, dict[str, Any]] = {
    name: {"variant": name} for name in ("transformer", *TRANSEVOLVE_VARIANTS)
}
"""The five models of the ListOps and sequence-to-sequence comparisons (Transformer and TransEvolve
randomFF/fullFF-1/-2), as overrides of ``transevolve_listops`` and ``transevolve_reverse``."""


def _field_ablations(ea: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The shared ablation (:func:`~neuralode_tf.train.presets._ablations.ablations`) around ``ea`` as the field a
    front-end reads: ``"split"`` for vanilla attention, ``"evolving"`` with the ablated settings otherwise."""
    return {
        name: dict(field="split", evolving=None) if settings is None else dict(field="evolving", evolving=settings)
        for name, settings in ablations(ea).items()
    }


EA_REVERSE: dict[str, Any] = dict(model_config("ea_transformer_lite").kwargs["evolving"], kernel_size=3)
"""EA-Transformer-Lite's settings (Wang et al. 2021, §4.3, Table 6; ``ea_transformer_lite``): ``α = β = 0.1``,
3x3, the skips in the encoder only (:class:`~neuralode_tf.models.Seq2Seq` sets ``α = 0`` in the decoder)."""

_EA_REVERSE_MODEL = dict(encoder_depth=3, decoder_depth=3, field="evolving", evolving=EA_REVERSE)


def _ea_seq2seq(data: Splits, **overrides: Any) -> nn.Module:
    """The translation stand-in's EA-Transformer: the registered ``seq2seq_reverse`` (d = 64, 4 heads) at 3 + 3
    pre-norm blocks with :data:`EA_REVERSE` evolving attention in its three kinds of attention."""
    return create_model("seq2seq_reverse", **{**pairs(data), **_EA_REVERSE_MODEL, **overrides})


def _translation_ablations(ea: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Wang et al.'s Table 6: vanilla attention (Transformer-Lite), EA with the settings ``ea``, no convolution
    (``β = 0``) in the encoder self-attention, the decoder self-attention or the encoder-decoder attention alone
    (:data:`~neuralode_tf.models.frontends.seq2seq.ATTENTIONS`), no skip (``α = 0``), 1x1 and 5x5 kernels."""
    shared = _field_ablations(ea)
    without = {
        f"no_{name}_convolution": dict(field="evolving", evolving={**ea, name: {"beta": 0.0}}) for name in ATTENTIONS
    }
    kept = ("no_skip", "kernel_1x1", "kernel_5x5")
    return {"vanilla": shared["vanilla"], "ea": shared["ea"], **without, **{name: shared[name] for name in kept}}


EA_VARIANTS: dict[str, dict[str, dict[str, Any]]] = by_preset({
    "ea_vit_digits": _field_ablations(model_config("ea_vit_digits").kwargs["evolving"]),
    "ea_text_tweets": _field_ablations(model_config("ea_text_tweets").kwargs["evolving"]),
    "ea_aa_resnet_digits": dict(AA_RESNET_ABLATIONS),
    "ea_seq2seq_reverse": _translation_ablations(EA_REVERSE),
})
"""The models of the evolving-attention ablation (Wang et al. 2021), per preset, as model overrides.

Around the registered models' settings: ``ea_vit_digits`` (``ea_vit_digits``) and ``ea_aa_resnet_digits``
(``ea_aa_resnet_digits``, Table 2's own architecture, reduced) use the paper's image setting ``α = 0.5, β = 1`` (§4.1,
ImageNet); ``ea_text_tweets`` (``ea_text_tweets``) the largest values of its text search
grid, ``α = β = 0.4`` (§4.2); ``ea_seq2seq_reverse`` (the translation stand-in) EA-Transformer-Lite's
:data:`EA_REVERSE` and Table 6's ablations, which remove the convolution from one kind of attention at a time.
Not tuned here.
"""


_ZHONG_REVERSE_MODEL = dict(encoder_depth=3, decoder_depth=3, field="parallel")


def _zhong_seq2seq(data: Splits, **overrides: Any) -> nn.Module:
    """Zhong et al.'s (2022) Table 3 at toy scale: ``ea_seq2seq_reverse``'s ``vanilla`` model (the registered
    ``seq2seq_reverse``, d = 64, 4 heads, 3 + 3 pre-norm blocks), by default with the parallel layers of eq. 4."""
    return create_model("seq2seq_reverse", **{**pairs(data), **_ZHONG_REVERSE_MODEL, **overrides})


ZHONG_REVERSE_VARIANTS: dict[str, dict[str, Any]] = {
    f"{layer}{suffix}": dict(field=field, dropout=dropout)
    for layer, field in (("sequential", "split"), ("parallel", "parallel"))
    for suffix, dropout in (("", 0.0), ("_dropout", 0.1))
}
"""Zhong et al. (2022), Table 3, on the translation stand-in: the sequential layers (``split``, Lie-Trotter: the
discrete pre-norm transformer) and the parallel ones (``parallel``, Euler: ``x + G(x) + F(x)`` in the encoder,
``y + SA(y) + CA(y; m) + F(y)`` in the decoder), each with dropout 0 and 0.1 (``_dropout``), as
``zhong_nanogpt_tweets_char`` names Table 4's."""


_ROWS: list[tuple[str, str, str, Callable[..., nn.Module], dict[str, Any]]] = [
    # name, description, dataset, model, settings (TrainConfig fields; "data": the dataset's options)
    (
        "vit_digits",
        "DeiT-Ti-like ViT (patch 2, d=48, 4 parallel blocks) on scikit-learn digits",
        "digits",
        registered("vit_digits", images),
        dict(epochs=30, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
    ),
    (
        "text_tweets",
        "text classifier (d=64, 2 blocks) on the tweets sentiment corpus, 3 classes",
        "tweets",
        registered("text_tweets", tokens),
        dict(epochs=3, batch_size=128, lr=1e-3, weight_decay=0.01, warmup_steps=50),
    ),
    (
        "set_transformer_shapes3d",
        "Set Transformer (ISAB width 64, 8 PMA seeds) on generated 3D shapes, 8 classes",
        "shapes3d",
        registered("set_transformer_shapes3d", classes),
        dict(epochs=20, batch_size=64, lr=2e-3, warmup_steps=50, data=dict(num_train=4000, num_test=1000)),
    ),
    (
        "signal_mnist1d",
        "continuous-depth transformer (patch 4, d=64, 4 blocks) on MNIST-1D, 4,000/1,000 split",
        "mnist1d",
        registered("signal_mnist1d", classes),
        dict(epochs=60, batch_size=100, lr=1e-3, weight_decay=0.01, warmup_steps=100),
    ),
    (
        "transevolve_listops",
        "TransEvolve (randomFF-2: 2 blocks of depth 3, d=64) on generated ListOps, lengths 16-128",
        "listops",
        _listops,
        dict(epochs=20, batch_size=64, lr=1e-3, weight_decay=0.01, warmup_steps=100),
    ),
    (
        "ea_vit_digits",
        "Evolving-attention ViT (patch 2, d=48, 4 blocks, α=0.5, β=1, 3x3) on scikit-learn digits",
        "digits",
        registered("ea_vit_digits", images),
        dict(epochs=30, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
    ),
    (
        "ea_text_tweets",
        "Evolving-attention text classifier (d=64, 4 blocks, α=β=0.4, 3x3) on the tweets corpus",
        "tweets",
        registered("ea_text_tweets", tokens),
        dict(epochs=2, batch_size=128, lr=1e-3, weight_decay=0.01, warmup_steps=50, data=dict(max_samples=12000)),
    ),
    (
        "ea_aa_resnet_digits",
        "EA-AA-ResNet reduced (basic blocks 2-2-2-2, widths 16-128, stages 1-3 augmented, α=0.5, β=1, 3x3) on "
        "scikit-learn digits",
        "digits",
        resnet("ea_aa_resnet_digits"),
        dict(epochs=10, batch_size=64, lr=2e-3, weight_decay=0.05, warmup_steps=50),
    ),
    (
        "transevolve_reverse",
        "TransEvolve encoder-decoder (randomFF-2: 2 blocks of depth 3 per side, d=64) reversing symbol sequences",
        "reverse",
        _transevolve_seq2seq,
        dict(epochs=20, batch_size=64, lr=1e-3, warmup_steps=50),
    ),
    (
        "ea_seq2seq_reverse",
        "EA-Transformer encoder-decoder (d=64, 3+3 blocks, α=β=0.1, 3x3, skips in the encoder) reversing sequences "
        "of 10-20 symbols (translation stand-in)",
        "reverse",
        _ea_seq2seq,
        dict(epochs=10, batch_size=64, lr=1e-3, warmup_steps=50, data=dict(min_length=10, max_length=20)),
    ),
    (
        "zhong_seq2seq_reverse",
        "Zhong et al. Table 3 reduced: sequential vs parallel encoder-decoder layers (d=64, 3+3 blocks), dropout 0 / "
        "0.1, reversing sequences of 10-20 symbols (translation stand-in); variants sequential, parallel, *_dropout",
        "reverse",
        _zhong_seq2seq,
        dict(epochs=10, batch_size=64, lr=1e-3, warmup_steps=50, data=dict(min_length=10, max_length=20)),
    ),
    (
        "seq2seq_reverse",
        "encoder-decoder (d=64, 2+2 blocks) reversing symbol sequences",
        "reverse",
        registered("seq2seq_reverse", pairs),
        dict(epochs=20, batch_size=64, lr=1e-3, warmup_steps=50),
    ),
]

for _name, _description, _dataset, _model, _settings in _ROWS:
    register_preset(_name, _description, _dataset, _model, **_settings)

register_variants(
    {
        "transevolve_listops": TRANSEVOLVE_LISTOPS_VARIANTS,
        "transevolve_reverse": TRANSEVOLVE_LISTOPS_VARIANTS,
        **EA_VARIANTS,
        "zhong_seq2seq_reverse": ZHONG_REVERSE_VARIANTS,
    }
)
