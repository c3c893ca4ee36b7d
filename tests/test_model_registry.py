"""The model registry: every registered model builds and trains, and every training preset builds the model its
explicit constructor call builds (the presets' models before the registry), with the same parameter counts, and a
model that takes its dataset's inputs (``neuralode_tf.data.MODEL_INPUTS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from neuralode_tf import ContinuousDepth
from neuralode_tf.data import Splits, TensorSplit, TokenWindows, Vocabulary
from neuralode_tf.models import (
    PAD,
    TRANSEVOLVE_VARIANTS,
    CausalLM,
    ReferenceSetTransformer,
    Seq2Seq,
    SetTransformer,
    SignalClassifier,
    TextClassifier,
    TransEvolveClassifier,
    TransEvolveSeq2Seq,
    ViT,
    aa_resnet,
    continuous_resnet,
    create_model,
    list_models,
    model_config,
    register_model,
)
from neuralode_tf.train import PRESETS, VARIANTS, check_model_inputs

# --------------------------------------------------------------------------------------------
# Every registered model at a small input size (timm's test_model_forward / backward)
# --------------------------------------------------------------------------------------------

VOCAB, BATCH, LENGTH = 20, 2, 6


def _small_model_and_inputs(name: str, device: torch.device) -> tuple[nn.Module, tuple[Any, ...]]:
    """The registered model ``name`` with the smallest data arguments it takes, and inputs for it."""
    config = model_config(name)
    builder, kwargs = config.builder, config.kwargs
    overrides: dict[str, Any] = {}
    if device.type == "xla" and kwargs.get("steps", 0) > 4:
        overrides["steps"] = 4  # XLA compiles a fixed-grid solve as one graph: fewer steps build the same model
    tokens = torch.randint(1, VOCAB, (BATCH, LENGTH))
    tokens[1, LENGTH // 2 :] = PAD
    if builder is ViT:
        side = 2 * kwargs["patch_size"]
        model = create_model(name, img_size=side, **overrides)
        inputs: tuple[Any, ...] = (torch.rand(BATCH, kwargs["in_chans"], side, side),)
    elif builder is SignalClassifier:
        model = create_model(name, **overrides)
        inputs = (torch.randn(BATCH, 3 * kwargs["patch"]),)
    elif builder in (TextClassifier, TransEvolveClassifier):
        model = create_model(name, vocab_size=VOCAB, **overrides)
        inputs = (tokens,)
    elif builder in (SetTransformer, ReferenceSetTransformer):
        model = create_model(name, **overrides)
        pad = torch.zeros(BATCH, 10, dtype=torch.bool)
        pad[1, 7:] = True
        inputs = (torch.randn(BATCH, 10, 3), pad)
    elif builder is CausalLM:
        model = create_model(name, vocab_size=VOCAB, **overrides)
        inputs = (tokens,)
    elif builder in (Seq2Seq, TransEvolveSeq2Seq):
        vocab = {"src_vocab_size" if builder is Seq2Seq else "vocab_size": VOCAB}
        model = create_model(name, **vocab, **overrides)
        inputs = (tokens, tokens[:, : LENGTH - 1])
    elif builder is aa_resnet:
        side = 32 if kwargs.get("image_size", 224) == 224 else kwargs["image_size"]  # ImageNet's at 32 pixels
        model = create_model(name, image_size=side, **overrides)
        inputs = (torch.rand(BATCH, kwargs.get("in_chans", 3), side, side),)
    else:
        raise AssertionError(f"no inputs for {builder.__name__}: add them here")
    return model.to(device), tuple(x.to(device) for x in inputs)


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_runs_forward_and_backward(name, device):
    torch.manual_seed(0)
    model, inputs = _small_model_and_inputs(name, device)
    out = model(*inputs)
    assert out.shape[0] == BATCH and torch.isfinite(out).all()
    out.float().square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


_EULER = {
    "vit_digits",
    "ot_catsdogs_ode",
    "ot_imdb_ode",
    "ot_imdb_ode_tweets",
    "ot_mnist_ode",
    "ot_mnist_ode_digits",
    "ot_modelnet40_ode",
    "ot_modelnet40_ode_shapes3d",
    "ot_nanogpt_char",
    "ot_nanogpt_char_small",
    "ot_gpt2_124m",
}
"""The registered models whose ODEs default to ``euler``: parallel blocks and composed fields. The discrete
``ot_*_baseline`` models of Kan et al.'s text and sets have no ODE; every other model defaults to ``lie_trotter``."""


