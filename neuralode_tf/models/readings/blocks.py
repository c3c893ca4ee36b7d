"""New transformer blocks and their fields: the encoder stack (:func:`transformer_field`) and the decoder stack
(:func:`decoder_field`), shared by the front-ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from torch import nn

from ...fields import (
    EvolvingAttentionField,
    EvolvingAttentionStack,
    StochasticDepth,
    Sublayer,
    WeightSharedField,
)
from ...nn import AttentionBranch, EvolvingAttentionBranch, MLPBranch
from .stack import _SUMS, _stack_field

__all__ = ["transformer_field", "decoder_field", "NORM_PLACEMENTS"]

NORM_PLACEMENTS = ("pre", "shared", "output", "post", "none")
"""Where a block's LayerNorms sit (the ``norm`` of :class:`~neuralode_tf.models.ViT`): ``"pre"`` each branch
normalises its input, ``"shared"`` one norm feeds both branches, ``"output"`` each branch normalises its output,
``"post"`` a norm after each residual sum (no field: read as ``"discrete"``), ``"none"`` no norms."""


def transformer_field(
    dim: int,
    depth: int,
    num_heads: int,
    *,
    mlp_hidden: int | None = None,
    field: str = "split",
    num_sets: int | None = None,
    attention_only: bool = False,
    inner_residuals: bool = True,
    evolving: Mapping[str, Any] | None = None,
    causal: bool = False,
    dropout: float = 0.0,
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
        num_heads: Attention heads; must divide ``dim``.
        mlp_hidden: Hidden width of the MLP (default ``4 * dim``).
        field: ``"split"``, ``"parallel"``, ``"composed"`` or ``"evolving"`` (``"node"`` is a chain of
            fields: :func:`~neuralode_tf.models.stack_encoder`).
        num_sets: Independent parameter sets ``k`` (default ``depth``: no sharing); must divide ``depth``.
        attention_only: Leave out the MLP branch (``dx/dt = G(x)``, the MNIST ViT of Sander et al. 2022
            and Kan et al. 2025).
        inner_residuals: For ``"composed"``: keep each block's skips (as Kan et al.'s code) or not.
        evolving: For ``"evolving"``: keyword arguments of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (``alpha``, ``beta``, ``kernel_size``).
        causal: Causal self-attention (a decoder-only stack): the field at position ``i`` reads positions
            ``≤ i`` only, in every reading, and so does every fixed-grid solve of it
            (:mod:`neuralode_tf.numerics.causality`).
        dropout: Dropout of every vanilla branch (attention weights and output, MLP output), drawn afresh at every
            evaluation in training; with unit steps the discrete stack's dropout.
    """
    evolving = _evolving_settings(field, evolving)
    if evolving is not None and causal:
        evolving = {**evolving, "causal": True}
    attention: dict[str, Any] = dict(causal=True) if causal and evolving is None else {}
    if dropout:
        attention["dropout"] = dropout
    sets = _transformer_sets(
        dim,
        num_heads,
        depth,
        mlp_hidden,
        num_sets,
        attention_only,
        evolving,
        attention=attention or None,
        mlp=dict(dropout=dropout) if dropout else None,
    )
    return _stack_field(sets, depth, field, inner_residuals)


