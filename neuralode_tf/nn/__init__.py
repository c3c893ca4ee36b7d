"""Residual branches: each maps ``x`` to an increment, with no skip connection inside."""

from ._kv_cache import KVCache
from .aa_conv import AugmentedConv2d, LogitChain
from .attention import AttentionBranch
from .evolving import EvolvingAttentionBranch
from .mlp import MLPBranch
from .rotary import apply_rotary
from .timm import timm_block_branches

__all__ = [
    "AttentionBranch",
    "AugmentedConv2d",
    "LogitChain",
    "EvolvingAttentionBranch",
    "MLPBranch",
    "timm_block_branches",
    "KVCache",
    "apply_rotary",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
