"""Which registered backend runs a solve: :func:`resolve_backend`, from what the backends declare."""

from __future__ import annotations

from .._renamed import renamed_keyword
from .._typing import Field
from ._registry import GRADIENTS, Backend, get_backend, offering, quoted, registered
from .errors import SolverConfigError

__all__ = ["resolve_backend"]


def resolve_backend(
    field: Field,
    method: str,
    backend: str = "auto",
    *,
    gradient: str | None = None,
    substep: str | None = None,
    seminorm: bool = False,
    per_sample: bool = False,
    adjoint: str | None = None,
) -> str:
    """The backend :func:`solve` runs with these settings; raises :class:`SolverConfigError` if none can.

    ``backend="auto"`` picks the first registered backend by ``priority`` (:data:`BACKENDS`, in order) that offers
    ``method``, the gradient method ``gradient`` (``None``: ``"backprop"``), ``substep``, and ``seminorm`` and
    ``per_sample`` where they are asked for; the chosen backend's own ``check`` then has its say. ``adjoint`` is the
    deprecated old name of ``gradient``.
    """
    gradient = renamed_keyword("gradient", gradient, "adjoint", adjoint, default="backprop")
    if backend != "auto":
        forced = get_backend(backend)  # an unknown name: the registered ones are the valid choices
        if method in forced.refused:
            raise SolverConfigError(f"backend {backend!r} has no method {method!r}: {forced.refused[method]}")
    all_methods = sorted({m for b in registered() for m in b.methods})
    if method not in all_methods:
        raise SolverConfigError(f"unknown method {method!r}; valid: {quoted(all_methods)}")
    if gradient not in GRADIENTS:
        raise SolverConfigError(f"unknown gradient={gradient!r}; valid: {quoted(GRADIENTS)}")
    splitting = list(dict.fromkeys(m for b in registered() for m in b.methods if m in b.substep))
    if substep is not None and method not in splitting:
        raise SolverConfigError(f"substep applies to the splitting methods {quoted(splitting)}, not {method!r}")

    def supports(b: Backend) -> bool:
        return (
            method in b.methods
            and gradient in b.gradients
            and (substep is None or method in b.substep)
            and (not seminorm or b.seminorm)
            and (not per_sample or b.per_sample)
        )

    for candidate in registered() if backend == "auto" else (get_backend(backend),):
        if supports(candidate):
            if seminorm and gradient != "adjoint":
                break
            candidate.check(field, method, substep)
            return candidate.name
    combos = "; ".join(f"{b.name}: methods {quoted(b.methods)}, gradient {quoted(b.gradients)}" for b in registered())
    asked = f"method={method!r}, backend={backend!r}, gradient={gradient!r}"
    if seminorm:
        asked += f", seminorm=True ({offering('seminorm')} with gradient='adjoint' only)"
    if per_sample:
        asked += f", per_sample=True ({offering('per_sample')} only)"
    raise SolverConfigError(f"no backend supports {asked}. Valid combinations: {combos}")
