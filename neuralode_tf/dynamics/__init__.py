"""Depth as a dynamical system: the tools researchers otherwise write by hand, on every model the library reads.

* :mod:`~neuralode_tf.dynamics.trajectories`: the state of every token at any depth, from the one solve of the
  forward (:func:`depth_trajectory`);
* :mod:`~neuralode_tf.dynamics.readouts`: the model's own head at any depth, the logit lens for language models
  (:func:`depth_readout`);
* :mod:`~neuralode_tf.dynamics.jacobian` and :mod:`~neuralode_tf.dynamics.lyapunov`: the field's Jacobian and
  its leading spectrum, and finite-time Lyapunov exponents along a trajectory (Benettin's method);
* :mod:`~neuralode_tf.dynamics.clustering` and :mod:`~neuralode_tf.dynamics.sphere_attention`: token clustering
  over depth, and Geshkovski et al.'s self-attention dynamics on the sphere.
"""

from .clustering import (
    DEFAULT_CLUSTER_TOLERANCE,
    cluster_count,
    mean_pairwise_cosine,
    min_pairwise_cosine,
    pairwise_cosine,
    time_to_one_cluster,
)
from .jacobian import Eigenvalues, EigenvaluesNotConvergedError, field_jacobian, leading_eigenvalues
from .lyapunov import LyapunovSpectrum, lyapunov_spectrum
from .readouts import DepthReadout, depth_readout, readout_for, register_readout
from .sphere_attention import SphereAttentionField, interaction_energy, tangent_projection, uniform_sphere_tokens
from .trajectories import DepthTrajectory, depth_trajectory, find_depth_module

__all__ = [
    "DepthTrajectory",
    "depth_trajectory",
    "find_depth_module",
    "DepthReadout",
    "depth_readout",
    "readout_for",
    "register_readout",
    "field_jacobian",
    "leading_eigenvalues",
    "Eigenvalues",
    "EigenvaluesNotConvergedError",
    "lyapunov_spectrum",
    "LyapunovSpectrum",
    "pairwise_cosine",
    "mean_pairwise_cosine",
    "min_pairwise_cosine",
    "cluster_count",
    "time_to_one_cluster",
    "DEFAULT_CLUSTER_TOLERANCE",
    "SphereAttentionField",
    "uniform_sphere_tokens",
    "tangent_projection",
    "interaction_energy",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