@pytest.mark.cpu_only("the default solve method of each registered model")
@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_keeps_its_default_method(name):
    """The default method goes by the kind of field: a ParallelField has parts, yet its models keep ``euler``."""
    model, _ = _small_model_and_inputs(name, torch.device("cpu"))
    methods = {m.solve_options["method"] for m in model.modules() if isinstance(m, ContinuousDepth)}
    discrete = ("ot_imdb_baseline", "ot_modelnet40_baseline", *list_models("*aa_resnet*"))  # no ODE: timm's ResNets
    expected = set() if name in discrete else {"lie_trotter"}
    assert methods == ({"euler"} if name in _EULER else expected)


@pytest.mark.cpu_only("the registry's bookkeeping, no tensors")
def test_registry_lookup_and_errors():
    assert list_models("ot_*_ode") == ["ot_catsdogs_ode", "ot_imdb_ode", "ot_mnist_ode", "ot_modelnet40_ode"]
    config = model_config("vit_digits")
    assert config.builder is ViT and config.doc and config.kwargs["patch_size"] == 2
    config.kwargs["patch_size"] = 4  # a copy: the registered configuration does not change
    assert model_config("vit_digits").kwargs["patch_size"] == 2
    with pytest.raises(ValueError, match="unknown model 'vit_huge'; valid: 'aa_resnet101', 'aa_resnet152'"):
        create_model("vit_huge")
    with pytest.raises(ValueError, match="a model named 'deit_tiny' is already registered"):
        register_model("deit_tiny", ViT, "again")


# --------------------------------------------------------------------------------------------
# The training presets build the models of their explicit constructor calls
# --------------------------------------------------------------------------------------------


def _data(kind: str, num_classes: int | None, x: Tensor | None = None, vocab: int | None = None) -> Splits:
    """A one-example placeholder of a dataset's shape: all a preset reads to build its model."""
    split: Any = [] if x is None else TensorSplit(x=x, y=torch.zeros(len(x), dtype=torch.long))
    classes = None if num_classes is None else tuple(map(str, range(num_classes)))
    words = None if vocab is None else Vocabulary(f"w{i}" for i in range(vocab - 2))  # <pad> and <unk> besides
    return Splits("placeholder", kind, split, split, "shape only", classes=classes, vocab=words)


_DIGITS = _data("image", 10, torch.zeros(1, 1, 8, 8))
_TWEETS, _TWEETS_12K = _data("tokens", 3, vocab=13938), _data("tokens", 3, vocab=6603)
_REVERSE = _data("seq2seq", None, vocab=14)
_TINY = dict(dim=64, num_heads=4)
_EA_LITE = dict(alpha=0.1, beta=0.1, kernel_size=3)  # EA-Transformer-Lite (Wang et al. 2021, §4.3)
_MNIST_VIT = dict(
    patch_size=7, depth=1, num_heads=1, attention_only=True, attention=dict(qkv_bias=False, out_proj=False)
)
_CATS_DOGS_VIT = dict(patch_size=16, dim=128, num_heads=8, mlp_hidden=128, attention=dict(qkv_bias=False, head_dim=64))
_IMDB = dict(dim=256, num_heads=8, mlp_hidden=1024, norm="post", activation="relu", pooling="max")
_ISAB = dict(num_inducing=16, num_seeds=1, num_heads=4, dropout=0.5)
_OT_VIT = dict(field="composed", steps=20, transport_cost=0.01)
_OT_TEXT = dict(depth=3, field="composed", steps=8, transport_cost=0.5)
_OT_SET = dict(dim=200, field="composed", steps=8, transport_cost=1.0)


def _digits_vit(d: Splits, **o: Any) -> nn.Module:
    settings = dict(img_size=8, patch_size=2, in_chans=1, dim=48, depth=4, num_heads=4, field="parallel")
    return ViT(num_classes=d.num_classes, **{**settings, **o})


def _text(d: Splits, **o: Any) -> nn.Module:
    return TextClassifier(len(d.vocab), d.num_classes, **o)


def _image_vit(d: Splits, **o: Any) -> nn.Module:
    channels, height, width = d.train.x.shape[1:]
    return ViT(img_size=(height, width), in_chans=channels, num_classes=d.num_classes, **o)


