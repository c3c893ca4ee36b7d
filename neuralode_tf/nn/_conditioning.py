"""Checks of the conditioning attention takes besides the state: padding masks, contexts (``memory``), their shapes.

Each raises ``TypeError`` (a wrong kind of value) or ``ValueError`` (a wrong shape) with a message that names the
argument and says what is valid. None of them reads a tensor's values, so none synchronises with the device, except
:func:`warn_if_all_padding`, which is called once per batch, not per evaluation.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import torch
from torch import Tensor

__all__ = ["check_shape", "check_padding_mask", "check_context", "warn_if_all_padding"]

_REBIND = (
    ": bind() was called for a batch of another shape; bind this batch's conditioning "
    "(ContinuousDepth's forward does, from its keyword arguments)"
)


def check_shape(
    shape: Iterable[int], expected: Iterable[int], what: str, against: str, *, bound: bool = False, spec: str = ""
) -> None:
    """Raise ``ValueError`` unless ``shape == expected``, saying whether the batch dimensions (all but the last) differ.

    ``what`` names the checked argument, ``against`` where ``expected`` comes from, ``spec`` what ``what`` must
    be (default: of shape ``expected``); ``bound`` says the argument was bound earlier (``bind``), which is how a
    batch of another size usually gets there.
    """
    shape, expected = tuple(shape), tuple(expected)
    if shape == expected:
        return
    if len(shape) == len(expected) and shape[-1:] == expected[-1:]:
        raise ValueError(
            f"{what} has batch shape {shape[:-1]}, but {against} has batch shape {expected[:-1]}"
            + (_REBIND if bound else "")
        )
    spec = spec or f"of shape {expected} to match {against}"
    raise ValueError(f"{what} must be {spec}; got shape {shape}" + (_REBIND if bound else ""))


def check_padding_mask(mask: object, name: str, tokens: Iterable[int], against: str, *, bound: bool = False) -> None:
    """Raise unless ``mask`` is ``None`` or a bool tensor of shape ``tokens`` (``(*batch, n)``), True at padding.

    A non-tensor or non-bool mask raises ``TypeError``, a wrong shape ``ValueError``; the message names ``name``
    and gives the expected shape and dtype. Every attention kind checks its masks with it, at every evaluation
    (a few comparisons of shapes), so a mask bound for another batch is reported as such.
    """
    expected = tuple(tokens)
    if mask is None or (isinstance(mask, Tensor) and mask.dtype == torch.bool and tuple(mask.shape) == expected):
        return
    what = f"the bound {name}" if bound else name
    spec = f"a bool tensor of shape (*batch, n) = {expected} (from {against}), True at padding"
    if not isinstance(mask, Tensor):
        raise TypeError(f"{what} must be {spec}; got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{what} must be {spec}; got dtype {mask.dtype} (for a 0/1 mask pass mask.bool())")
    check_shape(mask.shape, expected, what, against, bound=bound, spec=spec)


def check_context(context: object, name: str, x: Tensor, *, bound: bool = False) -> None:
    """Raise unless ``context`` is a tensor ``(*batch, m, width)`` with the batch shape of ``x``, ``(*batch, n, d)``."""
    what = f"the bound {name}" if bound else name
    if not isinstance(context, Tensor):
        raise TypeError(f"{what} must be a tensor (*batch, m, width) of keys and values, got {type(context).__name__}")
    if context.ndim < 2:
        raise ValueError(
            f"{what} must be a tensor (*batch, m, width) of keys and values, got shape {tuple(context.shape)}"
        )
    if context.shape[:-2] != x.shape[:-2]:
        raise ValueError(
            f"{what} has batch shape {tuple(context.shape[:-2])}, but x has batch shape {tuple(x.shape[:-2])}"
            + (_REBIND if bound else "")
        )


def warn_if_all_padding(mask: Tensor | None, name: str) -> None:
    """Warn where a row of a padding mask is padding throughout: its queries may see no key, so their attention
    weights are all zero (``nn/_empty_rows.py``). It is well defined but rarely meant; the usual cause is a mask of
    the opposite convention (Hugging Face's ``attention_mask``, 1 at real tokens)."""
    if mask is None or mask.shape[-1] == 0:
        return
    rows = mask.all(dim=-1).flatten()
    if bool(rows.any()):
        which = rows.nonzero().flatten().tolist()
        warnings.warn(
            f"{len(which)} row(s) of {name} (index {which[:5]}{' ...' if len(which) > 5 else ''} of the flattened "
            f"batch) are padding throughout: no key is left to attend to, so their attention weights are zero. "
            f"{name} is True at padding; a Hugging Face attention_mask (1 at real tokens) becomes one as "
            f"~attention_mask.bool()",
            stacklevel=4,
        )
