"""Names kept for one release after a rename: each use warns with the new name, then means it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["renamed", "renamed_keyword", "RenamedKeys"]

V = TypeVar("V")


def renamed(kind: str, name: str, renames: Mapping[str, str], *, stacklevel: int = 3) -> str:
    """``name``, or its new name with a :class:`DeprecationWarning` if ``renames`` maps it to one (``kind`` says what
    is named: ``"preset"``, ``"model"``)."""
    if name not in renames:
        return name
    new = renames[name]
    warnings.warn(
        f"the {kind} {name!r} is now called {new!r}; the old name is accepted until the next release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return new


def renamed_keyword(new: str, value: V | None, old: str, old_value: V | None, *, default: V, stacklevel: int = 3) -> V:
    """The value of the keyword ``new``, or of its deprecated old name ``old`` (which warns with a
    :class:`DeprecationWarning`; ``stacklevel`` as :func:`warnings.warn` takes it from here, 3: the line that called
    the function calling this one); ``default`` if neither is given.

    Raises:
        TypeError: both are given.
    """
    if old_value is None:
        return default if value is None else value
    if value is not None:
        raise TypeError(
            f"{new}={value!r} and {old}={old_value!r} both given: {old} is the deprecated old name of {new}; "
            f"pass {new} alone"
        )
    warnings.warn(
        f"{old}= is deprecated and will be removed in the next release: pass {new}={old_value!r} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return old_value


class RenamedKeys(dict[str, V]):
    """A dict in which an old key still reads the entry of its new name, with a :class:`DeprecationWarning`.

    Only ``d[old]`` is redirected; ``old in d``, iteration and ``d.get(old)`` see the current names alone."""

    def __init__(self, kind: str, renames: Mapping[str, str], entries: Mapping[str, V] | None = None) -> None:
        super().__init__(entries or {})
        self.kind, self.renames = kind, renames

    def __missing__(self, key: str) -> V:
        if key not in self.renames:
            raise KeyError(key)
        return self[renamed(self.kind, key, self.renames)]