def _listops(d: Splits, variant: str = "randomFF-2", **o: Any) -> nn.Module:
    if variant == "transformer":
        return TextClassifier(len(d.vocab), d.num_classes, **{**_TINY, "depth": 6, **o})
    return TransEvolveClassifier(len(d.vocab), d.num_classes, **{**_TINY, **TRANSEVOLVE_VARIANTS[variant], **o})


def _reverse(d: Splits, variant: str = "randomFF-2", **o: Any) -> nn.Module:
    if variant == "transformer":
        return Seq2Seq(len(d.vocab), **{**_TINY, "encoder_depth": 6, "decoder_depth": 6, **o})
    return TransEvolveSeq2Seq(len(d.vocab), **{**_TINY, **TRANSEVOLVE_VARIANTS[variant], **o})


_EA_DIGITS = dict(field="evolving", evolving=dict(alpha=0.5, beta=1.0, kernel_size=3))
_EA_TWEETS = dict(_TINY, depth=4, field="evolving", evolving=dict(alpha=0.4, beta=0.4, kernel_size=3))
_SHAPES3D = dict(dim=64, num_heads=4, num_inducing=16, depth=2, num_seeds=8, mlp_hidden=256)


def _windows(vocab: int, block_size: int) -> Splits:
    """A placeholder language-modelling dataset: token windows of ``block_size`` from a vocabulary of ``vocab``."""
    split = TokenWindows(np.zeros(block_size + 1, dtype=np.int64), block_size, vocab)
    return Splits("placeholder", "lm", split, split, "shape only")


_NANOGPT = dict(bias=False)
_CHAR_SMALL = dict(_NANOGPT, dim=96, depth=3, num_heads=3, dropout=0.0)
_LM_MODELS = {  # (preset, variant) -> the explicit CausalLM settings besides vocab_size and block_size
    **{
        (preset, variant): settings
        for preset in ("nanogpt_shakespeare_char", "ot_nanogpt_shakespeare_char")
        for variant, settings in {
            "baseline": dict(_NANOGPT, dim=384, depth=6, num_heads=6, dropout=0.2),
            "ot": dict(_NANOGPT, dim=320, depth=5, num_heads=5, dropout=0.2, field="composed", steps=5,
                       transport_cost=2.0, norms=False),
            "ot_unregularized": dict(_NANOGPT, dim=320, depth=5, num_heads=5, dropout=0.2, field="composed", steps=5,
                                     transport_cost=None, norms=False),
        }.items()
    },
    **{
        ("ot_gpt2_openwebtext", variant): dict(_NANOGPT, dim=768, depth=12, num_heads=12, dropout=0.0, **settings)
        for variant, settings in {
            "baseline": {},
            "ot": dict(field="composed", steps=10, transport_cost=0.2),
            "ot_unregularized": dict(field="composed", steps=10, transport_cost=None),
        }.items()
    },
    ("nanogpt_tweets_char", "baseline"): _CHAR_SMALL,
    **{
        ("nanogpt_tweets_char", variant): dict(_NANOGPT, dim=80, depth=2, num_heads=2, dropout=0.0, field="composed",
                                          steps=5, transport_cost=cost, norms=False)
        for variant, cost in (("ot", 1.0), ("ot_unregularized", None))
    },
    **{
        ("zhong_nanogpt_tweets_char", f"{layer}{suffix}"): dict(_CHAR_SMALL, field=field, dropout=dropout)
        for layer, field in (("sequential", "split"), ("parallel", "parallel"))
        for suffix, dropout in (("", 0.0), ("_dropout", 0.1), ("_dropout_03", 0.3))
    },
}  # fmt: skip


_RESNET_DIGITS = dict(
    depth=18, layers=(2, 2, 2, 2), channels=(16, 32, 64, 128), small_images=True, num_heads=4, min_key_dim_per_head=4,
    stages=(1, 2, 3), pooled_stages=(),
)
_IMAGENET = _data("image", 1000, torch.zeros(1, 3, 224, 224))
_TABLE_1 = {34: (20_695_168, 20_709_184), 50: (25_782_256, 25_788_680), 101: (45_365_848, 45_382_200),
            152: (61_566_848, 61_593_128)}  # (AA-ResNet, EA-AA-ResNet) parameters: Wang et al.'s Table 1 at 0.1M


