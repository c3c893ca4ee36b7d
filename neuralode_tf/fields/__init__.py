"""Vector fields: modules with ``forward(t, y) -> dy/dt``."""

from ._parts import Autonomous, as_field
from .parallel import ParallelField
from .sharing import WeightSharedField
from .split import SplitField

__all__ = ["SplitField", "ParallelField", "WeightSharedField", "Autonomous", "as_field"]
