"""Whole stacks of blocks as one field (OT-Transformer) and single blocks as N-ODE fields (eq. 12).

A transformer block is a sequence of residual sub-layers ``s_1, ..., s_k`` (attention, then the
fully-connected layer; Kan et al. 2025, eqs. 2-3), applied as ``u_0 = x``, ``u_j = s_j(u_{j-1})``,
``B(x) = u_k``. A sub-layer is either a plain residual branch ``b`` (a pre-norm block keeps its
LayerNorm inside ``b``), with ``s(u) = u + b(u)``, or a :class:`Sublayer` with a general skip and a
norm after the sum (post-norm blocks, Lee et al.'s MAB). Kan et al. (2025) and Baier-Reinio & De
Sterck (2020) turn such blocks into fields in two different ways:

* :class:`ComposedField` (OT-Transformer, Kan et al. eq. 7): **one** field for the whole stack,
  ``f = B_D ∘ ... ∘ B_1``, integrated over ``[0, T]``.
* :class:`BlockIncrementField` (N-ODE Transformer, Kan et al. eq. 12): **one field per block**, the
  block whose fully-connected layer has no skip; the ``D`` ODEs are solved one after another
  (:class:`~neuralode_tf.models.NODETransformer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from torch import Tensor, nn

__all__ = ["Sublayer", "ComposedField", "BlockIncrementField"]

Block = nn.Module | Sequence[nn.Module]


class Sublayer(nn.Module):
    """A residual sub-layer with a general skip ``P`` and an optional norm ``N`` after the sum.

    .. math:: s(u) = N\\big(P(u) + b(u)\\big), \\qquad s^\\circ(u) = N\\big(b(u)\\big) \\text{ (skip removed)}

    with ``P`` and ``N`` the identity unless given. Pre-norm blocks need no ``Sublayer`` (their norm is
    inside the branch: ``s(u) = u + b(u)``). Post-norm blocks (Vaswani et al. 2017; Sinkformers' IMDb
    encoder after lyeoni's ``nlp-tutorial``) have ``N`` = LayerNorm; the MAB of Lee et al. (2019,
    their code's ``MAB``) has ``P`` = its query projection ``fc_q`` and ``N`` = LayerNorm. Such a
    sub-layer is no increment ``x -> dx``, so it is never a part of a ``SplitField``; it belongs to
    the blocks of :class:`ComposedField`, :class:`BlockIncrementField` and
    :class:`~neuralode_tf.models.DiscreteStack`.

    Args:
        branch: ``b``, e.g. an :class:`~neuralode_tf.nn.AttentionBranch` or
            :class:`~neuralode_tf.nn.MLPBranch` built with ``prenorm=False``.
        skip: ``P`` (default: the identity).
        norm: ``N`` (default: none).
    """

    def __init__(self, branch: nn.Module, *, skip: nn.Module | None = None, norm: nn.Module | None = None):
        super().__init__()
        self.branch = branch
        self.skip = skip
        self.norm = norm

    def forward(self, u: Tensor, *, residual: bool = True) -> Tensor:
        out = self.branch(u)
        if residual:
            out = out + (u if self.skip is None else self.skip(u))
        return out if self.norm is None else self.norm(out)


def _apply_sublayer(sublayer: nn.Module, u: Tensor, *, residual: bool = True) -> Tensor:
    """``s(u)`` (``residual=True``) or ``s°(u)``: ``u + b(u)`` or ``b(u)`` for a plain branch ``b``, and
    :meth:`Sublayer.forward` for a :class:`Sublayer`."""
    if isinstance(sublayer, Sublayer):
        return sublayer(u, residual=residual)
    return u + sublayer(u) if residual else sublayer(u)


def _is_whole(block: Block) -> TypeGuard[nn.Module]:
    """Whether ``block`` is one module ``x -> B(x)`` with its skips inside, not a sequence of sub-layers."""
    return isinstance(block, nn.Module) and not isinstance(block, nn.ModuleList)


def _branches(block: Block, what: str) -> nn.ModuleList:
    modules = [block] if isinstance(block, nn.Module) and not isinstance(block, nn.ModuleList) else list(block)
    if not modules or not all(isinstance(m, nn.Module) for m in modules):
        raise TypeError(f"{what} must be an nn.Module or a non-empty sequence of nn.Modules, got {block!r}")
    return nn.ModuleList(modules)


class ComposedField(nn.Module):
    """The OT-Transformer field: all blocks of a stack composed into one autonomous vector field.

    .. math:: \\frac{dx}{dt} = f(x) = N\\big(B_D \\circ \\dots \\circ B_1(x)\\big), \\qquad t \\in [0, T]

    (Kan et al. 2025, eq. 7). ``N`` is the optional ``final_norm``: the released code
    (``KelvinKan/OT-Transformer``, ``model.py``) integrates nanoGPT's ``transformer`` module, whose
    final LayerNorm ``ln_f`` then sits inside the field (switched off with all other norms in its
    Shakespeare-char run). The Sinkformers models of the paper's other experiments have no final norm in
    their transformer (the ViT's is part of its head), so their fields have ``N`` = identity.
    Time is not an input, as in the paper and its code. Each block ``B_i`` is built from its
    sub-layers ``s_{i,1}, ..., s_{i,k}`` in one of two conventions:

    * ``inner_residuals=True`` (the released code): each block keeps its skips,
      ``B_i(x) = u_k`` with ``u_j = s_{i,j}(u_{j-1})``, so ``f`` is the discrete transformer
      itself. One Euler step of size 1 then gives ``x + N(B_D ∘ ... ∘ B_1(x))``: the discrete
      transformer's output **plus an extra skip** from its input, never the discrete transformer.
    * ``inner_residuals=False``: the field has no skips, ``B_i = s°_{i,k} ∘ ... ∘ s°_{i,1}`` (for plain
      branches ``b_{i,k} ∘ ... ∘ b_{i,1}``), and the ODE's own ``x + h f(x)`` is the only residual.

    The paper's statement that "a single forward Euler step [with T = 1] recovers the original
    discrete transformer" (Kan et al. §3) therefore holds for ``inner_residuals=False`` and exactly
    when the stack is one plain residual branch without a final norm (``D = 1``, ``k = 1``:
    ``x + b(x)``). For deeper stacks it holds in neither convention. ``tests/test_composed.py``
    asserts both identities.

    Args:
        blocks: The ``D`` blocks, each a sequence of sub-layers (plain residual branches ``x -> dx``
            such as ``(AttentionBranch, MLPBranch)`` or :func:`~neuralode_tf.nn.timm_block_branches` of a
            timm ``Block``, and :class:`Sublayer` s) or one module. A lone module is a whole block
            ``x -> B(x)`` with its skips inside (any pre-defined block) and needs ``inner_residuals=True``;
            put a single branch in a one-element tuple, ``(attention,)``.
        final_norm: A module applied to the composition inside the field (e.g. ``nn.LayerNorm(d)``).
        inner_residuals: Keep each block's skips (default, as the released code) or drop them.
    """

    def __init__(self, blocks: Sequence[Block], final_norm: nn.Module | None = None, *, inner_residuals: bool = True):
        super().__init__()
        if isinstance(blocks, nn.Module) and not isinstance(blocks, (nn.ModuleList, nn.Sequential)):
            raise TypeError(f"blocks must be a sequence of blocks, got one {type(blocks).__name__}; wrap it: [block]")
        blocks = list(blocks)
        if not blocks:
            raise ValueError("ComposedField needs at least one block")
        whole = [i for i, block in enumerate(blocks) if _is_whole(block)]
        if whole and not inner_residuals:
            raise ValueError(
                f"blocks {whole} are whole modules, whose skips cannot be removed; with inner_residuals=False give "
                "each block as a sequence of residual branches, e.g. (attention, mlp)"
            )
        self.blocks = nn.ModuleList(
            block if _is_whole(block) else _branches(block, f"block {i}") for i, block in enumerate(blocks)
        )
        self.final_norm = final_norm
        self.inner_residuals = inner_residuals

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        for block in self.blocks:
            if not isinstance(block, nn.ModuleList):  # a whole block, skips included
                x = block(x)
                continue
            for sublayer in block:
                x = _apply_sublayer(sublayer, x, residual=self.inner_residuals)
        return x if self.final_norm is None else self.final_norm(x)

    def extra_repr(self) -> str:
        return f"inner_residuals={self.inner_residuals}"


class BlockIncrementField(nn.Module):
    """One block whose fully-connected layer has no skip, as the autonomous field of the N-ODE Transformer.

    .. math:: \\hat f(x) = s^\\circ_k(u_{k-1}), \\qquad u_0 = x,\\; u_j = s_j(u_{j-1})

    Kan et al. (2025, eq. 12): ``f̂_i`` is transformer block ``i`` "defined in (2) and (3), except that
    the fully-connected layer (3) has no skip-connection" (after Baier-Reinio & De Sterck 2020). A block
    is its attention sub-layer (eq. 2) followed by its fully-connected sub-layer (eq. 3), so the last of
    two or more sub-layers is the fully-connected one: for a pre-norm block ``(G, F)``,
    ``f̂(x) = F(x + G(x))``; for a post-norm block, ``f̂(x) = N_2(F(N_1(x + G(x))))``.

    A block of one sub-layer has **no** fully-connected layer (the attention-only MNIST ViT of
    Sinkformers and Kan et al.), so nothing loses its skip: ``f̂(x) = x + G(x) = B(x)``. The N-ODE
    Transformer of such a one-block stack is then the OT-Transformer itself (:class:`ComposedField` of
    the same block), as Kan et al. note for MNIST ("N-ODE Transformer and our OT-Transformer share the
    same formulation"); ``tests/test_ot_paper.py`` checks that they are the same function.

    Args:
        branches: The block's sub-layers (a sequence, or one module: a one-sub-layer block).
    """

    def __init__(self, branches: Block):
        super().__init__()
        self.branches = _branches(branches, "branches")

    @property
    def has_feed_forward(self) -> bool:
        """Whether the block has a fully-connected sub-layer (its last one), which loses its skip."""
        return len(self.branches) > 1

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        *inner, last = self.branches
        for sublayer in inner:
            x = _apply_sublayer(sublayer, x)
        return _apply_sublayer(last, x, residual=not self.has_feed_forward)
