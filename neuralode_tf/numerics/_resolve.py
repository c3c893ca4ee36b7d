"""Which registered backend runs a solve: :func:`resolve_backend`."""

from __future__ import annotations

from .._typing import Field
from ..protocols import parts_of
from ._registry import GRADIENT_MODES, Backend, get_backend, offering, quoted, registered
from .errors import SolverConfigError
from .fixed_grid import SPLITTING_SCHEMES
from .tableaus import TABLEAUS

__all__ = ["resolve_backend"]


def resolve_backend(
    field: Field,
    method: str,
    backend: str = "auto",
    *,
    adjoint: str = "backprop",
    substep: str | None = None,
    seminorm: bool = False,
    per_sample: bool = False,
) -> str:
    """The backend :func:`solve` runs with these settings; raises :class:`SolverConfigError` if none can.

    ``backend="auto"`` picks the first registered backend (:data:`BACKENDS`, in order) that offers ``method``,
    the gradient mode ``adjoint``, and ``seminorm`` and ``per_sample`` where they are asked for.
    """
    if backend != "auto":
        forced = get_backend(backend)  # an unknown name: the registered ones are the valid choices
        if method in forced.refused:
            raise SolverConfigError(f"backend {backend!r} has no method {method!r}: {forced.refused[method]}")
    all_methods = sorted({m for b in registered() for m in b.methods})
    if method not in all_methods:
        raise SolverConfigError(f"unknown method {method!r}; valid: {quoted(all_methods)}")
    if adjoint not in GRADIENT_MODES:
        raise SolverConfigError(f"unknown gradient method adjoint={adjoint!r}; valid: {quoted(GRADIENT_MODES)}")
    if substep is not None:
        if method not in SPLITTING_SCHEMES:
            raise SolverConfigError(
                f"substep applies to the splitting methods {quoted(SPLITTING_SCHEMES)}, not {method!r}"
            )
        if substep not in TABLEAUS:
            raise SolverConfigError(f"unknown substep {substep!r}; valid: {quoted(TABLEAUS)}")
    if method in SPLITTING_SCHEMES and parts_of(field) is None:
        raise SolverConfigError(
            f"method {method!r} steps the parts of a split field one after another, but "
            f"{type(field).__name__} has no non-empty `parts`; build the field with SplitField(...) "
            "or use a method that evaluates the whole field"
        )

    def supports(b: Backend) -> bool:
        return (
            method in b.methods
            and adjoint in b.gradients
            and (not seminorm or b.seminorm)
            and (not per_sample or b.per_sample)
        )

    for candidate in registered() if backend == "auto" else (get_backend(backend),):
        if supports(candidate):
            if seminorm and adjoint != "adjoint":
                break
            return candidate.name
    combos = "; ".join(f"{b.name}: methods {quoted(b.methods)}, adjoint {quoted(b.gradients)}" for b in registered())
    asked = f"method={method!r}, backend={backend!r}, adjoint={adjoint!r}"
    if seminorm:
        asked += f", seminorm=True ({offering('seminorm')} with adjoint='adjoint' only)"
    if per_sample:
        asked += f", per_sample=True ({offering('per_sample')} only)"
    raise SolverConfigError(f"no backend supports {asked}. Valid combinations: {combos}")
