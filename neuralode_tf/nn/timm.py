"""Adapter from a timm ViT ``Block`` to our residual branches (needs ``timm``)."""

from __future__ import annotations

from torch import nn

__all__ = ["timm_block_branches"]

_REQUIRED = ("norm1", "attn", "ls1", "norm2", "mlp", "ls2")


def timm_block_branches(block: nn.Module) -> tuple[nn.Sequential, nn.Sequential]:
    """The attention and MLP branches of a timm ``Block``, sharing its modules (no copy).

    A timm pre-norm block computes ``x + ls1(attn(norm1(x)))`` then ``+ ls2(mlp(norm2(.)))``
    (drop-path aside). This returns ``Sequential(norm1, attn, ls1)`` and
    ``Sequential(norm2, mlp, ls2)``, so ``SplitField(*timm_block_branches(block))`` stepped once by
    ``lie_trotter`` with Euler and ``h = 1`` equals ``block(x)``.

    Drop-path is left out: inside a vector field it would make ``f(t, x)`` random between the
    stages of one step. Parameters stay shared with ``block``, so training either trains both.

    Raises:
        TypeError: if ``block`` lacks the submodules of timm's ``Block`` (e.g. timm's
            ``ParallelScalingBlock``, which fuses the two branches into one projection).
    """
    missing = [name for name in _REQUIRED if not isinstance(getattr(block, name, None), nn.Module)]
    if missing:
        raise TypeError(
            f"{type(block).__name__} is not a timm Block: it lacks {missing}. Expected the "
            f"submodules {list(_REQUIRED)} of timm.models.vision_transformer.Block"
        )
    norm1, attn, ls1, norm2, mlp, ls2 = (block.get_submodule(name) for name in _REQUIRED)
    return nn.Sequential(norm1, attn, ls1), nn.Sequential(norm2, mlp, ls2)
