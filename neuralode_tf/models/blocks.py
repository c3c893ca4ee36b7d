"""Transformer stacks as fields, shared by the front-ends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from ..continuous import ContinuousDepth
from ..fields import ParallelField, SplitField, WeightSharedField
from ..nn import AttentionBranch, MLPBranch

__all__ = ["transformer_field"]

_FIELDS = {"split": SplitField, "parallel": ParallelField}


def transformer_field(
    dim: int,
    depth: int,
    heads: int,
    *,
    mlp_hidden: int | None = None,
    field: str = "split",
    num_sets: int | None = None,
    attention_only: bool = False,
) -> WeightSharedField:
    """The field of a ``depth``-layer pre-norm transformer stack on ``[0, depth]``, built from new branches.

    Each parameter set is an :class:`~neuralode_tf.nn.AttentionBranch` ``G`` and an
    :class:`~neuralode_tf.nn.MLPBranch` ``F`` (hidden width ``mlp_hidden``, default ``4 * dim``), read as

    * ``field="split"``: :class:`~neuralode_tf.fields.SplitField` ``(G, F)``: one Lie-Trotter Euler
      step of size 1 is the standard block ``x + G(x)``, then ``+ F(.)`` (Lu et al. 2019);
    * ``field="parallel"``: :class:`~neuralode_tf.fields.ParallelField` ``(G, F)``: one Euler step
      of size 1 is the parallel block ``x + G(x) + F(x)`` (Zhong et al. 2022, eq. 4).

    Both are the ODE ``dx/dt = G_σ(t)(x) + F_σ(t)(x)`` of Zhong et al. (eq. 3), with the ``num_sets``
    parameter sets spread over depth by :class:`~neuralode_tf.fields.WeightSharedField` (consecutive
    groups of ``depth / num_sets`` layers share one set; Zhong et al., Table 1).

    Args:
        dim: Token width ``d``.
        depth: Number of layers ``D``: the field lives on ``[0, D]``, one unit of time per layer.
        heads: Attention heads; must divide ``dim``.
        mlp_hidden: Hidden width of the MLP (default ``4 * dim``).
        field: ``"split"`` or ``"parallel"``.
        num_sets: Independent parameter sets ``k`` (default ``depth``: no sharing); must divide ``depth``.
        attention_only: Leave out the MLP branch (``dx/dt = G(x)``, the MNIST ViT of Sander et al. 2022
            and Kan et al. 2025).
    """
    num_sets = depth if num_sets is None else num_sets
    if not (isinstance(depth, int) and isinstance(num_sets, int) and 1 <= num_sets <= depth and depth % num_sets == 0):
        raise ValueError(f"num_sets must be a positive divisor of depth={depth!r}, got num_sets={num_sets!r}")
    sets = [
        (AttentionBranch(dim, heads),) if attention_only else (AttentionBranch(dim, heads), MLPBranch(dim, mlp_hidden))
        for _ in range(num_sets)
    ]
    return _stack_field(sets, depth, field)


def _stack_field(sets: Sequence[Sequence[nn.Module]], depth: int, field: str) -> WeightSharedField:
    """``WeightSharedField`` over ``[0, depth]`` whose layers combine each set's branches as ``field`` says."""
    if field not in _FIELDS:
        later = " ('composed', the composition of all blocks as one field, is not implemented yet)"
        raise ValueError(
            f"unknown field {field!r}; valid: {', '.join(map(repr, _FIELDS))}{later if field == 'composed' else ''}"
        )
    return WeightSharedField([_FIELDS[field](*branches) for branches in sets], depth)


def _encoder(field: nn.Module, depth: float, method: str | None, **solve_kwargs: Any) -> ContinuousDepth:
    """``ContinuousDepth`` over ``[0, depth]``; by default the discrete stack the field was read from.

    ``method=None`` picks ``"lie_trotter"`` for a field with ``parts`` and ``"euler"`` otherwise, which
    with the default unit steps compute the residual blocks themselves.
    """
    if method is None:
        method = "lie_trotter" if getattr(field, "parts", None) else "euler"
    return ContinuousDepth(field, t1=depth, method=method, **solve_kwargs)
