"""Containers: :class:`TensorSplit` (one split of named tensors) and :class:`Splits` (a dataset's train and test)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from .vocab import Vocabulary
from .windows import TokenWindows

__all__ = ["TensorSplit", "Splits", "Kind"]

Kind = Literal["image", "signal", "tokens", "points", "seq2seq", "lm"]
"""What a split holds, and so which front-end takes it:

* ``"image"``: ``x`` float ``(N, C, H, W)`` in ``[0, 1]``, ``y`` long ``(N,)``.
* ``"signal"``: ``x`` float ``(N, L)``, ``y`` long ``(N,)``.
* ``"tokens"``: ``x`` long ``(N, L)`` token ids, ``mask`` bool ``(N, L)`` True at padding, ``y`` long ``(N,)``.
* ``"points"``: a list of ``torch_geometric.data.Data(pos=(n_i, 3), y=(1,))`` with varying ``n_i``.
* ``"seq2seq"``: ``src``/``tgt`` long ``(N, L)`` and ``src_mask``/``tgt_mask`` bool ``(N, L)`` True at padding;
  ``tgt`` starts with ``<bos>`` and both end with ``<eos>``.
* ``"lm"``: :class:`~neuralode_tf.data.windows.TokenWindows`, windows of ``block_size + 1`` tokens of one token
  sequence; a window's first ``block_size`` tokens are the input and its last ``block_size`` the targets (``test``
  holds the validation text).
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


@dataclass(frozen=True, repr=False)
class Splits:
    """A dataset's train and test splits with what a model needs to know about them.

    Attributes:
        name: Registry name of the dataset (see :data:`neuralode_tf.data.DATASETS`).
        kind: What the splits hold; see :data:`Kind`.
        train, test: :class:`TensorSplit` objects, lists of ``torch_geometric.data.Data`` for ``"points"``, or
            :class:`~neuralode_tf.data.windows.TokenWindows` for ``"lm"``.
        description: Where the data comes from and its size, in one line.
        classes: Class names in label order (``None`` for ``"seq2seq"`` and ``"lm"``).
        vocab: The token vocabulary of ``"tokens"``, ``"seq2seq"`` and character ``"lm"`` datasets.
    """

    name: str
    kind: Kind
    train: TensorSplit | TokenWindows | Sequence[Any]
    test: TensorSplit | TokenWindows | Sequence[Any]
    description: str
    classes: tuple[str, ...] | None = None
    vocab: Vocabulary | None = None

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
