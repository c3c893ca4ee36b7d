"""Names kept for one release after a rename: each use warns with the new name, then means it."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["renamed", "renamed_keyword", "renamed_names", "RenamedKeys"]

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


def renamed_names(module: str, renames: Mapping[str, str], namespace: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` that reads each former name of ``renames`` as its new name in ``namespace`` (the
    module's ``globals()``), with a :class:`DeprecationWarning` pointing at the line that read it."""

    def __getattr__(name: str) -> Any:
        if name in renames:
            return namespace[renamed(f"{module} name", name, renames)]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


class RenamedKeys(dict[str, V]):
    """A dict in which an old key still reads the entry of its new name, with a :class:`DeprecationWarning`.

    ``d[old]`` and ``d.get(old)`` are redirected; ``old in d`` and iteration see the current names alone."""

    def __init__(self, kind: str, renames: Mapping[str, str], entries: Mapping[str, V] | None = None) -> None:
        super().__init__(entries or {})
        self.kind, self.renames = kind, renames

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self or key in self.renames else default

    def __missing__(self, key: str) -> V:
        if key not in self.renames:
            raise KeyError(key)
        return self[renamed(self.kind, key, self.renames)]
