"""Transformer stacks as fields and continuous-depth encoders, shared by the front-ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from ..continuous import ContinuousDepth
from ..fields import (
    ComposedField,
    EvolvingAttentionField,
    EvolvingAttentionStack,
    KineticEnergy,
    ParallelField,
    SplitField,
    Sublayer,
    WeightSharedField,
)
from ..nn import AttentionBranch, EvolvingAttentionBranch, MLPBranch
from .discrete import DiscreteStack
from .node import NODETransformer

__all__ = ["FIELDS", "transformer_field", "stack_encoder"]

FIELDS = ("split", "parallel", "composed", "node", "evolving", "discrete")
"""The readings of a stack of blocks as continuous depth, and the discrete stack, by name (:func:`stack_encoder`)."""

_SUMS = {"split": SplitField, "parallel": ParallelField}


def transformer_field(
    dim: int,
    depth: int,
    heads: int,
    *,
    mlp_hidden: int | None = None,
    field: str = "split",
    num_sets: int | None = None,
    attention_only: bool = False,
    inner_residuals: bool = True,
    evolving: Mapping[str, Any] | None = None,
) -> nn.Module:
    """The field of a ``depth``-layer pre-norm transformer stack, built from new branches.

    Each parameter set is an :class:`~neuralode_tf.nn.AttentionBranch` ``G`` and an
    :class:`~neuralode_tf.nn.MLPBranch` ``F`` (hidden width ``mlp_hidden``, default ``4 * dim``), read as

    * ``field="split"``: :class:`~neuralode_tf.fields.SplitField` ``(G, F)``: one Lie-Trotter Euler
      step of size 1 is the standard block ``x + G(x)``, then ``+ F(.)`` (Lu et al. 2019);
    * ``field="parallel"``: :class:`~neuralode_tf.fields.ParallelField` ``(G, F)``: one Euler step
      of size 1 is the parallel block ``x + G(x) + F(x)`` (Zhong et al. 2022, eq. 4).

    Both are the ODE ``dx/dt = G_σ(t)(x) + F_σ(t)(x)`` on ``[0, depth]`` of Zhong et al. (eq. 3), with
    the ``num_sets`` parameter sets spread over depth by :class:`~neuralode_tf.fields.WeightSharedField`
    (consecutive groups of ``depth / num_sets`` layers share one set; Zhong et al., Table 1).

    * ``field="composed"``: :class:`~neuralode_tf.fields.ComposedField` of the ``depth`` blocks, one
      autonomous field for the whole stack, to integrate over ``[0, T]`` (OT-Transformer, Kan et al.
      2025), with or without ``inner_residuals``.
    * ``field="evolving"``: ``G`` is an :class:`~neuralode_tf.nn.EvolvingAttentionBranch` (settings
      ``evolving``, e.g. ``{"alpha": 0.5, "beta": 0.5, "kernel_size": 3}``) and the stack an
      :class:`~neuralode_tf.fields.EvolvingAttentionStack` on the augmented state ``(x, A)``: one
      Lie-Trotter Euler step of size 1 per layer is the EA-Transformer (Wang et al. 2021, eq. 4).

    Args:
        dim: Token width ``d``.
        depth: Number of layers ``D``: the field lives on ``[0, D]``, one unit of time per layer.
        heads: Attention heads; must divide ``dim``.
        mlp_hidden: Hidden width of the MLP (default ``4 * dim``).
        field: ``"split"``, ``"parallel"``, ``"composed"`` or ``"evolving"`` (``"node"`` is a chain of
            fields: :func:`stack_encoder`).
        num_sets: Independent parameter sets ``k`` (default ``depth``: no sharing); must divide ``depth``.
        attention_only: Leave out the MLP branch (``dx/dt = G(x)``, the MNIST ViT of Sander et al. 2022
            and Kan et al. 2025).
        inner_residuals: For ``"composed"``: keep each block's skips (as Kan et al.'s code) or not.
        evolving: For ``"evolving"``: keyword arguments of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (``alpha``, ``beta``, ``kernel_size``).
    """
    sets = _transformer_sets(
        dim, heads, depth, mlp_hidden, num_sets, attention_only, _evolving_settings(field, evolving)
    )
    return _stack_field(sets, depth, field, inner_residuals)


def _evolving_settings(field: str | nn.Module, evolving: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The :class:`~neuralode_tf.nn.EvolvingAttentionBranch` settings of a front-end: a dict for
    ``field="evolving"`` (empty for the branch's defaults), None for any other field, which takes none."""
    if field == "evolving":
        return dict(evolving or {})
    if evolving is not None:
        raise ValueError(f"evolving= configures field='evolving', not field={field!r}")
    return None


