"""The training setup: the model-input contract (``MODEL_INPUTS``) that the batches follow and :func:`build_setup`
checks before training, and the deprecated names ``Task`` and ``build_task``."""

from __future__ import annotations

import typing

import numpy as np
import pytest
import torch
from torch import nn
from torch_geometric.data import Data

import neuralode_tf.train
from neuralode_tf.data import MODEL_INPUTS, Kind, Splits, TensorSplit, TextSplit, TokenWindows
from neuralode_tf.train import ModelInputError, Setup, TrainConfig, build_setup, check_model_inputs, train
from neuralode_tf.train.config import PRESET_CONFIGS
from neuralode_tf.train.presets import PRESETS, register_preset


def _split(kind: str) -> typing.Any:
    """Three rows of a split of ``kind``."""
    y, ids, mask = torch.arange(3), torch.ones(3, 4, dtype=torch.long), torch.zeros(3, 4, dtype=torch.bool)
    return {
        "image": lambda: TensorSplit(x=torch.rand(3, 1, 4, 4), y=y),
        "signal": lambda: TensorSplit(x=torch.rand(3, 5), y=y),
        "tokens": lambda: TensorSplit(x=ids, mask=mask, y=y),
        "text": lambda: TextSplit(["a", "b", "c"], y),
        "points": lambda: [Data(pos=torch.rand(5, 3), y=torch.tensor([i])) for i in range(3)],
        "seq2seq": lambda: TensorSplit(src=ids, src_mask=mask, tgt=ids, tgt_mask=mask),
        "lm": lambda: TokenWindows(np.arange(20), block_size=4, vocab_size=20, windows=3),
    }[kind]()


@pytest.mark.cpu_only("the batches' keys, on tiny CPU splits")
def test_every_kind_has_its_inputs_and_every_batch_gives_exactly_them():
    assert set(MODEL_INPUTS) == set(typing.get_args(Kind))
    for kind, keywords in MODEL_INPUTS.items():
        split = _split(kind)
        setup = Setup(nn.Identity(), Splits("tiny", kind, split, split, "three rows"))
        inputs, _ = setup.batch(split, torch.arange(2), torch.device("cpu"))
        assert tuple(inputs) == keywords, kind
    with pytest.raises(TypeError):
        MODEL_INPUTS["image"] = ("x",)  # type: ignore[index]


class _Images(nn.Module):
    def forward(self, images):
        return images.flatten(1)


class _Anything(nn.Module):
    def forward(self, *args, **kwargs):
        return args, kwargs


class _TokensWithExtra(nn.Module):
    def forward(self, tokens, key_padding_mask=None, *, temperature):
        return tokens


class _PositionalOnly(nn.Module):
    def forward(self, images, /):
        return images


@pytest.mark.cpu_only("reads signatures, no tensors")
def test_check_model_inputs_accepts_the_contract_and_names_what_is_wrong():
    check_model_inputs(_Images(), "image")
    check_model_inputs(_Anything(), "seq2seq")
    with pytest.raises(ModelInputError, match=r"_Images.forward\(images\) does not take the keyword 'tokens'.*lm"):
        check_model_inputs(_Images(), "lm")
    with pytest.raises(ModelInputError, match="requires 'temperature', which no batch gives.*MODEL_INPUTS"):
        check_model_inputs(_TokensWithExtra(), "tokens")
    with pytest.raises(ModelInputError, match="does not take the keyword 'images'"):
        check_model_inputs(_PositionalOnly(), "image")
    with pytest.raises(ValueError, match="unknown dataset kind 'video'"):
        check_model_inputs(_Images(), "video")  # type: ignore[arg-type]


class _WrongKeyword(nn.Module):
    """A digits classifier whose forward takes ``x`` rather than ``images``."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.head(x.flatten(1))


@pytest.fixture
def wrong_keyword_preset():
    """A preset of digits whose model takes the wrong keyword, removed after the test."""
    register_preset("wrong_keyword_digits", "takes x=", "digits", lambda data, **o: _WrongKeyword(data.num_classes))
    yield "wrong_keyword_digits"
    PRESETS.pop("wrong_keyword_digits")
    PRESET_CONFIGS.pop("wrong_keyword_digits")


@pytest.mark.cpu_only("builds a preset from the digits stand-in")
def test_a_model_that_takes_the_wrong_keyword_is_refused_before_training(wrong_keyword_preset, tmp_path):
    expected = r"_WrongKeyword.forward\(x\) does not take the keyword 'images'.*'image' dataset.*MODEL_INPUTS"
    with pytest.raises(ModelInputError, match=expected):
        build_setup(TrainConfig(wrong_keyword_preset))
    with pytest.raises(ModelInputError, match=expected):
        train(TrainConfig(wrong_keyword_preset, out_dir=str(tmp_path / "run"), progress=False))
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


@pytest.mark.cpu_only("module attributes, no tensors")
def test_task_and_build_task_are_deprecated_names_of_setup_and_build_setup():
    with pytest.warns(DeprecationWarning, match="the neuralode_tf.train name 'Task' is now called 'Setup'"):
        assert neuralode_tf.train.Task is Setup
    with pytest.warns(DeprecationWarning, match="the neuralode_tf.train name 'build_task' is now called 'build_setup'"):
        from neuralode_tf.train import build_task
    assert build_task is build_setup
    assert "Task" not in neuralode_tf.train.__all__ and "Task" not in dir(neuralode_tf.train)
    with pytest.raises(AttributeError, match="has no attribute 'Tusk'"):
        _ = neuralode_tf.train.Tusk


@pytest.mark.cpu_only("command-line usage on the CPU")
def test_the_command_line_reports_a_model_that_cannot_take_its_data_as_a_usage_error(
    wrong_keyword_preset, tmp_path, capsys
):
    from neuralode_tf.train.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["train", wrong_keyword_preset, "--out-dir", str(tmp_path / "run"), "--set", "max_steps=1"])
    assert exit_.value.code == 2
    assert "_WrongKeyword.forward(x) does not take the keyword 'images'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
