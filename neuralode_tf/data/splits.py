"""Containers: :class:`TensorSplit` (one split of named tensors), :class:`TextSplit` (texts and their targets) and
:class:`Splits` (a dataset's train and test)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import torch
from torch import Tensor

from .vocab import Vocabulary
from .windows import TokenWindows

__all__ = ["TensorSplit", "TextSplit", "Splits", "Kind", "MODEL_INPUTS"]

Kind = Literal["image", "signal", "tokens", "text", "points", "seq2seq", "lm"]
"""What a split holds, and so which front-end takes it:

* ``"image"``: ``x`` float ``(N, C, H, W)`` in ``[0, 1]``, ``y`` long ``(N,)``.
* ``"signal"``: ``x`` float ``(N, L)``, ``y`` long ``(N,)``.
* ``"tokens"``: ``x`` long ``(N, L)`` token ids, ``mask`` bool ``(N, L)`` True at padding, ``y`` long ``(N,)``.
* ``"text"``: a :class:`TextSplit`: ``texts``, strings or pairs of strings, for a model that tokenises them itself
  (a pretrained checkpoint with its tokenizer), and ``y``: long ``(N,)`` class ids, or float ``(N,)`` targets of
  a regression (``classes`` is then ``None``).
* ``"points"``: a list of ``torch_geometric.data.Data(pos=(n_i, 3), y=(1,))`` with varying ``n_i``.
* ``"seq2seq"``: ``src``/``tgt`` long ``(N, L)`` and ``src_mask``/``tgt_mask`` bool ``(N, L)`` True at padding;
  ``tgt`` starts with ``<bos>`` and both end with ``<eos>``.
* ``"lm"``: :class:`~neuralode_tf.data.windows.TokenWindows`, windows of ``block_size + 1`` tokens of one token
  sequence; a window's first ``block_size`` tokens are the input and its last ``block_size`` the targets (``test``
  holds the validation text).

:data:`MODEL_INPUTS` names the keywords a model of each kind is called with.
"""

MODEL_INPUTS: Mapping[Kind, tuple[str, ...]] = MappingProxyType(
    {
        "image": ("images",),
        "signal": ("signal",),
        "tokens": ("tokens", "key_padding_mask"),
        "text": ("texts",),
        "points": ("points",),
        "seq2seq": ("src", "tgt_in", "src_key_padding_mask", "tgt_key_padding_mask"),
        "lm": ("tokens",),
    }
)
"""The model-input contract: the keywords the training loop calls a model with, by the dataset's :data:`Kind`
(read-only). A batch of a ``"tokens"`` dataset is ``model(tokens=..., key_padding_mask=...)``, and so on:

