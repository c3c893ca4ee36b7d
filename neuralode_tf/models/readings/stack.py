"""A stack of transformer blocks read as continuous depth: the readings of :data:`FIELDS` and :func:`stack_encoder`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from torch import nn

from ...continuous import ContinuousDepth
from ...fields import (
    ComposedField,
    EvolvingAttentionField,
    EvolvingAttentionStack,
    JacobianFrobenius,
    KineticEnergy,
    ParallelField,
    SplitField,
    Sublayer,
    WeightSharedField,
)
from ...nn import EvolvingAttentionBranch
from ...protocols import parts_of
from .discrete import DiscreteStack
from .node import NODETransformer

__all__ = ["FIELDS", "stack_encoder"]

FIELDS = ("split", "parallel", "composed", "node", "evolving", "discrete")
"""The readings of a stack of blocks as continuous depth, and the discrete stack, by name (:func:`stack_encoder`)."""

_SUMS = {"split": SplitField, "parallel": ParallelField}

_Built = TypeVar("_Built")


def stack_encoder(
    field: str | nn.Module,
    depth: int,
    sets: Sequence[Sequence[nn.Module]] | None = None,
    *,
    inner_residuals: bool = True,
    final_norm: nn.Module | None = None,
    t1: float | None = None,
    transport_cost: float | None = None,
    jacobian_cost: float | None = None,
    method: str | None = None,
    steps: int | None = None,
    step_size: float | None = None,
    **solve_options: Any,
) -> nn.Module:
    """The continuous-depth encoder ``x(0) -> x(T)`` of a stack of ``depth`` blocks, in one of the readings
    of :data:`FIELDS`; block ``i`` uses the parameter set ``sets[i * len(sets) // depth]``.

    ==============  ============================================  ===============  =====================
    ``field``       ODE                                           default ``T``    default method
    ==============  ============================================  ===============  =====================
    ``"split"``     ``Σ_j b_{σ(t),j}(x)``, parts stepped in turn  ``depth``        ``lie_trotter``, h = 1
    ``"parallel"``  the same sum, one field                       ``depth``        ``euler``, h = 1
    ``"composed"``  ``B_D ∘ ... ∘ B_1(x)``, one field             ``1``            ``euler``, one step
    ``"node"``      ``D`` ODEs, block ``i`` minus its FC skip     ``1`` each       ``euler``, one step
    ``"evolving"``  ``(x, A)``: EA blocks, ``dA/dt = L(A, x) - A``  ``depth``        ``lie_trotter``, h = 1
    ``"discrete"``  no ODE: ``B_D ∘ ... ∘ B_1(x)`` once           --               --
    ==============  ============================================  ===============  =====================

    The defaults compute the discrete stack for ``"split"`` and Zhong et al.'s parallel blocks for
    ``"parallel"``; for ``"composed"`` and ``"node"`` see :class:`~neuralode_tf.fields.ComposedField`
    and :class:`~neuralode_tf.models.NODETransformer`; ``"discrete"``
    (:class:`~neuralode_tf.models.DiscreteStack`) is the discrete stack for any blocks, also those
    that are no Euler step (post-norm :class:`~neuralode_tf.fields.Sublayer` s), and takes no solve settings.
    Give ``steps`` for more steps (e.g. 20 Euler steps on ``[0, 1]`` in Kan et al.'s MNIST experiment). The
    default method goes by the kind of field, for a ready-made one too: ``euler`` for parallel blocks (though a
    :class:`~neuralode_tf.fields.ParallelField` has parts) and for fields without parts, ``lie_trotter`` for the
    other fields with parts.

    Args:
        field: A name from :data:`FIELDS`, or a ready-made field ``(t, x) -> dx``, integrated over ``[0, t1]``.
        depth: Number of blocks ``D``.
        sets: The parameter sets, each a sequence of sub-layers; needed for a named field.
        inner_residuals: ``"composed"`` only: keep each block's skips (default, Kan et al.'s code).
        final_norm: ``"composed"`` only: a module inside the field after the composition, e.g.
            ``nn.LayerNorm(d)`` as the released OT-Transformer code's ``ln_f`` (default: none, as the
            Sinkformers models of Kan et al.'s other experiments; see :class:`~neuralode_tf.fields.ComposedField`).
        t1: End of depth-time (defaults in the table; ``depth`` for a ready-made field).
        transport_cost: ``λ``: augment with the kinetic energy (:class:`~neuralode_tf.fields.KineticEnergy`)
            and report ``λ/2 · mean e(T)`` as the encoder's ``regularization`` (for ``"node"``, one per ODE).
            ``0`` measures the energy without regularising; ``None`` (default) does not augment.
        jacobian_cost: ``λ_J``: augment with the Jacobian's squared Frobenius norm, estimated with one Gaussian
            Hutchinson probe per sample and solve (:class:`~neuralode_tf.fields.JacobianFrobenius`, RNODE, Finlay
            et al. 2020), and add ``λ_J · mean j(T)`` to ``regularization`` (beside the transport cost, when both
            are given: RNODE's two costs); ``0`` measures without regularising; ``None`` (default) does not augment.
        method, steps, step_size, **solve_options: Solve settings (:class:`~neuralode_tf.ContinuousDepth`).
    """
    if field not in FIELDS and not isinstance(field, nn.Module):
        raise ValueError(f"unknown field {field!r}; valid: {', '.join(map(repr, FIELDS))} or a field module")
    if field != "composed" and (not inner_residuals or final_norm is not None):
        raise ValueError(f"inner_residuals=False and final_norm apply to field='composed' only, not to {field!r}")
    sets = sets or ()  # None for a ready-made field, which reads no sets
    if isinstance(field, str) and not sets:
        raise ValueError(f"field={field!r} needs the parameter sets of the blocks")
    costs = dict(transport_cost=transport_cost, jacobian_cost=jacobian_cost)
    if field == "evolving" and any(cost is not None for cost in costs.values()):
        given = [name for name, cost in costs.items() if cost is not None]
        raise ValueError(f"{given} are not supported with field='evolving' (its state carries logit maps)")
    settings = dict(steps=steps, step_size=step_size, **solve_options)
    if field == "discrete":
        ode = dict(settings, t1=t1, method=method, **costs)
        given = [k for k, v in ode.items() if v is not None]
        if given:
            raise ValueError(f"field='discrete' is no ODE and takes no {given}")
        return DiscreteStack([sets[i * len(sets) // depth] for i in range(depth)])
    if field == "node":
        blocks = [sets[i * len(sets) // depth] for i in range(depth)]
        t1 = 1.0 if t1 is None else t1
        return NODETransformer(
            blocks, t1, transport_cost=transport_cost, jacobian_cost=jacobian_cost, method=method or "euler", **settings
        )
    if isinstance(field, str):
        field = _stack_field(sets, depth, field, inner_residuals, final_norm)
        t1 = (1.0 if isinstance(field, ComposedField) else depth) if t1 is None else t1
    if transport_cost is not None:
        field = KineticEnergy(field, transport_cost)
    if jacobian_cost is not None:
        field = JacobianFrobenius(field, jacobian_cost)
    return _encoder(field, depth if t1 is None else t1, method, **settings)


def _stack_field(
    sets: Sequence[Sequence[nn.Module]],
    depth: int,
    field: str,
    inner_residuals: bool,
    final_norm: nn.Module | None = None,
) -> nn.Module:
    """The field of ``depth`` blocks made of ``sets``: a ``WeightSharedField`` over ``[0, depth]`` whose layers
    are split or parallel, or a ``ComposedField``."""
    if field == "composed":
        blocks = [sets[i * len(sets) // depth] for i in range(depth)]
        return ComposedField(blocks, final_norm, inner_residuals=inner_residuals)
    if any(isinstance(sublayer, Sublayer) for branches in sets for sublayer in branches):
        raise ValueError(
            f"these blocks have Sublayers (post-norm, or a skip through a projection), which are no increments of "
            f"a field: field={field!r} cannot read them; use 'discrete', 'composed' or 'node'"
        )
    if field == "evolving":
        if not all(any(isinstance(b, EvolvingAttentionBranch) for b in branches) for branches in sets):
            raise ValueError(
                "field='evolving' needs an EvolvingAttentionBranch in every block; these blocks have vanilla "
                "attention (e.g. timm's, or the Set Transformer's ISAB): use 'split', 'parallel', 'composed' or 'node'"
            )
        return EvolvingAttentionStack([EvolvingAttentionField(*branches) for branches in sets], depth)
    if field not in _SUMS:
        raise ValueError(f"unknown field {field!r}; valid: 'split', 'parallel', 'composed', 'evolving'")
    return WeightSharedField([_SUMS[field](*branches) for branches in sets], depth)


def _encoder(field: nn.Module, t1: float, method: str | None, **solve_options: Any) -> ContinuousDepth:
    """``ContinuousDepth`` over ``[0, t1]``; by default (``method=None``) the discrete stack the field was read from."""
    return ContinuousDepth(field, t1=t1, method=method or _default_method(field), **solve_options)


def _default_method(field: nn.Module) -> str:
    """The method whose unit steps compute the blocks ``field`` was read from, by the kind of field.

    ``"euler"`` for parallel blocks (a field made of :class:`~neuralode_tf.fields.ParallelField` s, whose block is
    one Euler step of the sum, Zhong et al. 2022, eq. 4), although they have parts; ``"lie_trotter"`` for the other
    fields with parts (split blocks, evolving attention: one part after another); ``"euler"`` for fields without
    parts (composed blocks).
    """
    if any(isinstance(module, ParallelField) for module in field.modules()):
        return "euler"
    return "lie_trotter" if parts_of(field) else "euler"


def _named_field(
    field: object, build: Callable[[str], _Built], *, valid: Sequence[str] = FIELDS, **block_settings: Any
) -> _Built | None:
    """What a front-end builds for its ``field`` argument, which every front-end documents in one sentence: "The
    name of a reading of the model's own blocks as continuous depth (...), or a ready-made field module (...)".

    For the name of a reading (one of ``valid``) it is ``build(name)``, e.g. the parameter sets of the model's own
    blocks that :func:`stack_encoder` reads. For a ready-made field it is ``None``, and the front-end's
    ``block_settings`` (its arguments that configure only its own blocks) must be left unset (``None``/``False``).
    """
    if not isinstance(field, str):
        given = [name for name, value in block_settings.items() if value is not None and value is not False]
        if given:
            raise ValueError(f"{given} configure the model's own blocks; with a ready-made field leave them out")
        return None
    if field not in valid:
        raise ValueError(f"unknown field {field!r}; valid: {', '.join(map(repr, valid))} or a ready-made field")
    return build(field)
