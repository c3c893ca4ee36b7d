"""Language-modelling splits: a 1-D token sequence cut into windows of ``block_size + 1`` tokens."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from .errors import DatasetFormatError

__all__ = ["TokenWindows"]


class TokenWindows(torch.utils.data.Dataset):
    """Windows of ``block_size + 1`` consecutive tokens of one token sequence, nanoGPT's ``get_batch``: a window
    ``w`` is a model's input ``w[:-1]`` and its targets ``w[1:]``, the next token at each of the ``block_size``
    positions.

    Two ways to cut the sequence:

    * ``windows=N`` (training): an epoch is ``N`` windows at random starts, uniform over ``0 .. L - block_size - 1``
      (nanoGPT's ``torch.randint(len(data) - block_size, ...)``, with replacement), drawn by a generator seeded
      with ``seed`` and the epoch: the windows of epoch ``e`` are a function of ``(seed, e)`` and differ from one
      epoch to the next. :meth:`windows` takes the epoch; the training loop passes it.
    * ``windows=None`` (validation): the sequence tiled by windows starting at ``0, b, 2b, ...`` (``b`` the block
      size), which overlap by one token, so every token but the first is a target exactly once; the last
      ``(L - 1) % b`` tokens, which fill no whole window, are left out. The epoch is ignored.

    Args:
        tokens: The token ids, a 1-D integer array; a ``numpy.memmap`` is read window by window.
        block_size: Tokens a model reads per window.
        vocab_size: Number of token ids; the ids lie in ``[0, vocab_size)``.
        windows: Windows per epoch (training), or ``None`` to tile the sequence (validation).
        seed: Seeds the random starts.

    Raises:
        DatasetFormatError: ``tokens`` is not 1-D or holds fewer than ``block_size + 1`` tokens.
        ValueError: ``block_size``, ``vocab_size`` or ``windows`` is not positive.
    """

    def __init__(
        self, tokens: np.ndarray, block_size: int, vocab_size: int, *, windows: int | None = None, seed: int = 0
    ):
        for name, value in (
            ("block_size", block_size),
            ("vocab_size", vocab_size),
            ("windows", 1 if windows is None else windows),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if tokens.ndim != 1 or len(tokens) < block_size + 1:
            raise DatasetFormatError(
                f"need a 1-D sequence of at least block_size + 1 = {block_size + 1} tokens, got shape {tokens.shape}"
            )
        self.tokens, self.block_size, self.vocab_size = tokens, block_size, vocab_size
        self.random, self.seed = windows is not None, seed
        self._length = windows if windows is not None else (len(tokens) - 1) // block_size
        self._drawn: tuple[int, Tensor] | None = None  # (epoch, its starts): the last epoch's, drawn once

    def __len__(self) -> int:
        """Windows per epoch."""
        return self._length

    def starts(self, rows: Tensor, epoch: int = 0) -> Tensor:
        """The first token's position of windows ``rows`` of ``epoch``."""
        if not self.random:
            return rows.long() * self.block_size
        if self._drawn is None or self._drawn[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            high = len(self.tokens) - self.block_size
            self._drawn = epoch, torch.randint(high, (self._length,), generator=generator)
        return self._drawn[1][rows]

    def windows(self, rows: Tensor, epoch: int = 0) -> Tensor:
        """The windows ``rows`` of ``epoch``, long ``(len(rows), block_size + 1)``."""
        offsets = self.starts(rows, epoch).numpy()[:, None] + np.arange(self.block_size + 1)
        return torch.from_numpy(np.asarray(self.tokens[offsets], dtype=np.int64))

    def __getitem__(self, index: Any) -> Tensor:
        """Window(s) ``index`` of epoch 0: ``(block_size + 1,)`` for an int, ``(k, block_size + 1)`` otherwise."""
        rows = torch.as_tensor(index).reshape(-1)
        found = self.windows(rows)
        return found[0] if isinstance(index, int) else found

    def __repr__(self) -> str:
        cut = f"{self._length} random windows per epoch" if self.random else f"{self._length} tiled windows"
        return f"TokenWindows({len(self.tokens)} tokens, block_size={self.block_size}, {cut})"