def _resnet(d: Splits, **o: Any) -> nn.Module:
    channels, height, width = d.train.x.shape[1:]
    return continuous_resnet(aa_resnet(image_size=(height, width), in_chans=channels, num_classes=d.num_classes, **o))


def _lm_preset(preset: str, default: str) -> Callable[..., nn.Module]:
    def build(d: Splits, variant: str = default, **o: Any) -> nn.Module:
        sizes = dict(vocab_size=d.train.vocab_size, block_size=d.train.block_size)
        return CausalLM(**{**sizes, **_LM_MODELS[preset, variant], **o})

    return build


# preset: (placeholder of its dataset, the model by its explicit constructor call, the model's parameter count)
_PRESET_MODELS: dict[str, tuple[Splits, Callable[..., nn.Module], int]] = {
    "vit_digits": (_DIGITS, _digits_vit, 114_778),
    "text_tweets": (_TWEETS, lambda d, **o: _text(d, **{**_TINY, "depth": 2, **o}), 992_323),
    "set_transformer_shapes3d": (
        _data("points", 8),
        lambda d, **o: SetTransformer(d.num_classes, **{**_SHAPES3D, **o}),
        257_608,
    ),
    "signal_mnist1d": (
        _data("signal", 10, torch.zeros(1, 40)),
        lambda d, **o: SignalClassifier(d.num_classes, **{"patch": 4, **_TINY, "depth": 4, **o}),
        201_034,
    ),
    "transevolve_listops": (_data("tokens", 10, vocab=17), _listops, 96_842),
    "ea_vit_digits": (_DIGITS, lambda d, **o: _digits_vit(d, **{**_EA_DIGITS, **o}), 115_370),
    "ea_text_tweets": (_TWEETS_12K, lambda d, **o: _text(d, **{**_EA_TWEETS, **o}), 623_443),
    "transevolve_reverse": (_REVERSE, _reverse, 282_112),
    "ea_seq2seq_reverse": (
        _REVERSE,
        lambda d, **o: Seq2Seq(
            len(d.vocab),
            **{**_TINY, "encoder_depth": 3, "decoder_depth": 3, "field": "evolving", "evolving": _EA_LITE, **o},
        ),
        353_588,
    ),
    "zhong_seq2seq_reverse": (
        _REVERSE,
        lambda d, **o: Seq2Seq(
            len(d.vocab), **{**_TINY, "encoder_depth": 3, "decoder_depth": 3, "field": "parallel", **o}
        ),
        352_256,
    ),
    "seq2seq_reverse": (
        _REVERSE,
        lambda d, **o: Seq2Seq(len(d.vocab), **{**_TINY, "encoder_depth": 2, "decoder_depth": 2, **o}),
        235_520,
    ),
    "ot_mnist": (
        _data("image", 10, torch.zeros(1, 1, 28, 28)),
        lambda d, **o: _image_vit(d, **{**_MNIST_VIT, "dim": 64, **_OT_VIT, **o}),
        17_546,
    ),
    "ot_catsdogs": (
        _data("image", 2, torch.zeros(1, 3, 224, 224)),
        lambda d, **o: _image_vit(d, **{**_CATS_DOGS_VIT, "depth": 5, **_OT_VIT, **o}),
        1_603_330,
    ),
    "ot_imdb": (_data("tokens", 2, vocab=16000), lambda d, **o: _text(d, **{**_IMDB, **_OT_TEXT, **o}), 6_466_306),
    "ot_modelnet40": (
        _data("points", 40),
        lambda d, **o: ReferenceSetTransformer(d.num_classes, **{**_ISAB, **_OT_SET, **o}),
        823_440,
    ),
    "ot_mnist_digits": (
        _DIGITS,
        lambda d, **o: _image_vit(d, **{**_MNIST_VIT, "patch_size": 2, "dim": 64, **_OT_VIT, **o}),
        14_666,
    ),
    "ot_imdb_tweets": (
        _TWEETS_12K,
        lambda d, **o: _text(d, **{**_IMDB, **_TINY, "mlp_hidden": 256, **_OT_TEXT, **o}),
        572_867,
    ),
    "ot_modelnet40_shapes3d": (
        _data("points", 8),
        lambda d, **o: ReferenceSetTransformer(
            d.num_classes, **{**_ISAB, "num_heads": 2, "num_seeds": 8, "dropout": 0.0, **_OT_SET, "dim": 50, **o}
        ),
        57_408,
    ),
    "nanogpt_shakespeare_char": (_windows(65, 256), _lm_preset("nanogpt_shakespeare_char", "baseline"), 10_745_088),
    "ot_nanogpt_shakespeare_char": (_windows(65, 256), _lm_preset("ot_nanogpt_shakespeare_char", "ot"), 6_246_720),
    "ot_gpt2_openwebtext": (_windows(50304, 1024), _lm_preset("ot_gpt2_openwebtext", "ot"), 124_373_760),
    "nanogpt_tweets_char": (_windows(120, 64), _lm_preset("nanogpt_tweets_char", "baseline"), 350_112),
    "zhong_nanogpt_tweets_char": (_windows(120, 64), _lm_preset("zhong_nanogpt_tweets_char", "parallel"), 350_112),
    "ea_aa_resnet_digits": (_DIGITS, lambda d, **o: _resnet(d, **{**_RESNET_DIGITS, "evolving": True, **o}), 699_054),
    **{
        f"{'ea_' if evolving else ''}aa_resnet{depth}_imagenet": (
            _IMAGENET,
            lambda d, depth=depth, evolving=evolving, **o: _resnet(d, **{"depth": depth, "evolving": evolving, **o}),
            count,
        )
        for depth, counts in _TABLE_1.items()
        for evolving, count in zip((False, True), counts)
    },
}
"""The preset models as ``neuralode_tf.train.presets`` built them by constructor before the registry; the counts
are those models' on the placeholders (the real datasets' vocabularies and classes)."""


