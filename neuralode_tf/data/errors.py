"""Exceptions raised by the dataset loaders.

Every exception derives from :class:`DataError` and from the built-in exception a caller would expect
(``FileNotFoundError`` for missing files, ``ValueError`` for malformed ones), so ``except OSError`` and
``except ValueError`` keep working. Messages name the expected on-disk layout.
"""

from __future__ import annotations

__all__ = ["DataError", "DatasetNotFoundError", "DatasetFormatError"]


class DataError(Exception):
    """Base class of every error raised by :mod:`neuralode_tf.data`."""


class DatasetNotFoundError(DataError, FileNotFoundError):
    """A file or folder of a dataset is missing."""


class DatasetFormatError(DataError, ValueError):
    """A dataset file exists but is not in the expected format."""