def _transformer_sets(
    dim: int,
    heads: int,
    depth: int,
    mlp_hidden: int | None,
    num_sets: int | None,
    attention_only: bool,
    evolving: Mapping[str, Any] | None = None,
    *,
    norm: str = "pre",
    activation: str = "gelu",
    attention: Mapping[str, Any] | None = None,
) -> list[tuple[nn.Module, ...]]:
    """``num_sets`` (default ``depth``) new blocks ``(attention, MLP)``, or ``(attention,)``.

    * ``norm="pre"`` (default): ``(AttentionBranch, MLPBranch)``, each with its LayerNorm inside, so a
      sub-layer is ``u + b(u)`` (Xiong et al. 2020; ViT); with ``evolving`` settings the attention is an
      ``EvolvingAttentionBranch``.
    * ``norm="post"``: each sub-layer a :class:`~neuralode_tf.fields.Sublayer` ``LN(u + b(u))`` with
      LayerNorm eps ``1e-6`` (Vaswani et al. 2017; Sinkformers' IMDb encoder, after lyeoni's
      ``nlp-tutorial``), the branches built with ``prenorm=False``. Such blocks are no Euler step of a
      field: read them as ``"discrete"``, ``"composed"`` or ``"node"``.

    ``activation`` (``"gelu"`` or ``"relu"``) is the MLP's; ``attention`` holds further
    :class:`~neuralode_tf.nn.AttentionBranch` keywords (``head_dim``, ``qkv_bias``, ``out_proj``).
    """
    num_sets = depth if num_sets is None else num_sets
    if not (isinstance(depth, int) and isinstance(num_sets, int) and 1 <= num_sets <= depth and depth % num_sets == 0):
        raise ValueError(f"num_sets must be a positive divisor of depth={depth!r}, got num_sets={num_sets!r}")
    if norm not in ("pre", "post"):
        raise ValueError(f"norm must be 'pre' or 'post', got {norm!r}")
    if evolving is not None and (norm != "pre" or attention):
        raise ValueError("evolving attention comes with pre-norm blocks and its own attention settings")
    prenorm = norm == "pre"

    def sublayer(branch: nn.Module) -> nn.Module:
        return branch if prenorm else Sublayer(branch, norm=nn.LayerNorm(dim, eps=1e-6))

    def attend() -> nn.Module:
        if evolving is not None:
            return EvolvingAttentionBranch(dim, heads, **evolving)
        return sublayer(AttentionBranch(dim, heads, prenorm=prenorm, **dict(attention or {})))

    def mlp() -> nn.Module:
        return sublayer(MLPBranch(dim, mlp_hidden, activation=activation, prenorm=prenorm))

    return [(attend(),) if attention_only else (attend(), mlp()) for _ in range(num_sets)]


def stack_encoder(
    field: str | nn.Module,
    depth: int,
    sets: Sequence[Sequence[nn.Module]] | None = None,
    *,
    inner_residuals: bool = True,
    final_norm: nn.Module | None = None,
    t1: float | None = None,
    transport_cost: float | None = None,
    method: str | None = None,
    steps: int | None = None,
    step_size: float | None = None,
    **solve_kwargs: Any,
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
    Give ``steps`` for more steps (e.g. 20 Euler steps on ``[0, 1]`` in Kan et al.'s MNIST experiment).

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
        method, steps, step_size, **solve_kwargs: Solve settings (:class:`~neuralode_tf.ContinuousDepth`).
    """
    if field not in FIELDS and not isinstance(field, nn.Module):
        raise ValueError(f"unknown field {field!r}; valid: {', '.join(map(repr, FIELDS))} or a field module")
    if field != "composed" and (not inner_residuals or final_norm is not None):
        raise ValueError(f"inner_residuals=False and final_norm apply to field='composed' only, not to {field!r}")
    if isinstance(field, str) and not sets:
        raise ValueError(f"field={field!r} needs the parameter sets of the blocks")
    if field == "evolving" and transport_cost is not None:
        raise ValueError("transport_cost is not supported with field='evolving' (its state carries logit maps)")
    settings = dict(steps=steps, step_size=step_size, **solve_kwargs)
    if field == "discrete":
        ode = dict(settings, t1=t1, transport_cost=transport_cost, method=method)
        given = [k for k, v in ode.items() if v is not None]
        if given:
            raise ValueError(f"field='discrete' is no ODE and takes no {given}")
        return DiscreteStack([sets[i * len(sets) // depth] for i in range(depth)])
    if field == "node":
        blocks = [sets[i * len(sets) // depth] for i in range(depth)]
        t1 = 1.0 if t1 is None else t1
        return NODETransformer(blocks, t1, transport_cost=transport_cost, method=method or "euler", **settings)
    if isinstance(field, str):
        field = _stack_field(sets, depth, field, inner_residuals, final_norm)
        t1 = (1.0 if isinstance(field, ComposedField) else depth) if t1 is None else t1
    if transport_cost is not None:
        field = KineticEnergy(field, transport_cost)
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


def _encoder(field: nn.Module, t1: float, method: str | None, **solve_kwargs: Any) -> ContinuousDepth:
    """``ContinuousDepth`` over ``[0, t1]``; by default the discrete stack the field was read from.

    ``method=None`` picks ``"lie_trotter"`` for a field with ``parts`` and ``"euler"`` otherwise, which
    with the default unit steps compute the residual blocks themselves.
    """
    if method is None:
        method = "lie_trotter" if getattr(field, "parts", None) else "euler"
    return ContinuousDepth(field, t1=t1, method=method, **solve_kwargs)
