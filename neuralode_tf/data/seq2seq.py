"""Sequence-to-sequence toy tasks for encoder-decoder models: copy, reverse, sort and addition."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .splits import Splits, TensorSplit
from .vocab import Vocabulary, pad_sequences

__all__ = ["seq2seq", "TASKS", "BOS", "EOS"]

BOS, EOS = 2, 3
"""Ids of ``<bos>`` and ``<eos>`` in every seq2seq vocabulary (``<pad>`` is 0, ``<unk>`` 1)."""

_SPECIALS = ("<bos>", "<eos>")


def _addition_source(generator: torch.Generator, length: int) -> list[str]:
    """Two numbers of ``length`` digits each (no leading zeros), as ``digits + digits``."""
    numbers = []
    for _ in range(2):
        first = torch.randint(1 if length > 1 else 0, 10, (1,), generator=generator)
        rest = torch.randint(0, 10, (length - 1,), generator=generator)
        numbers.append([str(d) for d in torch.cat([first, rest]).tolist()])
    return [*numbers[0], "+", *numbers[1]]


def _add(source: list[str]) -> list[str]:
    plus = source.index("+")
    return list(str(int("".join(source[:plus])) + int("".join(source[plus + 1 :]))))


_TARGETS: dict[str, Callable[[list[str]], list[str]]] = {
    "copy": list,
    "reverse": lambda source: source[::-1],
    "sort": lambda source: sorted(source, key=int),
    "addition": _add,
}

TASKS = tuple(_TARGETS)
"""Task names of :func:`seq2seq`."""


def seq2seq(
    task: str,
    *,
    num_train: int = 2000,
    num_test: int = 500,
    min_length: int = 1,
    max_length: int = 10,
    num_symbols: int = 10,
    seed: int = 0,
) -> Splits:
    """Random source sequences and their targets under ``task``.

    * ``"copy"``, ``"reverse"``, ``"sort"``: sources of ``min_length`` to ``max_length`` symbols
      ``"0"`` .. ``str(num_symbols - 1)``; the target is the source, reversed, or sorted by value.
    * ``"addition"``: the source is ``a + b`` with two numbers of ``min_length`` to ``max_length``
      digits (both the same length), the target the digits of ``a + b``; ``num_symbols`` is not used.

    Sources end with ``<eos>``; targets start with ``<bos>`` and end with ``<eos>``, so a decoder reads
    ``tgt[:, :-1]`` and predicts ``tgt[:, 1:]``.

    Args:
        task: One of :data:`TASKS`.
        num_train, num_test: Number of pairs per split (pairs may repeat, also across splits).
        min_length, max_length: Inclusive length range of the source (of each number for addition).
        num_symbols: Alphabet size of copy, reverse and sort.
        seed: Seed of the generator.

    Returns:
        ``"seq2seq"`` splits with ``src``, ``src_mask``, ``tgt``, ``tgt_mask`` (masks True at padding),
        padded to the longest possible source and target.
    """
    if task not in _TARGETS:
        raise ValueError(f"unknown seq2seq task {task!r}; choose from {TASKS}")
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length} and {max_length}")
    addition = task == "addition"
    symbols = [*(str(d) for d in range(10)), "+"] if addition else [str(s) for s in range(num_symbols)]
    vocab = Vocabulary(symbols, specials=_SPECIALS)
    generator = torch.Generator().manual_seed(seed)
    sources, targets = [], []
    for _ in range(num_train + num_test):
        length = int(torch.randint(min_length, max_length + 1, (1,), generator=generator))
        if addition:
            source = _addition_source(generator, length)
        else:
            source = [symbols[i] for i in torch.randint(0, num_symbols, (length,), generator=generator).tolist()]
        sources.append([*vocab.encode(source), EOS])
        targets.append([BOS, *vocab.encode(_TARGETS[task](source)), EOS])
    src, src_mask = pad_sequences(sources, 2 * max_length + 2 if addition else max_length + 1)
    tgt, tgt_mask = pad_sequences(targets, max_length + 3 if addition else max_length + 2)
    halves = [slice(0, num_train), slice(num_train, None)]
    train, test = (TensorSplit(src=src[s], src_mask=src_mask[s], tgt=tgt[s], tgt_mask=tgt_mask[s]) for s in halves)
    return Splits(
        name=task,
        kind="seq2seq",
        train=train,
        test=test,
        description=f"seq2seq {task} (seed {seed}), lengths {min_length}-{max_length}, {num_train} / {num_test} pairs",
        vocab=vocab,
    )