def _evolving_settings(field: object, evolving: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The :class:`~neuralode_tf.nn.EvolvingAttentionBranch` settings of a front-end: a dict for
    ``field="evolving"`` (empty for the branch's defaults), None for any other field, which takes none."""
    if field == "evolving":
        return dict(evolving or {})
    if evolving is not None:
        raise ValueError(f"evolving= configures field='evolving', not field={field!r}")
    return None


def _transformer_sets(
    dim: int,
    num_heads: int,
    depth: int,
    mlp_hidden: int | None,
    num_sets: int | None,
    attention_only: bool,
    evolving: Mapping[str, Any] | None = None,
    *,
    norm: str = "pre",
    activation: Literal["gelu", "relu"] = "gelu",
    attention: Mapping[str, Any] | None = None,
    mlp: Mapping[str, Any] | None = None,
    drop_path: float = 0.0,
) -> list[tuple[nn.Module, ...]]:
    """``num_sets`` (default ``depth``) new blocks ``(attention, MLP)``, or ``(attention,)``.

    * ``norm="pre"`` (default): ``(AttentionBranch, MLPBranch)``, each with its LayerNorm inside, so a
      sub-layer is ``u + b(u)`` (Xiong et al. 2020; ViT); with ``evolving`` settings the attention is an
      ``EvolvingAttentionBranch``.
    * ``norm="post"``: each sub-layer a :class:`~neuralode_tf.fields.Sublayer` ``LN(u + b(u))`` with
      LayerNorm eps ``1e-6`` (Vaswani et al. 2017; Sinkformers' IMDb encoder, after lyeoni's
      ``nlp-tutorial``), the branches built with ``prenorm=False``. Such blocks are no Euler step of a
      field: read them as ``"discrete"``, ``"composed"`` or ``"node"``.
    * ``norm="none"``: the pre-norm blocks without their LayerNorms (``prenorm=False``), ``u + b(u)`` with
      ``b`` the bare branch: the released OT-Transformer code's Shakespeare run, which switches every norm off.
    * ``norm="shared"``: one LayerNorm per block that both bare branches read, ``b(LN u)``; in a parallel block
      ``x + G(LN x) + F(LN x)`` (the parallel block of GPT-J and PaLM).
    * ``norm="output"``: each bare branch followed by its own LayerNorm, ``LN(b(u))`` (Swin V2's res-post-norm);
      in a parallel block ``x + LN_1(G(x)) + LN_2(F(x))``.

    The last two keep every sub-layer an increment ``u + b(u)``, so each block is still one step of a field (they
    are this library's readings of the placements of Zhong et al. 2022, Figure 2, which the paper does not spell out).

    ``activation`` (``"gelu"`` or ``"relu"``) is the MLP's; ``attention`` holds further
    :class:`~neuralode_tf.nn.AttentionBranch` keywords (``head_dim``, ``qkv_bias``, ``out_proj``, ``causal``,
    ...) and ``mlp`` further :class:`~neuralode_tf.nn.MLPBranch` keywords (``bias``, ``norm_bias``, ``dropout``).
    ``drop_path`` > 0 wraps every branch in :class:`~neuralode_tf.fields.StochasticDepth` with that rate at the last
    of the ``depth`` layers (pre-norm-style blocks only: ``"pre"``, ``"shared"``, ``"output"``, ``"none"``).
    """
    num_sets = depth if num_sets is None else num_sets
    if not (isinstance(depth, int) and isinstance(num_sets, int) and 1 <= num_sets <= depth and depth % num_sets == 0):
        raise ValueError(f"num_sets must be a positive divisor of depth={depth!r}, got num_sets={num_sets!r}")
    if norm not in NORM_PLACEMENTS:
        raise ValueError(f"norm must be one of {', '.join(map(repr, NORM_PLACEMENTS))}, got {norm!r}")
    if evolving is not None and (norm != "pre" or attention or drop_path):
        raise ValueError("evolving attention comes with pre-norm blocks and its own attention settings")
    if drop_path and norm == "post":
        raise ValueError("drop_path drops increments of a field; post-norm sub-layers are none")
    prenorm = norm == "pre"

    def placed(branch: nn.Module, shared: nn.Module | None) -> nn.Module:
        if norm == "post":
            return Sublayer(branch, norm=nn.LayerNorm(dim, eps=1e-6))
        if shared is not None:
            branch = nn.Sequential(shared, branch)
        elif norm == "output":
            branch = nn.Sequential(branch, nn.LayerNorm(dim))
        return StochasticDepth(branch, drop_path, depth) if drop_path else branch

    def attend(shared: nn.Module | None) -> nn.Module:
        if evolving is not None:
            return EvolvingAttentionBranch(dim, num_heads, **evolving)
        return placed(AttentionBranch(dim, num_heads, prenorm=prenorm, **dict(attention or {})), shared)

    def feed_forward(shared: nn.Module | None) -> nn.Module:
        return placed(MLPBranch(dim, mlp_hidden, activation=activation, prenorm=prenorm, **dict(mlp or {})), shared)

    def block() -> tuple[nn.Module, ...]:
        shared = nn.LayerNorm(dim) if norm == "shared" else None
        return (attend(shared),) if attention_only else (attend(shared), feed_forward(shared))

    return [block() for _ in range(num_sets)]


def decoder_field(
    dim: int,
    num_heads: int,
    depth: int,
    *,
    num_sets: int | None = None,
    mlp_hidden: int | None = None,
    evolving: Mapping[str, Any] | None = None,
    field: str = "split",
    dropout: float = 0.0,
) -> WeightSharedField | EvolvingAttentionStack:
    """The pre-norm transformer decoder as a field on ``[0, depth]``.

    .. math:: \\frac{dy}{dt} = \\mathrm{CausalSelfAttn}_{\\sigma(t)}(y) + \\mathrm{CrossAttn}_{\\sigma(t)}(y; m)
        + \\mathrm{MLP}_{\\sigma(t)}(y)

    A :class:`~neuralode_tf.fields.WeightSharedField` of ``num_sets`` (default ``depth``) blocks
    ``SplitField(AttentionBranch(causal=True), AttentionBranch(context_dim=dim), MLPBranch)``; the
    encoder memory ``m`` reaches the cross-attention through ``bind(memory=...)``. One
    ``lie_trotter`` Euler step per unit of time is the pre-norm decoder stack of Vaswani et al.
    (2017, §3.1): masked self-attention, then encoder-decoder attention, then the MLP, each added
    to ``y``. Every part is causal in the target positions, so every fixed-grid solve of the field
    is too (exactly: later target tokens change earlier outputs by 0.0); an adaptive solve is not
    (:mod:`neuralode_tf.numerics.causality`; :meth:`~neuralode_tf.models.EncoderDecoder.forward` with
    ``causal_prefixes=True``).

    ``field="parallel"`` reads the same blocks as :class:`~neuralode_tf.fields.ParallelField` s: one Euler step of
    size 1 is ``y + SA(y) + CA(y; m) + F(y)``, every branch reading the same state (Zhong et al. 2022, eq. 4), still
    causal. ``dropout`` is every branch's (:class:`~neuralode_tf.nn.AttentionBranch`,
    :class:`~neuralode_tf.nn.MLPBranch`), drawn afresh at every evaluation in training.

    With ``evolving`` settings (a dict, possibly empty) both attentions are
    :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es with those settings and ``causal=True``: the
    decoder convolutions of Wang et al. (2021, §3.5, Fig. 3(b) and 3(c)), which read no later target
    position, so the field stays causal (with the same proviso on adaptive solves); and the
    field an :class:`~neuralode_tf.fields.EvolvingAttentionStack` carrying both logit maps. The settings
    are used as given; the paper's decoder has no skip connection, ``alpha=0`` (§4.3), which
    :class:`~neuralode_tf.models.Seq2Seq` ``(field="evolving")`` passes.
    """
    if field not in _SUMS:
        raise ValueError(f"decoder_field reads its blocks as 'split' or 'parallel', not {field!r}")
    if evolving is not None and (field != "split" or dropout):
        raise ValueError("an evolving decoder's blocks are read as 'split' and take no dropout")
    if evolving is None:
        blocks = [
            _SUMS[field](
                AttentionBranch(dim, num_heads, causal=True, dropout=dropout),
                AttentionBranch(dim, num_heads, context_dim=dim, dropout=dropout),
                MLPBranch(dim, mlp_hidden, dropout=dropout),
            )
            for _ in range(num_sets or depth)
        ]
        return WeightSharedField(blocks, depth)
    layers = [
        EvolvingAttentionField(
            EvolvingAttentionBranch(dim, num_heads, causal=True, **evolving),
            EvolvingAttentionBranch(dim, num_heads, causal=True, cross_attention=True, **evolving),
            MLPBranch(dim, mlp_hidden),
        )
        for _ in range(num_sets or depth)
    ]
    return EvolvingAttentionStack(layers, depth)
