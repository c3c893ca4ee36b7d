"""The linearisation of a depth field: its Jacobian, exactly or through Jacobian-vector products.

For a field ``dx/dt = f(t, x)`` the Jacobian ``J = ∂f/∂x`` at a state ``x`` says how a small perturbation ``δx``
evolves to first order, ``d(δx)/dt = J δx``: an eigenvalue of ``J`` with positive real part is a direction in
which nearby token states separate (locally, at this depth), one with negative real part a direction in which
they contract. The whole state, batch dimensions included, is one vector of ``n = x.numel()`` entries, so ``J``
is ``(n, n)``; for a batch of independent sequences it is block-diagonal.

* :func:`field_jacobian` builds ``J`` densely with forward-mode automatic differentiation
  (:func:`torch.func.jacfwd`: ``n`` Jacobian-vector products, batched), for small states.
* :func:`leading_eigenvalues` finds the ``k`` eigenvalues of largest real part (or magnitude) from
  Jacobian-vector products alone (:func:`torch.func.jvp`, one per Krylov vector), never forming ``J``: Arnoldi's
  method (Arnoldi 1951) with Krylov-Schur style thick restarts (Stewart 2002; Saad, *Numerical Methods for Large
  Eigenvalue Problems*, 2011, ch. 6-7).

Forward-mode differentiation needs every operation of the field to have a forward derivative; PyTorch's fused
attention kernels have none, so the Jacobian-vector products here run scaled dot-product attention through its
composite ("math") implementation, which computes the same function.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacfwd, jvp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from .._typing import Field

__all__ = ["field_jacobian", "leading_eigenvalues", "Eigenvalues", "EigenvaluesNotConvergedError"]

DENSE_JACOBIAN_LIMIT = 4096
"""Largest state (entries) whose dense Jacobian :func:`field_jacobian` builds by default (4096² float64: 128 MiB)."""


@contextmanager
def _differentiable_attention() -> Iterator[None]:
    """Run scaled dot-product attention through its composite kernel, which forward-mode AD can differentiate."""
    with sdpa_kernel([SDPBackend.MATH]):
        yield


def _check_tensor_state(x: object) -> Tensor:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(
            f"the state must be one real floating tensor (its entries are one vector), got {type(x).__name__}"
            + (f" of dtype {x.dtype}" if isinstance(x, Tensor) else "")
        )
    return x


def _pushforward(field: Field, t: Tensor, x: Tensor) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """``v -> (f(t, x), J_f(t, x) v)``, one forward-mode pass (:func:`torch.func.jvp`).

    The field's floating parameters and buffers enter as primals with zero tangents (materialised), rather than
    as constants: forward-mode AD represents a constant's missing tangent by a lazy zero tensor, and each operation
    on one costs a shape computation in Python (about 0.3 ms with torch 2.14 on a CPU, tens of times a small
    layer's arithmetic), whereas a real zero tangent costs one unbatched product per layer.
    """
    if not isinstance(field, nn.Module):
        return lambda tangent: _pair(jvp(lambda y: field(t, y), (x,), (tangent,)))
    named = itertools.chain(field.named_parameters(), field.named_buffers())
    constants = {name: tensor.detach() for name, tensor in named if tensor.is_floating_point()}
    zeros = {name: torch.zeros_like(tensor) for name, tensor in constants.items()}

    def evaluate(y: Tensor, tensors: dict[str, Tensor]) -> Tensor:
        return functional_call(field, tensors, (t, y))

    return lambda tangent: _pair(jvp(evaluate, (x, constants), (tangent, zeros)))


def _pair(result: tuple[Any, ...]) -> tuple[Tensor, Tensor]:
    return result[0], result[1]


def _batched_jvp(
    field: Field, t: Tensor, x: Tensor, tangents: Tensor, *, vectorised: bool = True
) -> tuple[Tensor, Tensor]:
    """``(f(t, x), [J v_1, ..., J v_k])`` for tangents ``(k, *x.shape)``.

    Vectorised: one forward-mode pass batched over the ``k`` tangents by :func:`torch.func.vmap`, in which the
    primal ``f(t, x)`` is computed once and each operation's tangent ``k`` times in one batched operation (about
    ``1 + k`` forward passes of arithmetic, and one more for the zero tangents of the weights). Otherwise ``k``
    separate passes, for a field ``vmap`` cannot trace (data-dependent Python control flow), each recomputing
    ``f(t, x)``. One tangent needs no ``vmap``.
    """
    push = _pushforward(field, t, x)
    with _differentiable_attention():
        if vectorised and tangents.shape[0] > 1:
            values, derivatives = vmap(push)(tangents)  # the unbatched f(t, x) comes back expanded (a view)
            return values[0], derivatives
        pairs = [push(tangent) for tangent in tangents]
    return pairs[0][0], torch.stack([derivative for _, derivative in pairs])


def field_jacobian(field: Field, t: Tensor | float, x: Tensor, *, max_size: int = DENSE_JACOBIAN_LIMIT) -> Tensor:
    """The Jacobian ``J_ij = ∂f_i/∂x_j`` of ``field`` at ``(t, x)``, as an ``(n, n)`` matrix, ``n = x.numel()``.

    The state is flattened in row-major order (``x.reshape(-1)``), batch dimensions included, so for a batch of
    independent sequences ``J`` is block-diagonal. Built column by column with forward-mode AD
    (:func:`torch.func.jacfwd`); exact up to rounding. The result does not track gradients of the field's weights.

    Args:
        field: A field ``(t, x) -> dx/dt`` that maps a tensor to a tensor of its shape.
        t: The depth-time.
        x: The state, a real floating tensor.
        max_size: Largest ``n`` accepted: the matrix has ``n²`` entries.

    Raises:
        TypeError: ``x`` is not a real floating tensor.
        ValueError: ``n > max_size`` (use :func:`leading_eigenvalues`, which never forms ``J``).
    """
    x = _check_tensor_state(x)
    n = x.numel()
    if n > max_size:
        raise ValueError(
            f"the state has n = {n} entries, so its dense Jacobian would have n² = {n * n:,} entries, above "
            f"max_size = {max_size} (n); use leading_eigenvalues(field, t, x, k), which needs only Jacobian-vector "
            "products, or raise max_size"
        )
    time, shape = torch.as_tensor(t, dtype=x.dtype, device=x.device), x.shape

    def flat_field(y: Tensor) -> Tensor:
        out = field(time, y.reshape(shape))
        if not isinstance(out, Tensor):
            raise TypeError(f"the field must map a tensor to a tensor, got {type(out).__name__}")
        return out.reshape(-1)

    with torch.no_grad(), _differentiable_attention():
        return jacfwd(flat_field)(x.detach().reshape(-1)).reshape(n, n)


class EigenvaluesNotConvergedError(RuntimeError):
    """:func:`leading_eigenvalues` did not reach its tolerance within its restarts."""


@dataclass(frozen=True)
class Eigenvalues:
    """The result of :func:`leading_eigenvalues`.

    Attributes:
        values: The ``k`` eigenvalues, complex, in descending order of the criterion (``by``).
        residuals: ``‖J u - θ u‖`` of each Ritz pair ``(θ, u)``, ``‖u‖ = 1``, real, as ``values``.
        jvps: How many Jacobian-vector products were evaluated (each about one forward pass of the field).
        restarts: How many times the Krylov space was shrunk and grown again.
    """

    values: Tensor
    residuals: Tensor
    jvps: int
    restarts: int


def leading_eigenvalues(
    field: Field,
    t: Tensor | float,
    x: Tensor,
    k: int,
    *,
    by: str = "real",
    krylov_dim: int | None = None,
    tol: float | None = None,
    max_restarts: int = 100,
    start: Tensor | None = None,
) -> Eigenvalues:
    """The ``k`` eigenvalues of largest real part (``by="real"``) or modulus (``by="magnitude"``) of the Jacobian
    ``J = ∂f/∂x`` of ``field`` at ``(t, x)``, from Jacobian-vector products only.

    Arnoldi's method builds an orthonormal basis ``Q = [q_1, ..., q_m]`` of the Krylov space
    ``span{v, Jv, ..., J^{m-1} v}`` (``J q`` by one :func:`torch.func.jvp`, Gram-Schmidt applied twice), and takes
    the eigenvalues ``θ`` of the small matrix ``H = Qᵀ J Q`` (upper Hessenberg in exact arithmetic) as estimates
    of ``J``'s: Ritz pairs ``(θ, u = Q y)`` with ``H y = θ y``. Krylov spaces find eigenvalues on the edge of the
    spectrum first, where both criteria look. A pair has converged when its residual ``‖J u - θ u‖`` (computed
    from the stored products ``J Q``, ``‖u‖ = 1``) is at most ``tol · max(‖H‖₂, |θ|)``. If the ``k`` wanted pairs
    have not converged when the space has ``m = krylov_dim`` vectors, it is shrunk to the real invariant subspace
    of ``H`` spanned by the wanted Ritz vectors and about as many more (real and imaginary parts of complex ones)
    and grown again from the residual direction (a thick, Krylov-Schur style restart, Stewart 2002: the shrunk
    basis keeps the Krylov relation ``J Q = Q H + r eᵀ``, so no product is recomputed). An invariant subspace
    (``r = 0``, e.g. ``m = n``) ends the iteration with exact eigenvalues.

    For a non-normal ``J`` an eigenvalue's error can exceed its residual by the eigenvalue's condition number.

    Args:
        field: A field ``(t, x) -> dx/dt`` that maps a tensor to a tensor of its shape.
        t: The depth-time.
        x: The state, a real floating tensor; ``n = x.numel()``.
        k: How many eigenvalues, ``1 <= k < n`` (for ``k`` near ``n`` use ``torch.linalg.eigvals`` of
            :func:`field_jacobian`).
        by: ``"real"`` (default): the largest real parts, the fastest local growth rates of perturbations;
            ``"magnitude"``: the largest moduli.
        krylov_dim: Most basis vectors held at once (default ``min(n, max(2k + 20, 40))``), ``> k``.
        tol: Relative residual tolerance (default ``√eps`` of ``x``'s dtype: 1.5e-8 in float64).
        max_restarts: Most restarts before :class:`EigenvaluesNotConvergedError`.
        start: The first Krylov vector, shaped like ``x`` (default: standard normal, seeded, so the result is
            reproducible).

    Returns:
        :class:`Eigenvalues`: ``values`` sorted by the criterion, descending (a complex pair's member of positive
        imaginary part first), their ``residuals`` and the work done.

    Raises:
        TypeError: ``x`` is not a real floating tensor.
        ValueError: ``k``, ``by`` or ``krylov_dim`` out of range.
        EigenvaluesNotConvergedError: the tolerance was not met within ``max_restarts``.
    """
    x = _check_tensor_state(x)
    n = x.numel()
    if by not in ("real", "magnitude"):
        raise ValueError(f"by must be 'real' or 'magnitude', got {by!r}")
    if not 1 <= k < n:
        raise ValueError(f"k must satisfy 1 <= k < n = x.numel() = {n}, got k = {k}")
    m = min(n, max(2 * k + 20, 40)) if krylov_dim is None else krylov_dim
    if not k < m <= n:
        raise ValueError(f"krylov_dim must satisfy k = {k} < krylov_dim <= n = {n}, got {m}")
    tol = torch.finfo(x.dtype).eps ** 0.5 if tol is None else tol
    time, shape = torch.as_tensor(t, dtype=x.dtype, device=x.device), x.shape
    with torch.no_grad():
        x = x.detach()
        if start is None:
            start = torch.randn(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        residual = start.reshape(-1).to(dtype=x.dtype, device=x.device)
        basis = x.new_zeros(0, n)  # rows q_i
        images = x.new_zeros(0, n)  # rows J q_i
        jvps, restarts = 0, 0
        while True:
            invariant = False
            while basis.shape[0] < m and not invariant:
                q = residual / residual.norm()
                image = _batched_jvp(field, time, x, q.reshape(1, *shape))[1].reshape(-1)
                jvps += 1
                basis, images = torch.cat([basis, q[None]]), torch.cat([images, image[None]])
                residual, invariant = _orthogonal_part(image, basis)
            hessenberg = basis @ images.T  # H_ij = q_i · J q_j
            ritz, vectors = torch.linalg.eig(hessenberg)
            if ritz.numel() < k:
                raise EigenvaluesNotConvergedError(f"start is in an invariant subspace of dimension {ritz.numel()} < k")
            order = _ranking(ritz, by)
            ritz, vectors = ritz[order], vectors[:, order]
            vectors = vectors / torch.linalg.vector_norm(vectors, dim=0)
            residuals = _ritz_residuals(basis, images, ritz[:k], vectors[:, :k])
            scale = torch.linalg.matrix_norm(hessenberg, ord=2)
            if invariant or bool((residuals <= tol * torch.clamp(ritz[:k].abs(), min=scale)).all()):
                return Eigenvalues(values=ritz[:k], residuals=residuals, jvps=jvps, restarts=restarts)
            if restarts == max_restarts:
                raise EigenvaluesNotConvergedError(
                    f"leading_eigenvalues: residuals {residuals.tolist()} still above tol = {tol} (relative) after "
                    f"{restarts} restarts and {jvps} Jacobian-vector products; raise krylov_dim or max_restarts"
                )
            kept = _real_invariant_basis(vectors[:, : min(m - 1, max(k + (m - k) // 2, k + 1))], limit=m - 1)
            basis, images = kept.T @ basis, kept.T @ images
            restarts += 1


def _orthogonal_part(vector: Tensor, basis: Tensor) -> tuple[Tensor, bool]:
    """``vector`` less its projection on the rows of ``basis`` (classical Gram-Schmidt, twice for orthogonality to
    working precision), and whether nothing of it is left (the basis spans an invariant subspace)."""
    rest = vector - basis.T @ (basis @ vector)
    rest = rest - basis.T @ (basis @ rest)
    size = vector.norm()
    return rest, bool(rest.norm() <= 100 * torch.finfo(vector.dtype).eps * torch.clamp(size, min=1e-300))


def _ranking(values: Tensor, by: str) -> Tensor:
    """Indices sorting complex ``values`` by real part (or modulus) descending, then imaginary part descending."""
    key = values.real if by == "real" else values.abs()
    secondary = torch.argsort(values.imag, descending=True, stable=True)
    return secondary[torch.argsort(key[secondary], descending=True, stable=True)]


def _ritz_residuals(basis: Tensor, images: Tensor, ritz: Tensor, vectors: Tensor) -> Tensor:
    """``‖J Q y - θ Q y‖`` for each Ritz value ``θ`` and unit coordinate vector ``y`` (columns of ``vectors``)."""
    complex_dtype = vectors.dtype
    applied = images.T.to(complex_dtype) @ vectors - (basis.T.to(complex_dtype) @ vectors) * ritz
    return torch.linalg.vector_norm(applied, dim=0)


def _real_invariant_basis(vectors: Tensor, limit: int) -> Tensor:
    """An orthonormal real basis (columns, at most ``limit``) of the span of the real and imaginary parts of the
    complex coordinate vectors, taken in order: the real invariant subspace of ``H`` that they span. A vector's
    real and imaginary parts enter together or not at all, so that a conjugate pair is kept whole (its partner
    adds nothing new), and a part already in the span is skipped (Gram-Schmidt applied twice)."""
    columns: list[Tensor] = []
    for vector in vectors.T:
        new: list[Tensor] = []
        for part in (vector.real, vector.imag):
            for _ in range(2):
                part = part - sum(((q @ part) * q for q in columns + new), torch.zeros_like(part))
            if part.norm() > 1e-8:
                new.append(part / part.norm())
        if len(columns) + len(new) > limit:
            break
        columns.extend(new)
    return torch.stack(columns, dim=1)
