"""Whole stacks of blocks as one field (OT-Transformer) and single blocks without their outer skip (N-ODE).

A transformer block is a sequence of residual branches ``b_1, ..., b_k`` (attention, MLP), applied
as ``u_0 = x``, ``u_j = u_{j-1} + b_j(u_{j-1})``, ``B(x) = u_k``. Kan et al. (2025) and Baier-Reinio
& De Sterck (2020) turn such blocks into fields in two different ways:

* :class:`ComposedField` (OT-Transformer, Kan et al. eq. 7): **one** field for the whole stack,
  ``f = B_D ∘ ... ∘ B_1``, integrated over ``[0, T]``.
* :class:`BlockIncrementField` (N-ODE Transformer, Kan et al. eq. 12): **one field per block**, the
  block without its outer skip, ``f̂_i(x) = b_k(u_{k-1})``; the ``D`` ODEs are solved one after
  another (:class:`~neuralode_tf.models.NODETransformer`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

__all__ = ["ComposedField", "BlockIncrementField"]

Block = nn.Module | Sequence[nn.Module]


def _branches(block: Block, what: str) -> nn.ModuleList:
    modules = [block] if isinstance(block, nn.Module) else list(block)
    if not modules or not all(isinstance(m, nn.Module) for m in modules):
        raise TypeError(f"{what} must be an nn.Module or a non-empty sequence of nn.Modules, got {block!r}")
    return nn.ModuleList(modules)


def _with_skips(branches: nn.ModuleList, x: Tensor) -> Tensor:
    """``u_k`` of ``u_j = u_{j-1} + b_j(u_{j-1})``, ``u_0 = x``."""
    for branch in branches:
        x = x + branch(x)
    return x


class ComposedField(nn.Module):
    """The OT-Transformer field: all blocks of a stack composed into one autonomous vector field.

    .. math:: \\frac{dx}{dt} = f(x) = N\\big(B_D \\circ \\dots \\circ B_1(x)\\big), \\qquad t \\in [0, T]

    (Kan et al. 2025, eq. 7; ``N`` is the optional ``final_norm``, the released code's ``ln_f``,
    which sits inside the field). Time is not an input, as in the paper and its code. Each block
    ``B_i`` is built from its residual branches ``b_{i,1}, ..., b_{i,k}`` in one of two conventions:

    * ``inner_residuals=True`` (the released code): each block keeps its skips,
      ``B_i(x) = u_k`` with ``u_j = u_{j-1} + b_{i,j}(u_{j-1})``, so ``f`` is the discrete transformer
      itself. One Euler step of size 1 then gives ``x + N(B_D ∘ ... ∘ B_1(x))``: the discrete
      transformer's output **plus an extra skip** from its input, never the discrete transformer.
    * ``inner_residuals=False``: the field has no skips, ``B_i = b_{i,k} ∘ ... ∘ b_{i,1}``, and the
      ODE's own ``x + h f(x)`` is the only residual. One Euler step of size 1 gives
      ``x + N(b_{D,k} ∘ ... ∘ b_{1,1}(x))``.

    The paper's statement that "a single forward Euler step [with T = 1] recovers the original
    discrete transformer" (Kan et al. §3) therefore holds for ``inner_residuals=False`` and exactly
    when the stack is one residual branch without a final norm (``D = 1``, ``k = 1``:
    ``x + b(x)``, the attention-only MNIST ViT, for which the paper also notes that the OT and
    N-ODE Transformers coincide). For deeper stacks it holds in neither convention.
    ``tests/test_composed.py`` asserts both identities.

    Args:
        blocks: The ``D`` blocks, each a sequence of residual branches ``x -> dx`` (e.g.
            ``(AttentionBranch, MLPBranch)``, or :func:`~neuralode_tf.nn.timm_block_branches` of a
            timm ``Block``) or one module. A lone module is a whole block ``x -> B(x)`` with its
            skips inside (any pre-defined block) and needs ``inner_residuals=True``; put a single
            branch in a one-element tuple, ``(attention,)``.
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
        whole = [
            i for i, block in enumerate(blocks) if isinstance(block, nn.Module) and not isinstance(block, nn.ModuleList)
        ]
        if whole and not inner_residuals:
            raise ValueError(
                f"blocks {whole} are whole modules, whose skips cannot be removed; with inner_residuals=False give "
                "each block as a sequence of residual branches, e.g. (attention, mlp)"
            )
        self.blocks = nn.ModuleList(
            block if i in whole else _branches(block, f"block {i}") for i, block in enumerate(blocks)
        )
        self.final_norm = final_norm
        self.inner_residuals = inner_residuals

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        for block in self.blocks:
            if not isinstance(block, nn.ModuleList):  # a whole block, skips included
                x = block(x)
            elif self.inner_residuals:
                x = _with_skips(block, x)
            else:
                for branch in block:
                    x = branch(x)
        return x if self.final_norm is None else self.final_norm(x)

    def extra_repr(self) -> str:
        return f"inner_residuals={self.inner_residuals}"


class BlockIncrementField(nn.Module):
    """One block without its outer skip, as the autonomous field of the N-ODE Transformer.

    .. math:: \\hat f(x) = b_k(u_{k-1}), \\qquad u_0 = x,\\; u_j = u_{j-1} + b_j(u_{j-1})

    i.e. the block ``B(x) = u_{k-1} + b_k(u_{k-1})`` with the last skip removed (Baier-Reinio & De
    Sterck 2020; Kan et al. 2025, eq. 12: "the fully-connected layer (3) has no skip-connection").
    For a pre-norm block ``(attention G, MLP F)`` it is ``F(x + G(x))``; for an attention-only
    block it is ``G(x)``.

    Args:
        branches: The block's residual branches ``b_1, ..., b_k`` (a sequence, or one module).
    """

    def __init__(self, branches: Block):
        super().__init__()
        self.branches = _branches(branches, "branches")

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        *inner, last = self.branches
        for branch in inner:
            x = x + branch(x)
        return last(x)
