"""What :func:`torch.compile` needs of the functions it compiles once per field (a solve's march, a Lyapunov
spectrum's tangent evaluation)."""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable

_NUMBERS = itertools.count()
"""Numbers the code objects made by :func:`own_code` (their names in traces)."""


def own_code(fn: Callable) -> Callable:
    """``fn`` with a code object of its own.

    Dynamo keeps compiled code per code object, at most ``torch._dynamo.config.recompile_limit`` (8)
    variants of it, and runs eagerly beyond: every march shares the code of one closure, so without
    this the ninth field compiled in a process would silently run uncompiled.
    """
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{next(_NUMBERS)}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
