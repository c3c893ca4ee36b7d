"""Checks of what the language front-ends are given: integer token ids inside the vocabulary, and sampling in
eval mode.

The id check reads the ids' values, so it synchronises with the device: it makes one reduction over the ids and
one read of its two numbers per call, and each front-end calls it once per forward, on the ids it embeds.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

__all__ = ["check_token_ids", "warn_if_dropout_samples"]


def check_token_ids(tokens: object, name: str, vocab_size: int | None = None) -> None:
    """Raise unless ``tokens`` is an integer tensor of token ids, and (given ``vocab_size``) every id lies in
    ``[0, vocab_size)``.

    A non-tensor, or a float, complex or bool tensor, raises ``TypeError``. An id out of range raises ``ValueError``
    naming ``name``, the first such id, its position (batch index, token index for ``(B, n)`` ids), how many ids are
    out of range and ``vocab_size``, where the embedding lookup would raise a bare ``IndexError`` (on a GPU, a
    device-side assert). Without ``vocab_size`` nothing reads the values. With it, one ``aminmax`` reduction and one
    read of its result; the position is looked up only when an id is out of range.
    """
    if (
        not isinstance(tokens, Tensor)
        or tokens.is_floating_point()
        or tokens.is_complex()
        or tokens.dtype == torch.bool
    ):
        raise TypeError(f"{name} must be a tensor of integer token ids, got {getattr(tokens, 'dtype', type(tokens))}")
    if vocab_size is None or not tokens.numel():
        return
    low, high = torch.stack(torch.aminmax(tokens)).tolist()
    if low >= 0 and high < vocab_size:
        return
    outside = (tokens < 0) | (tokens >= vocab_size)
    position = tuple(outside.nonzero()[0].tolist())
    where = f"(batch {position[0]}, token {position[1]})" if len(position) == 2 else f"index {position}"
    count = int(outside.sum())
    more = f" ({count} ids are out of range)" if count > 1 else ""
    raise ValueError(
        f"{name} holds token id {int(tokens[position])} at {where}, outside the vocabulary [0, {vocab_size}) "
        f"(vocab_size={vocab_size}){more}"
    )


def warn_if_dropout_samples(model: nn.Module, what: str, *, stacklevel: int = 3) -> None:
    """Warn (``UserWarning``) if ``what`` (e.g. ``"generate()"``) runs ``model`` with dropout: some submodule in
    training mode is an ``nn.Dropout`` with ``p > 0`` or has a float ``dropout`` probability ``> 0`` (the library's
    branches and the converted Hugging Face attention). Reads no tensor. ``stacklevel`` as ``warnings.warn`` counts
    it from here: 3, the default, points at the caller of the method that calls this."""
    for module in model.modules():
        rate = module.p if isinstance(module, nn.Dropout) else getattr(module, "dropout", None)
        if module.training and isinstance(rate, (int, float)) and rate > 0:
            warnings.warn(
                f"{what} runs {type(model).__name__} in training mode, which samples dropout "
                f"({type(module).__name__} with p={rate}) at every step: call model.eval() before generating",
                UserWarning,
                stacklevel=stacklevel,
            )
            return
