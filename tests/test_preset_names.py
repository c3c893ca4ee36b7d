"""One name per run: a preset is called ``<model>_<dataset>``, and its former names still work, with a warning."""

from __future__ import annotations

import functools
import warnings

import pytest

from neuralode_tf.models import create_model, list_models, model_config
from neuralode_tf.models.registry import RENAMED_MODELS
from neuralode_tf.train import PRESETS, VARIANTS, TrainConfig
from neuralode_tf.train.cli import main
from neuralode_tf.train.config import RENAMED_PRESETS
from neuralode_tf.train.presets import OT_VARIANTS

pytestmark = pytest.mark.cpu_only("names and configurations: no tensors")

_STORAGE = ("_h5", "_raw")
"""Suffixes of a dataset's name that say how it is stored (``modelnet40_h5``, ``tweets_raw``), not what it is."""

_BUILT_BY_FUNCTIONS = {
    "transevolve_listops",
    "transevolve_reverse",
    "ea_seq2seq_reverse",
    "zhong_seq2seq_reverse",
    "ea_bert_tweets",
    "ea_bert_glue",
}
"""The presets whose model no registered name builds (a builder function of their family module)."""


_COMPARISON = "zhong_"
"""The prefix of Zhong et al.'s sequential-against-parallel comparisons, before the model's name."""


def _dataset_word(dataset: str) -> str:
    return next((dataset.removesuffix(s) for s in _STORAGE if dataset.endswith(s)), dataset)


def _registered_model(preset) -> str | None:
    """The registered model a preset builds: ``registered(name, shape)``, or a language model's variant table."""
    builder = preset.model
    if not isinstance(builder, functools.partial) or not builder.args:
        return None
    first = builder.args[0]
    if isinstance(first, str):
        return first
    if isinstance(first, dict) and "variant" in builder.keywords:
        return first[builder.keywords["variant"]][0]
    return None


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_is_named_after_its_model_and_its_dataset(name):
    preset = PRESETS[name]
    dataset = _dataset_word(preset.dataset)
    assert name.endswith("_" + dataset), f"{name!r} does not end in its dataset {dataset!r}"
    model_word = name.removesuffix("_" + dataset).removeprefix(_COMPARISON)
    registered = _registered_model(preset)
    if registered is None:
        assert name in _BUILT_BY_FUNCTIONS, f"{name!r} builds no registered model: list it or register one"
        return
    assert name not in _BUILT_BY_FUNCTIONS
    assert registered in list_models()
    assert registered == model_word or registered.startswith(model_word + "_"), (name, registered)


def test_a_stand_in_model_named_after_its_dataset_is_its_presets_name():
    for name, preset in PRESETS.items():
        registered = _registered_model(preset)
        if registered is not None and registered.endswith("_" + _dataset_word(preset.dataset)):
            assert registered.startswith(name.removesuffix("_" + _dataset_word(preset.dataset)))


def test_former_preset_names_run_their_preset_with_a_deprecation_warning():
    assert set(RENAMED_PRESETS.values()) <= set(PRESETS)
    assert not set(RENAMED_PRESETS) & set(PRESETS)
    for old, new in RENAMED_PRESETS.items():
        with pytest.warns(DeprecationWarning, match=f"'{old}' is now called '{new}'"):
            config = TrainConfig(old, epochs=1)
        assert config == TrainConfig(new, epochs=1)
        assert config.out_dir == f"runs/{new}"
        with pytest.warns(DeprecationWarning, match=new):
            assert PRESETS[old] is PRESETS[new]
    with pytest.warns(DeprecationWarning):
        assert VARIANTS["ot_mnist_vit"] is VARIANTS["ot_mnist_digits"]
    with pytest.warns(DeprecationWarning):
        assert PRESETS.get("ot_mnist_vit") is PRESETS["ot_mnist_digits"]  # not None: the name is still accepted
    assert PRESETS.get("no_such_preset") is None
    with pytest.warns(DeprecationWarning):
        assert OT_VARIANTS["ot_mnist_vit"] is OT_VARIANTS["ot_mnist_digits"]
    assert "ot_mnist_vit" not in PRESETS and "ot_mnist_vit" not in list(VARIANTS)  # listings show the new names
    with pytest.raises(KeyError):
        PRESETS["no_such_preset"]


def test_current_names_warn_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in PRESETS:
            TrainConfig(name)


def test_the_command_line_warns_of_a_former_name_and_runs_it(capsys):
    with pytest.warns(DeprecationWarning, match="'set_shapes3d' is now called 'set_transformer_shapes3d'"):
        assert main(["train", "set_shapes3d", "--describe"]) == 0
    assert "set_transformer_shapes3d" in capsys.readouterr().out
    renamed = pytest.warns(DeprecationWarning, match="'ea_digits_vit' is now called 'ea_vit_digits'")
    with renamed, pytest.raises(SystemExit):
        main(["compare", "ea_digits_vit", "--variants", "no_such_variant"])


def test_compare_accepts_a_former_name_and_refuses_a_preset_without_variants(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "vit_digits", "--seeds", "0"])
    assert "'vit_digits' has no variants; choose from" in capsys.readouterr().err


def test_former_model_names_build_the_model_with_a_deprecation_warning():
    assert not set(RENAMED_MODELS) & set(list_models())
    for old, new in RENAMED_MODELS.items():
        with pytest.warns(DeprecationWarning, match=f"'{old}' is now called '{new}'"):
            assert model_config(old) == model_config(new)
        with pytest.warns(DeprecationWarning, match=new):
            assert type(create_model(old)) is type(create_model(new))
