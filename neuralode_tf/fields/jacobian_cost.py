"""The Jacobian Frobenius cost of RNODE (Finlay et al. 2020), estimated with Hutchinson's trace estimator."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .._typing import State
from ..nn._conditioning import check_padding_mask
from ..protocols import Augmented, VectorField, jump_times_of, parts_of
from ._parts import as_field

__all__ = ["JacobianFrobenius", "PROBE_DISTRIBUTIONS"]

PROBE_DISTRIBUTIONS = ("gaussian", "rademacher")

_Tensors = tuple[Tensor, ...]
_Velocity = Callable[..., tuple[_Tensors, _Tensors]]
_Derivatives = Callable[[Tensor, _Tensors], tuple[_Tensors, Tensor]]


class JacobianFrobenius(nn.Module):
    """Augments a field ``f`` with its Jacobian's squared Frobenius norm: the field on ``(x, j)``

    .. math:: \\frac{dx}{dt} = f(t, x), \\qquad
        \\frac{dj}{dt} = \\frac{1}{P\\, n d} \\sum_{p=1}^{P} \\big\\|\\varepsilon_p^\\top \\partial_x f(t, x)\\big\\|^2

    per sample, the regularity cost of RNODE (Finlay et al. 2020, "How to train your neural ODE"), whose
    objective adds ``λ_K ∫ ||f||² dt + λ_J ∫ ||∂f/∂x||_F² dt`` to the loss. ``n d`` is the number of entries of
    one sample's state (of its real tokens when a padding mask is bound, :meth:`bind`), so ``j(T)`` estimates
    ``(1/nd) ∫_0^T ||∂f/∂x||_F² dt``, where ``∂f/∂x`` is the ``nd × nd`` Jacobian of one sample's velocity
    with respect to that sample's state.

    **Estimator.** Hutchinson (1989): for a probe ``ε`` with ``E[ε εᵀ] = I``, ``E[εᵀ A ε] = tr A``; with
    ``A = J Jᵀ``, ``E ||εᵀ J||² = ||J||_F²``. ``εᵀ J`` is one vector-Jacobian product (about one backward pass
    of ``f``), itself differentiable, so the cost trains the field by double backward. ``P`` probes are
    averaged. Per probe, Gaussian probes (RNODE's) have variance ``2 ||J Jᵀ||_F²``, Rademacher ones (``±1``)
    ``2 (||J Jᵀ||_F² - Σ_i (J Jᵀ)_ii²)``, never more.

    **Drawn once per solve.** :meth:`initial_state` draws ``ε`` (``P`` per sample, shaped like the state) and
    holds it for the whole solve, as RNODE does: for every ``ε``, ``E_ε j(T)`` is the solve's quadrature of
    ``(1/nd) ∫ ||∂f/∂x||_F² dt``, and adaptive solvers see a smooth ``dj/dt``. The probes come from
    ``generator`` (drawn on its device, then moved to the state's), else from torch's default generator on
    the state's device. They stay until the next :meth:`initial_state`: with ``gradient="adjoint"`` or
    ``"checkpoint"``, which evaluate the field again in backward, run backward before this module's next solve.

    **With the kinetic energy.** ``JacobianFrobenius(KineticEnergy(f, λ_K), λ_J)`` carries both integrals in
    ``(x, e, j)``; the Jacobian is the tokens' velocity's with respect to the tokens only (a wrapped
    augmentation must keep the tokens first in its state, as ``KineticEnergy`` does). :meth:`final_state`
    reports ``regularization = jacobian_cost + wrapped_cost`` and keeps both. ``KineticEnergy(JacobianFrobenius(
    f))`` is refused (it would skip the probe draw).

    **Splitting.** If the wrapped field has ``parts``, so does this one: first ``(0, dj/dt)``, which evaluates
    the whole wrapped field without moving it, then each wrapped part with ``dj/dt = 0``.

    The batch is the state's first dimension and samples must not interact (token-wise fields do, batch norm
    would not): one product over the batch yields every ``ε_bᵀ J_b``. While gradients are recorded,
    :func:`~torch.nn.functional.scaled_dot_product_attention` takes its math kernel inside the products (the
    fused kernels have no double backward), which may change ``x``'s rounding, not its value.

    Args:
        field: The field ``f``: ``(t, x) -> dx``, a branch ``x -> dx``, or an augmented field such as
            :class:`~neuralode_tf.fields.KineticEnergy`, on a real floating tensor ``(B, ...)`` or a tuple of them.
        weight: ``λ_J >= 0``; the cost is ``λ_J · mean_b j_b(T)`` (no ``1/2``); ``0`` measures without regularising.
        probes: ``P >= 1`` probes per sample and solve (RNODE: 1).
        distribution: ``"gaussian"`` (``N(0, I)``) or ``"rademacher"`` (``±1``).
        generator: The generator the probes are drawn from (seed it for reproducible costs).

    Attributes:
        jacobian_cost: ``λ_J · mean_b j_b(T)`` of the last :meth:`final_state` (``None`` before).
        wrapped_cost: The wrapped augmentation's regularization then (e.g. the transport cost), or ``None``.
    """

    def __init__(
        self,
        field: nn.Module,
        weight: float = 1.0,
        *,
        probes: int = 1,
        distribution: str = "gaussian",
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if isinstance(weight, bool) or not (isinstance(weight, (int, float)) and weight >= 0):
            raise ValueError(f"weight (λ_J) must be a number >= 0, got {weight!r}")
        if isinstance(probes, bool) or not (isinstance(probes, int) and probes >= 1):
            raise ValueError(f"probes must be an integer >= 1, got {probes!r}")
        if distribution not in PROBE_DISTRIBUTIONS:
            valid = ", ".join(map(repr, PROBE_DISTRIBUTIONS))
            raise ValueError(f"unknown probe distribution {distribution!r}; valid: {valid}")
        self.field = as_field(field)
        self.weight = float(weight)
        self.probes = probes
        self.distribution = distribution
        self.generator = generator
        self.jacobian_cost: Tensor | None = None
        self.wrapped_cost: Tensor | None = None
        self._probe_draw: tuple[Tensor, ...] | None = None
        self._key_padding_mask: Tensor | None = None

    def initial_state(self, x: State) -> tuple[Tensor, ...]:
        """The wrapped field's initial state (``x`` for a plain field), then ``j = 0`` per sample; draws the probes.

        Raises:
            TypeError: a tensor of ``x`` is not real floating point.
            ValueError: the wrapped augmentation does not keep ``x`` first in its state.
        """
        tokens = _leaves(x)
        wrong = [leaf for leaf in tokens if not (isinstance(leaf, Tensor) and leaf.is_floating_point())]
        if wrong:
            raise TypeError(
                f"JacobianFrobenius needs a real floating-point state, got {getattr(wrong[0], 'dtype', wrong[0])}"
            )
        inner = _leaves(self.field.initial_state(x)) if isinstance(self.field, Augmented) else tokens
        if len(inner) < len(tokens) or any(a is not b for a, b in zip(inner, tokens)):
            raise ValueError(
                f"{type(self.field).__name__}.initial_state(x) must start with x's tensors (the tokens), "
                "so that the Jacobian is taken with respect to them"
            )
        self._probe_draw = tuple(self._draw(leaf) for leaf in tokens)
        cost = torch.zeros(tokens[0].shape[0], dtype=tokens[0].dtype, device=tokens[0].device)
        return (*inner, cost)

    def _draw(self, leaf: Tensor) -> Tensor:
        shape = (self.probes, *leaf.shape)
        device = self.generator.device if self.generator is not None else leaf.device
        if self.distribution == "gaussian":
            return torch.randn(shape, generator=self.generator, device=device, dtype=leaf.dtype).to(leaf.device)
        return (2 * torch.randint(0, 2, shape, generator=self.generator, device=device) - 1).to(leaf)

    @property
    def drawn_probes(self) -> tuple[Tensor, ...] | None:
        """The probes of the current solve, one ``(P, *leaf.shape)`` tensor per tensor of ``x`` (``None`` before)."""
        return self._probe_draw

    def final_state(self, y: tuple[Tensor, ...]) -> tuple[State, Tensor]:
        """``x(T)`` and ``regularization = jacobian_cost + wrapped_cost`` (the latter only if there is one)."""
        inner, integral = self._unpack(y)
        x, wrapped = self.field.final_state(inner) if isinstance(self.field, Augmented) else (inner, None)
        self.jacobian_cost, self.wrapped_cost = self.cost(integral), wrapped
        return x, self.jacobian_cost if wrapped is None else self.jacobian_cost + wrapped

    def cost(self, integral: Tensor) -> Tensor:
        """The Jacobian cost of ``j``: ``λ_J · mean(j)``."""
        return self.weight * integral.mean()

    def bind(self, *, key_padding_mask: Tensor | None = None) -> None:
        """Leave padding out: with ``key_padding_mask`` ``(B, N)`` (True at padding) on a ``(B, N, d)`` state,
        only real tokens' rows and columns of the Jacobian count, and ``n`` counts the real tokens.
        :class:`~neuralode_tf.ContinuousDepth` calls it (and a wrapped ``KineticEnergy``'s) with its conditioning."""
        self._key_padding_mask = key_padding_mask

    def derivatives(self, t: Tensor, inner: _Tensors) -> tuple[_Tensors, Tensor]:
        """The wrapped field's derivative at the wrapped state's tensors ``inner`` (as a tuple) and ``dj/dt``."""
        probes = self._probe_draw
        if probes is None:
            raise RuntimeError("no probes drawn: start the solve from JacobianFrobenius.initial_state(x)")
        tokens, extras = inner[: len(probes)], inner[len(probes) :]
        for leaf, probe in zip(tokens, probes):
            if probe.shape[1:] != leaf.shape:
                raise ValueError(
                    f"the probes were drawn for a state of shape {tuple(probe.shape[1:])}, the field got "
                    f"{tuple(leaf.shape)}: start each solve from initial_state (torchode's per-sample backsolve, "
                    "one sample at a time, is not supported: use per_sample=False or backend='torchdiffeq')"
                )
        real = self._real_tokens(tokens)
        if real is not None:
            probes = (probes[0] * real.unsqueeze(-1),)

        def velocity(*token_leaves: Tensor) -> tuple[_Tensors, _Tensors]:
            out = _leaves(self.field(t, self._wrapped_state((*token_leaves, *extras))))
            return out[: len(token_leaves)], out[len(token_leaves) :]

        moved, rest, rows = _vector_jacobian_products(velocity, tokens, probes)
        if real is not None:
            rows = (rows[0] * real.unsqueeze(-1),)
        squares = [row.pow(2).reshape(*row.shape[:2], -1).sum(-1) for row in rows]  # (P, B) per leaf
        total = sum(squares[1:], squares[0]).mean(0)
        entries = sum(leaf[0].numel() for leaf in tokens) if real is None else real.sum(-1) * tokens[0].shape[-1]
        return (*moved, *rest), total / entries

    def _real_tokens(self, tokens: tuple[Tensor, ...]) -> Tensor | None:
        """``1.`` at the real tokens of a ``(B, N, d)`` state when a padding mask is bound, else ``None``."""
        mask = self._key_padding_mask
        if mask is None:
            return None
        if len(tokens) != 1 or tokens[0].ndim != 3:
            raise ValueError(
                f"a key_padding_mask needs a (B, N, d) tensor state, got {[tuple(t.shape) for t in tokens]}"
            )
        check_padding_mask(mask, "key_padding_mask", tokens[0].shape[:-1], "the state", bound=True)
        return (~mask).to(tokens[0].dtype)

    def _wrapped_state(self, leaves: tuple[Tensor, ...]) -> State:
        return leaves if isinstance(self.field, Augmented) or len(leaves) > 1 else leaves[0]

    def _unpack(self, y: tuple[Tensor, ...]) -> tuple[State, Tensor]:
        if not isinstance(y, tuple) or len(y) < 2:
            raise TypeError(
                "a JacobianFrobenius state is a tuple (*x, j); start from JacobianFrobenius.initial_state(x) "
                "(to add the kinetic energy, wrap it inside: JacobianFrobenius(KineticEnergy(field, λ_K), λ_J))"
            )
        *inner, integral = y
        return self._wrapped_state(tuple(inner)), integral

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        inner, _ = self._unpack(y)
        velocity, rate = self.derivatives(t, _leaves(inner))
        return (*velocity, rate)

    @property
    def jump_times(self) -> list[float]:
        """The wrapped field's discontinuities in time, if it declares any."""
        return list(jump_times_of(self.field))

    @property
    def parts(self) -> tuple[nn.Module, ...] | None:
        """The Jacobian part, then each part of the wrapped field with ``dj/dt = 0``; ``None`` if it has no parts."""
        parts = parts_of(self.field)
        if parts is None:
            return None
        return (_JacobianPart(self.derivatives), *(_StillCost(part, self._wrapped_state) for part in parts))

    def extra_repr(self) -> str:
        return f"weight={self.weight}, probes={self.probes}, distribution={self.distribution!r}"


def _leaves(x: State) -> tuple[Tensor, ...]:
    return x if isinstance(x, tuple) else (x,)


def _vector_jacobian_products(velocity: _Velocity, tokens: _Tensors, probes: _Tensors) -> tuple[_Tensors, ...]:
    """``velocity(*tokens)`` (the tokens' derivatives, the other derivatives) and ``εᵀ ∂/∂tokens`` of the former
    for each probe, leaf by leaf ``(P, *leaf.shape)``.

    By :func:`torch.func.vjp`, which runs under ``no_grad`` and ``vmap`` (torchode's backsolve) too; where
    saved-tensor hooks are active (``gradient="checkpoint"``), which ``torch.func`` refuses, by
    :func:`torch.autograd.grad`. While gradients are recorded, attention takes its math kernel."""
    with sdpa_kernel(SDPBackend.MATH) if torch.is_grad_enabled() else nullcontext():
        try:
            moved, product, rest = cast(Any, torch.func.vjp(velocity, *tokens, has_aux=True))  # stubs omit has_aux
        except RuntimeError as err:
            if "saved tensor hooks" not in str(err):
                raise
            return _products_by_autograd(velocity, tokens, probes)
        if probes[0].shape[0] == 1:
            return moved, rest, tuple(row.unsqueeze(0) for row in product(tuple(probe[0] for probe in probes)))
        return moved, rest, torch.func.vmap(product)(probes)


def _products_by_autograd(velocity: _Velocity, tokens: _Tensors, probes: _Tensors) -> tuple[_Tensors, ...]:
    """:func:`_vector_jacobian_products` by :func:`torch.autograd.grad`, one probe after another."""
    recording = torch.is_grad_enabled()
    with torch.enable_grad():
        inputs = tuple(leaf if leaf.requires_grad else leaf.detach().requires_grad_() for leaf in tokens)
        moved, rest = velocity(*inputs)
        cotangents = [tuple(probe[p] for probe in probes) for p in range(probes[0].shape[0])]
        per_probe = [
            torch.autograd.grad(moved, inputs, v, create_graph=recording, retain_graph=True, materialize_grads=True)
            for v in cotangents
        ]
    rows = tuple(torch.stack(leaf_rows) for leaf_rows in zip(*per_probe))
    if not recording:
        moved, rest, rows = (tuple(leaf.detach() for leaf in group) for group in (moved, rest, rows))
    return moved, rest, rows


class _JacobianPart(nn.Module):
    """``(0, dj/dt)``: accumulates the Jacobian cost of the whole field without moving the wrapped state."""

    def __init__(self, derivatives: _Derivatives):
        super().__init__()
        self.derivatives = derivatives

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        *inner, _ = y
        _, rate = self.derivatives(t, tuple(inner))
        return (*(torch.zeros_like(leaf) for leaf in inner), rate)


class _StillCost(nn.Module):
    """``(g_i(t, y), 0)``: one part of the wrapped field, leaving ``j`` unchanged."""

    def __init__(self, part: VectorField, wrapped_state: Callable[[tuple[Tensor, ...]], State]):
        super().__init__()
        self.part = part
        self.wrapped_state = wrapped_state

    def forward(self, t: Tensor, y: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        *inner, integral = y
        return (*_leaves(self.part(t, self.wrapped_state(tuple(inner)))), torch.zeros_like(integral))
