"""Vector fields: modules with ``forward(t, y) -> dy/dt``."""

from ._parts import Autonomous, as_field
from .composed import BlockIncrementField, ComposedField, Sublayer
from .evolving import EvolvingAttentionField, EvolvingAttentionStack
from .jacobian_cost import JacobianFrobenius
from .kinetic import TRANSPORT_CONVENTIONS, KineticEnergy
from .parallel import ParallelField
from .sharing import WeightSharedField
from .split import SplitField
from .stochastic_depth import StochasticDepth
from .transevolve import RandomFeedForward, TransEvolveAttention, TransEvolveDecoderField, TransEvolveField

__all__ = [
    "SplitField",
    "ParallelField",
    "WeightSharedField",
    "StochasticDepth",
    "ComposedField",
    "BlockIncrementField",
    "Sublayer",
    "EvolvingAttentionField",
    "EvolvingAttentionStack",
    "KineticEnergy",
    "TRANSPORT_CONVENTIONS",
    "JacobianFrobenius",
    "Autonomous",
    "as_field",
    "TransEvolveField",
    "TransEvolveDecoderField",
    "TransEvolveAttention",
    "RandomFeedForward",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
