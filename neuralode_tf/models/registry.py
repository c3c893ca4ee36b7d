"""Named model configurations, one registry in the style of timm.

A configuration is a model class (its *builder*) and keyword arguments; :func:`create_model` calls
``builder(**{**kwargs, **overrides})``, so every argument can be overridden, e.g.
``create_model("deit_tiny_cifar100", field="parallel", num_sets=6, method="rk4")``. Arguments that depend on
the data and have no default are given there too: ``vocab_size`` of :class:`~neuralode_tf.models.TextClassifier`,
:class:`~neuralode_tf.models.TransEvolveClassifier` and :class:`~neuralode_tf.models.TransEvolveSeq2Seq`,
``src_vocab_size`` of :class:`~neuralode_tf.models.Seq2Seq`. :func:`list_models` lists the names (the papers'
architectures and the models of the training presets, :data:`neuralode_tf.train.PRESETS`, which build them by
name with the data's shape as overrides); :func:`model_config` gives one configuration with its description.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from .._renamed import renamed
from .seq2seq import Seq2Seq
from .set_reference import ReferenceSetTransformer
from .set_transformer import SetTransformer
from .signal import SignalClassifier
from .text import TextClassifier
from .transevolve import TRANSEVOLVE_VARIANTS, TransEvolveClassifier, TransEvolveSeq2Seq
from .vit import ViT

__all__ = ["ModelConfig", "register_model", "create_model", "list_models", "model_config"]


@dataclass(frozen=True)
class ModelConfig:
    """A named configuration: the model is ``builder(**kwargs)``; ``doc`` describes it."""

    name: str
    builder: Callable[..., nn.Module]
    kwargs: dict[str, Any]
    doc: str


_REGISTRY: dict[str, ModelConfig] = {}


def register_model(name: str, builder: Callable[..., nn.Module], doc: str, **kwargs: Any) -> None:
    """Register ``builder(**kwargs)`` as ``name``, described by ``doc``; a name is registered once."""
    if name in _REGISTRY:
        raise ValueError(f"a model named {name!r} is already registered")
    _REGISTRY[name] = ModelConfig(name, builder, copy.deepcopy(kwargs), doc)


def list_models(pattern: str = "*") -> list[str]:
    """The registered names that match the shell-style ``pattern`` (e.g. ``"ot_*"``), sorted."""
    return sorted(fnmatch.filter(_REGISTRY, pattern))


RENAMED_MODELS: dict[str, str] = {"deit_tiny_digits": "vit_digits"}
"""Registered models' former names: :func:`model_config` and :func:`create_model` still accept them, with a
:class:`DeprecationWarning`, until the next release."""


def model_config(name: str) -> ModelConfig:
    """The configuration registered as ``name`` (a copy: changing it changes nothing registered)."""
    return _registered(name)


def create_model(name: str, **overrides: Any) -> nn.Module:
    """The model ``name``: its builder called with the registered keyword arguments, updated by ``overrides``."""
    config = _registered(name)
    return config.builder(**{**config.kwargs, **overrides})


def _registered(name: str) -> ModelConfig:
    """A copy of the configuration registered as ``name`` or, with a warning to the caller's caller, as its new
    name."""
    name = renamed("model", name, RENAMED_MODELS, stacklevel=4)
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(map(repr, list_models()))}")
    return replace(_REGISTRY[name], kwargs=copy.deepcopy(_REGISTRY[name].kwargs))


# Vision Transformers ------------------------------------------------------------------------------------------

_DEIT_TINY = dict(dim=192, depth=12, num_heads=3)
_DIGITS_VIT = dict(
    img_size=8, patch_size=2, in_chans=1, num_classes=10, dim=48, depth=4, num_heads=4, field="parallel"
)
_SINKFORMERS_MNIST = dict(
    img_size=28,
    patch_size=7,
    in_chans=1,
    num_classes=10,
    depth=1,
    num_heads=1,
    attention_only=True,
    attention=dict(qkv_bias=False, out_proj=False),
)
_CATS_DOGS = dict(
    img_size=224, patch_size=16, in_chans=3, num_classes=2, dim=128, num_heads=8, mlp_hidden=128,
    attention=dict(qkv_bias=False, head_dim=64),
)
_OT = dict(field="composed", transport_cost=0.01, steps=20)  # Kan et al.'s ViTs: one field on [0, 1], 20 Euler steps

register_model(
    "deit_tiny", ViT, "DeiT-Ti (Touvron et al. 2021): 224x224x3, patch 16, d = 192, depth 12, 3 heads, MLP ratio 4, "
    "split field, so the discrete DeiT-Ti stack (without distillation token).",
    **_DEIT_TINY, img_size=224, patch_size=16, in_chans=3, num_classes=1000,
)
register_model(
    "deit_tiny_cifar100", ViT, "DeiT-Ti on CIFAR-100 at its own resolution: 32x32x3, patch 4, 100 classes. The rows "
    "of Zhong et al. (2022, Table 1) are overrides: field='parallel' (their model), num_sets=6, 4, 3, 2, 1, "
    "method='rk4'. Their parameter counts (5.5M ... 0.7M) are those of deit_tiny with num_classes=100, i.e. "
    "CIFAR-100 resized to 224x224.",
    **_DEIT_TINY, img_size=32, patch_size=4, in_chans=3, num_classes=100,
)
register_model(
    "vit_digits", ViT, "Zhong et al.'s parallel model scaled down to scikit-learn's 8x8x1 digits: patch 2 "
    "(16 patches), d = 48, depth 4, 4 heads, field='parallel'.",
    **_DIGITS_VIT,
)
register_model(
    "ea_vit_digits", ViT, "vit_digits with 4 sequential evolving-attention blocks (Wang et al. 2021) at the "
    "paper's image setting α = 0.5, β = 1 (§4.1, ImageNet), 3x3 convolutions.",
    **{**_DIGITS_VIT, "field": "evolving", "evolving": dict(alpha=0.5, beta=1.0, kernel_size=3)},
)
register_model(
    "ot_mnist_baseline", ViT, "The MNIST ViT of Sander et al. (2022; Sinkformers' ViT_only_Att), baseline of Kan et "
    "al. (2025, Table 2): 28x28x1, patch 7, one attention-only block with one head, d = k = 128, qkv without biases "
    "and no output projection, one discrete block: 59,658 parameters. Kan et al.'s 93k is 92,938: Sinkformers' "
    "model also builds a FeedForward(128, 128) (33,280 parameters) that its forward never calls.",
    **_SINKFORMERS_MNIST, dim=128,
)
register_model(
    "ot_mnist_ode", ViT, "Kan et al.'s MNIST OT-Transformer (Appendix B): ot_mnist_baseline with d = k = 64, the "
    "block as one composed field on [0, 1] with 20 Euler steps and λ = 0.01: 17,546 parameters, their 18k.",
    **_SINKFORMERS_MNIST, dim=64, **_OT,
)
register_model(
    "ot_mnist_ode_digits", ViT, "ot_mnist_ode with patch 2 on scikit-learn's 8x8x1 digits (the ot_mnist_digits "
    "stand-in).",
    **{**_SINKFORMERS_MNIST, "img_size": 8, "patch_size": 2}, dim=64, **_OT,
)
register_model(
    "ot_catsdogs_baseline", ViT, "Kan et al.'s Cats & Dogs ViT (Appendix B, after Sinkformers' "
    "trainer_cats_and_dogs.py): 224x224x3, patch 16, d = 128, 8 heads of k = 64 (qkv without biases), MLP width "
    "128, 6 blocks (1,774,848 parameters: Table 3's 1.77M).",
    **_CATS_DOGS, depth=6,
)
register_model(
    "ot_catsdogs_ode", ViT, "Kan et al.'s Cats & Dogs OT-Transformer: ot_catsdogs_baseline with 5 blocks composed "
    "into one field, 20 Euler steps on [0, 1], λ = 0.01 (blocks: 1,479,040 parameters, Table 3's 1.48M).",
    **_CATS_DOGS, depth=5, **_OT,
)

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

# Set Transformers ---------------------------------------------------------------------------------------------

_LEE_MODELNET = dict(num_classes=40, num_heads=4, num_inducing=16, num_seeds=1, dropout=0.5)
_LEE_DOC = (
    "Lee et al.'s (2019) ModelNet40 Set Transformer as their code builds it (post-norm MABs), which Sinkformers and "
    "Kan et al. (2025, Appendix B) run: 2 ISABs, 4 heads, 16 inducing points, PMA with 1 seed, dropout 0.5."
)
_OT_SET = dict(dim=200, field="composed", steps=8, transport_cost=1.0)

register_model(
    "set_transformer_modelnet40", SetTransformer, "The ModelNet40 configuration of Lee et al. (2019; their "
    "main_pointcloud.py), with pre-norm ISABs: width 256, 4 heads, 16 inducing points, 2 ISABs, PMA with 1 seed, "
    "dropout 0.5, 40 classes.",
    num_classes=40, dim=256, num_heads=4, num_inducing=16, depth=2, num_seeds=1, dropout=0.5,
)
register_model(
    "set_transformer_shapes3d", SetTransformer, "A small Set Transformer for neuralode_tf.data.shapes3d (8 "
    "primitives): width 64, 4 heads, 16 inducing points, 2 ISABs, a 256-wide rFF and 8 PMA seeds (with one seed, "
    "cones/pyramids and boxes/cylinders were confused).",
    num_classes=8, dim=64, num_heads=4, num_inducing=16, depth=2, num_seeds=8, mlp_hidden=256,
)
register_model(
    "ot_modelnet40_baseline", ReferenceSetTransformer, f"{_LEE_DOC} Width 256, discrete: Kan et al.'s baseline "
    "(Table 1).",
    **_LEE_MODELNET, dim=256, field="discrete",
)
register_model(
    "ot_modelnet40_ode", ReferenceSetTransformer, f"{_LEE_DOC} The OT-Transformer: the points lifted to width 200, "
    "2 ISABs composed into one field on [0, 1], 8 Euler steps, λ = 1.",
    **_LEE_MODELNET, **_OT_SET,
)
register_model(
    "ot_modelnet40_ode_shapes3d", ReferenceSetTransformer, "ot_modelnet40_ode at width 50, 2 heads, 8 PMA seeds, no "
    "dropout, 8 classes (the ot_modelnet40_shapes3d stand-in, on shapes3d).",
    **{**_LEE_MODELNET, "num_classes": 8, "num_heads": 2, "num_seeds": 8, "dropout": 0.0}, **{**_OT_SET, "dim": 50},
)

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
    "transevolve_listops", TransEvolveClassifier, "TransEvolve-randomFF-2 (2 blocks of depth 3) at toy scale: d = 64, "
    "4 heads, mean pooling over the real tokens, 10 classes (ListOps); the other variants of TRANSEVOLVE_VARIANTS are "
    "overrides.",
    num_classes=10, **_TINY_TEXT, **TRANSEVOLVE_VARIANTS["randomFF-2"],
)
register_model(
    "transevolve_reverse", TransEvolveSeq2Seq, "TransEvolve-randomFF-2 encoder-decoder (2 blocks of depth 3 per side) "
    "at toy scale: d = 64, 4 heads; the other variants of TRANSEVOLVE_VARIANTS are overrides.",
    **_TINY_TEXT, **TRANSEVOLVE_VARIANTS["randomFF-2"],
)