* ``images``: float ``(B, C, H, W)``; ``signal``: float ``(B, L)``;
* ``tokens``: long ``(B, L)`` token ids, with ``key_padding_mask`` bool ``(B, L)`` True at padding (trimmed to the
  batch's longest sequence); for ``"lm"``, the first ``block_size`` tokens of each window, and no mask;
* ``texts``: a list of strings or of pairs of strings, which the model tokenises;
* ``points``: a ``torch_geometric.data.Batch`` of the batch's point clouds;
* ``src``, ``tgt_in``, ``src_key_padding_mask``, ``tgt_key_padding_mask``: the source, the target without its last
  token (teacher forcing), and their padding masks.

A model's ``forward`` must accept these keywords (other parameters need defaults):
:func:`neuralode_tf.train.check_model_inputs` checks it when a preset builds its model, before training starts.
"""


class TensorSplit(torch.utils.data.Dataset):
    """Named tensors that share their first dimension; item ``i`` is the dict of their ``i``-th rows.

    The tensors are also attributes (``split.x``, ``split.y``), and
    ``torch.utils.data.DataLoader(split, batch_size=...)`` yields dicts of batched tensors.
    """

    def __init__(self, **tensors: Tensor):
        sizes = {name: len(t) for name, t in tensors.items()}
        if not tensors or len(set(sizes.values())) > 1:
            raise ValueError(f"TensorSplit needs tensors with one common first dimension, got sizes {sizes}")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(next(iter(self.tensors.values())))

    def __getitem__(self, index: Any) -> dict[str, Tensor]:
        return {name: t[index] for name, t in self.tensors.items()}

    def __getattr__(self, name: str) -> Tensor:
        tensors = self.__dict__.get("tensors", {})  # absent while unpickling
        if name in tensors:
            return tensors[name]
        raise AttributeError(f"TensorSplit has no tensor {name!r}; it has {list(tensors)}")

    def __repr__(self) -> str:
        shapes = ", ".join(f"{name}={tuple(t.shape)}" for name, t in self.tensors.items())
        return f"TensorSplit({shapes})"


Text = str | tuple[str, str]
"""One example of a :class:`TextSplit`: a text, or a pair of texts (a sentence pair of GLUE's MRPC, MNLI, ...)."""


class TextSplit(torch.utils.data.Dataset):
    """Texts (or pairs of texts) and their targets ``y``; item ``i`` is ``(texts[i], y[i])``.

    Args:
        texts: The examples, each a string or a pair of strings.
        y: One target per example: long class ids, or floats for a regression.

    Raises:
        ValueError: ``texts`` and ``y`` differ in length, or an example is neither a string nor a pair of them.
    """

    def __init__(self, texts: Sequence[Text], y: Tensor):
        if len(texts) != len(y):
            raise ValueError(f"TextSplit needs one target per text, got {len(texts)} texts and {len(y)} targets")
        bad = next((t for t in texts if not _is_text(t)), None)
        if bad is not None:
            raise ValueError(f"TextSplit's texts are strings or pairs of strings, got {bad!r}")
        self.texts = list(texts)
        self.y = y

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int) -> tuple[Text, Tensor]:
        return self.texts[index], self.y[index]

    @property
    def pairs(self) -> bool:
        """Whether the examples are pairs of texts (an empty split has none)."""
        return bool(self.texts) and isinstance(self.texts[0], tuple)

    def __repr__(self) -> str:
        return f"TextSplit({len(self)} {'pairs' if self.pairs else 'texts'}, y={tuple(self.y.shape)})"


def _is_text(example: Any) -> bool:
    return isinstance(example, str) or (
        isinstance(example, tuple) and len(example) == 2 and all(isinstance(t, str) for t in example)
    )


@dataclass(frozen=True, repr=False)
class Splits:
    """A dataset's train and test splits with what a model needs to know about them.

    Attributes:
        name: Registry name of the dataset (see :data:`neuralode_tf.data.DATASETS`).
        kind: What the splits hold; see :data:`Kind`.
        train, test: :class:`TensorSplit` objects, :class:`TextSplit` objects for ``"text"``, lists of
            ``torch_geometric.data.Data`` for ``"points"``, or
            :class:`~neuralode_tf.data.windows.TokenWindows` for ``"lm"``.
        description: Where the data comes from and its size, in one line.
        classes: Class names in label order (``None`` for ``"seq2seq"``, ``"lm"`` and a regression).
        vocab: The token vocabulary of ``"tokens"``, ``"seq2seq"`` and character ``"lm"`` datasets.
        metrics: The scores the test split is judged by, the main one first, named as in
            :data:`~neuralode_tf.train.METRICS`: ``("accuracy",)`` for most datasets, ``("matthews",)`` for GLUE's
            CoLA, ``("f1", "accuracy")`` for MRPC. The training loop reports each as ``test_<name>``, and
            ``test_accuracy`` for every classification.
    """

    name: str
    kind: Kind
    train: TensorSplit | TextSplit | TokenWindows | Sequence[Any]
    test: TensorSplit | TextSplit | TokenWindows | Sequence[Any]
    description: str
    classes: tuple[str, ...] | None = None
    vocab: Vocabulary | None = None
    metrics: tuple[str, ...] = ("accuracy",)

    @property
    def num_classes(self) -> int | None:
        """Number of classes, ``None`` without labels."""
        return None if self.classes is None else len(self.classes)

    def __repr__(self) -> str:
        extra = "" if self.vocab is None else f", vocab={len(self.vocab)}"
        return (
            f"Splits({self.name!r}, kind={self.kind!r}, train={len(self.train)}, test={len(self.test)}, "
            f"num_classes={self.num_classes}{extra})"
        )
