"""Setups: a model, a dataset's splits, and how to turn rows of a split into model inputs and targets.

A :class:`Setup` is what a preset hands the training loop. (A *task* is the problem a dataset poses: GLUE's tasks,
the seq2seq toy tasks.) The model is called with the keywords of
:data:`~neuralode_tf.data.MODEL_INPUTS` for the dataset's :data:`~neuralode_tf.data.Kind`, which
:func:`build_setup` checks before anything trains (:func:`check_model_inputs`):

* ``image``: ``model(images=x)``; ``signal``: ``model(signal=x)``;
* ``tokens``: ``model(tokens=x, key_padding_mask=mask)``;
* ``text``: ``model(texts=[...])``, a list of strings or of pairs of strings, which the model tokenises; targets
  are class ids, or float scores for a regression (STS-B), whose loss is the mean squared error of the model's
  single output, as Hugging Face's sequence classifiers with one label compute it;
* ``points``: ``model(points=torch_geometric.data.Batch)``;
* ``seq2seq``: ``model(src=..., tgt_in=..., src_key_padding_mask=..., tgt_key_padding_mask=...)`` with teacher
  forcing; the targets are the next tokens, and padding is ignored by the loss and the accuracy.
* ``lm``: ``model(tokens=w[:, :-1])`` for windows ``w`` of ``block_size + 1`` tokens, targets ``w[:, 1:]`` of shape
  ``(B, block_size)`` (nanoGPT's ``get_batch``): the loss is the mean next-token cross-entropy and the accuracy the
  share of next tokens predicted, over every position. A training window depends on the epoch
  (:class:`~neuralode_tf.data.TokenWindows`), which the loop passes to :meth:`Setup.batch`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data import MODEL_INPUTS, Kind, Splits
from .config import TrainConfig

__all__ = ["Setup", "build_setup", "check_model_inputs", "ModelInputError"]

_IGNORE = -100


class ModelInputError(TypeError):
    """A model's ``forward`` does not take the inputs of its dataset's kind: the keywords of
    :data:`~neuralode_tf.data.MODEL_INPUTS`."""


@dataclass
class Setup:
    """What the training loop needs to know about a preset: its model, its dataset's splits, and how a batch of a
    split becomes the model's inputs (:meth:`batch`) and how its outputs are scored (:meth:`loss`,
    :meth:`accuracy`)."""

    model: nn.Module
    data: Splits

    @property
    def train(self) -> Any:
        return self.data.train

    @property
    def test(self) -> Any:
        return self.data.test

    def batch(self, split: Any, rows: Tensor, device: torch.device, epoch: int = 0) -> tuple[dict[str, Any], Tensor]:
        """Model inputs and targets of ``split[rows]``, on ``device``; ``epoch`` picks a language model's training
        windows (other splits' rows do not depend on it)."""
        if self.data.kind == "lm":
            return _windows(split, rows, device, epoch)
        return _BATCHERS[self.data.kind](split, rows, device)

    @property
    def regression(self) -> bool:
        """Whether the targets are float scores (GLUE's STS-B) rather than class ids."""
        y = getattr(self.data.train, "y", None)
        return isinstance(y, Tensor) and y.is_floating_point()

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        if self.regression:
            return F.mse_loss(logits.squeeze(-1), target.to(logits.dtype))
        return F.cross_entropy(logits.flatten(0, -2), target.flatten(), ignore_index=_IGNORE)

    def predictions(self, logits: Tensor) -> Tensor:
        """The predicted class ids, or the predicted scores of a regression."""
        return logits.squeeze(-1) if self.regression else logits.argmax(-1)

    def accuracy(self, logits: Tensor, target: Tensor) -> float:
        """Fraction of correct predictions (tokens for seq2seq), ignoring padding; NaN for a regression."""
        if self.regression:
            return math.nan
        counted = target != _IGNORE
        correct = (self.predictions(logits) == target) & counted
        return correct.sum().item() / max(1, counted.sum().item())

    def count(self, target: Tensor) -> int:
        return int((target != _IGNORE).sum())


def build_setup(config: TrainConfig) -> Setup:
    """The setup of ``config.preset`` with its model and data overrides.

    Raises:
        ModelInputError: the preset's model does not take its dataset's inputs (:func:`check_model_inputs`).
    """
    from .presets import PRESETS

    preset = PRESETS[config.preset]
    data = preset.load_data(config.data)
    model = preset.build_model(data, config.model)
    check_model_inputs(model, data.kind)
    return Setup(model=model, data=data)


def check_model_inputs(model: nn.Module, kind: Kind) -> None:
    """Check that ``model.forward`` can be called with the keywords of :data:`~neuralode_tf.data.MODEL_INPUTS`
    for datasets of ``kind``: each is a parameter it takes by keyword (or it takes ``**kwargs``), and it requires
    no other. A ``forward`` whose signature :mod:`inspect` cannot read is not checked.

    Raises:
        ModelInputError: a keyword it does not take, or a parameter it requires that the batches do not give, named
            with the model's class, the kind and the contract.
        ValueError: ``kind`` is not a :data:`~neuralode_tf.data.Kind`.
    """
    if kind not in MODEL_INPUTS:
        raise ValueError(f"unknown dataset kind {kind!r}; the kinds are {list(MODEL_INPUTS)}")
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # a forward written in C, without a signature
        return
    parameters = list(signature.parameters.values())
    keywords = MODEL_INPUTS[kind]
    by_keyword = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    any_keyword = any(p.kind is p.VAR_KEYWORD for p in parameters)
    missing = [name for name in keywords if name not in by_keyword and not any_keyword]
    required = [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in keywords
    ]
    if missing or required:
        problem = (
            f"does not take the keyword {', '.join(map(repr, missing))}"
            if missing
            else f"requires {', '.join(map(repr, required))}, which no batch gives"
        )
        call = ", ".join(f"{name}=..." for name in keywords)
        raise ModelInputError(
            f"{type(model).__name__}.forward{signature} {problem}: the training loop calls a model of a {kind!r} "
            f"dataset as model({call}) (the contract neuralode_tf.data.MODEL_INPUTS: {dict(MODEL_INPUTS)})"
        )


def _classification(name: str) -> Callable[[Any, Tensor, torch.device], tuple[dict[str, Any], Tensor]]:
    def batch(split: Any, rows: Tensor, device: torch.device) -> tuple[dict[str, Any], Tensor]:
        return {name: split.x[rows].to(device)}, split.y[rows].to(device)

    return batch


def _tokens(split: Any, rows: Tensor, device: torch.device) -> tuple[dict[str, Any], Tensor]:
    mask = split.mask[rows]
    length = int((~mask).sum(-1).max())  # trim the padding no sequence of this batch needs
    inputs = {"tokens": split.x[rows, :length].to(device), "key_padding_mask": mask[:, :length].to(device)}
    return inputs, split.y[rows].to(device)


def _texts(split: Any, rows: Tensor, device: torch.device) -> tuple[dict[str, Any], Tensor]:
    return {"texts": [split.texts[i] for i in rows.tolist()]}, split.y[rows].to(device)


def _points(split: Any, rows: Tensor, device: torch.device) -> tuple[dict[str, Any], Tensor]:
    from torch_geometric.data import Batch

    batch = Batch.from_data_list([split[i] for i in rows.tolist()]).to(device)
    return {"points": batch}, batch.y.reshape(-1)


def _seq2seq(split: Any, rows: Tensor, device: torch.device) -> tuple[dict[str, Any], Tensor]:
    src, src_mask, tgt, tgt_mask = (t[rows].to(device) for t in (split.src, split.src_mask, split.tgt, split.tgt_mask))
    inputs = {
        "src": src,
        "tgt_in": tgt[:, :-1],
        "src_key_padding_mask": src_mask,
        "tgt_key_padding_mask": tgt_mask[:, :-1],
    }
    return inputs, tgt[:, 1:].masked_fill(tgt_mask[:, 1:], _IGNORE)


def _windows(split: Any, rows: Tensor, device: torch.device, epoch: int) -> tuple[dict[str, Any], Tensor]:
    window = split.windows(rows, epoch).to(device)
    return {"tokens": window[:, :-1]}, window[:, 1:]


_BATCHERS = {
    "image": _classification(*MODEL_INPUTS["image"]),
    "signal": _classification(*MODEL_INPUTS["signal"]),
    "tokens": _tokens,
    "text": _texts,
    "points": _points,
    "seq2seq": _seq2seq,
}