def _settings(module: nn.Module) -> dict[str, Any]:
    """A module's own configuration: its public attributes that hold no tensors and no submodules."""

    def plain(value: Any) -> bool:
        items = value if isinstance(value, (list, tuple)) else [value]
        return not any(isinstance(item, (Tensor, nn.Module)) for item in items)

    return {k: v for k, v in vars(module).items() if not k.startswith("_") and plain(v)}


def _assert_same_model(built: nn.Module, expected: nn.Module) -> None:
    assert type(built) is type(expected) and repr(built) == repr(expected)
    mine, theirs = built.state_dict(), expected.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    for (name, module), (_, other) in zip(built.named_modules(), expected.named_modules(), strict=True):
        assert _settings(module) == _settings(other), name


_FROM_CHECKPOINTS = {"ea_bert_tweets", "ea_bert_glue"}
"""Presets whose model is read from a saved checkpoint folder (``model.checkpoint``): tests/test_ea_bert_preset.py and
tests/test_glue.py."""


@pytest.mark.cpu_only("the presets' names, no tensors")
def test_every_preset_is_listed_here():
    assert set(_PRESET_MODELS) | _FROM_CHECKPOINTS == set(PRESETS)


@pytest.mark.cpu_only("builds each preset's model and variants twice, on placeholders of the datasets' shapes")
@pytest.mark.parametrize("preset", list(_PRESET_MODELS))
def test_presets_build_their_explicit_models(preset):
    data, explicit, count = _PRESET_MODELS[preset]
    for overrides in [{}, *VARIANTS.get(preset, {}).values()]:
        torch.manual_seed(0)
        built = PRESETS[preset].build_model(data, overrides)
        check_model_inputs(built, data.kind)
        torch.manual_seed(0)
        _assert_same_model(built, explicit(data, **overrides))
        if not overrides:
            assert sum(p.numel() for p in built.parameters()) == count


@pytest.mark.cpu_only("builds each OT preset's model twice, on placeholders of the datasets' shapes")
@pytest.mark.parametrize("preset", [p for p in _PRESET_MODELS if p.startswith("ot_") and "ot" in VARIANTS.get(p, {})])
def test_an_ot_presets_default_model_is_its_ot_variant(preset):
    """The registered model an OT preset builds by default and its ``ot`` variant of ``OT_VARIANTS`` (what
    ``compare`` runs) describe one model: they must not drift apart."""
    data = _PRESET_MODELS[preset][0]
    torch.manual_seed(0)
    default = PRESETS[preset].build_model(data, {})
    torch.manual_seed(0)
    _assert_same_model(default, PRESETS[preset].build_model(data, VARIANTS[preset]["ot"]))
