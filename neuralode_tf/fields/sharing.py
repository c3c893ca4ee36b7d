"""Depth with weight sharing: a D-layer stack built from k independent parameter sets."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .._typing import State
from ..protocols import parts_of
from ._parts import as_field

__all__ = ["WeightSharedField"]


class WeightSharedField(nn.Module):
    """A stack of ``depth`` layers made of ``k = len(layers)`` parameter sets, read as one field on ``[0, depth]``.

    Parameters vary with depth-time ``t`` piecewise constantly: on ``[0, depth]`` the field is

    .. math:: f(t, x) = f_{\\sigma(t)}(x), \\qquad \\sigma(t) = \\min\\big(\\lfloor t\\, k / D \\rfloor,\\; k - 1\\big),

    so set ``j`` covers ``[j D/k, (j+1) D/k)``: consecutive layers share weights. With ``D = 12``,
    ``k = 6``, layers 0-1 use set 0, layers 2-3 set 1, and so on (Zhong et al. 2022, §2 and
    Table 1: 12 layers from 12, 6, 4, 3, 2 or 1 independent sets). Integrated with Euler and step 1
    it is exactly the discrete D-layer stack with that sharing; other methods and step counts
    integrate the same ODE (Zhong et al. compare Euler with RK4).

    At a piece boundary the field takes the right-hand piece; the built-in integrators evaluate a
    stage at the end of a step as the left limit (see :mod:`neuralode_tf.numerics.fixed_grid`), so
    each step stays within one parameter set: every fixed grid has a point on each boundary
    (:attr:`jump_times`), whatever ``steps`` is. Adaptive solves stop at the boundaries too: torchdiffeq
    steps onto them, torchode solves piece by piece, and both evaluate a stage at a boundary as its left limit.

    Reading ``t`` synchronises with the device when a backend passes it on an accelerator (the
    built-in integrators keep it on the CPU). torchode's per-sample solving passes one time per
    sample; each sample then takes the output of its own piece's set. torchode's backsolve adjoint
    evaluates fields under ``vmap``, where a time cannot pick a module, so it is not supported.

    Outside ``[0, D]`` the field continues its end pieces: set 0 before ``0``, set ``k - 1`` after ``D``. With
    several sets that is a choice the trained stack does not make (integrating past the trained depth, e.g. to
    watch tokens cluster, then repeats the last layer's weights), so :func:`~neuralode_tf.solve` warns when the
    interval it is asked for leaves ``[0, D]`` (:attr:`domain`). With one set the field is the same at every ``t``
    and nothing is chosen.

    If every layer has ``parts`` (e.g. :class:`~neuralode_tf.fields.SplitField`), so does this
    field: part ``i`` is the weight-shared stack of the layers' part ``i``, so splitting methods
    work on weight-shared stacks too.

    Args:
        layers: The ``k`` independent layers: fields ``(t, x) -> dx`` or branches ``x -> dx``.
        depth: ``D``, the number of layers of the stack and the length of the time interval.
    """

    def __init__(self, layers: Sequence[nn.Module], depth: float):
        super().__init__()
        if not layers:
            raise ValueError("WeightSharedField needs at least one layer")
        if not (isinstance(depth, (int, float)) and math.isfinite(depth) and depth > 0):
            raise ValueError(f"depth must be a positive number, got {depth!r}")
        self.layers = nn.ModuleList(as_field(layer) for layer in layers)
        self.depth = float(depth)

    def index(self, t: Tensor | float) -> int:
        """``σ(t)``: the parameter set used at time ``t``."""
        k = len(self.layers)
        time = float(t.detach()) if isinstance(t, Tensor) else float(t)
        return min(max(math.floor(time * k / self.depth), 0), k - 1)

    @property
    def domain(self) -> tuple[float, float] | None:
        """``(0, D)``, where the stack's layers are; ``None`` with one set, the same field at every ``t``.
        :func:`~neuralode_tf.solve` warns when asked to integrate outside it."""
        return None if len(self.layers) == 1 else (0.0, self.depth)

    def forward(self, t: Tensor, y: State) -> State:
        if len(self.layers) == 1:  # one set: no time to read (also under vmap, e.g. torchode's backsolve)
            return self.layers[0](t, y)
        if not (isinstance(t, Tensor) and t.numel() > 1):
            return self.layers[self.index(t)](t, y)
        # Per-sample times (torchode): each sample takes the output of the set of its own piece.
        # Every set present runs on the whole batch, so masks bound to the batch keep their shape.
        k = len(self.layers)
        sets = torch.floor(t.detach() * k / self.depth).clamp(0, k - 1).long()
        present = sets.unique().tolist()
        out = self.layers[present[0]](t, y)
        for j in present[1:]:
            out = _select(sets == j, self.layers[j](t, y), out)
        return out

    @property
    def jump_times(self) -> list[float]:
        """Times where the parameters change: ``j D / k`` for ``j = 1 .. k-1``.

        Adaptive torchdiffeq solves step onto them instead of rejecting steps across them.
        """
        k = len(self.layers)
        return [j * self.depth / k for j in range(1, k)]

    @property
    def parts(self) -> tuple[WeightSharedField, ...]:
        """Part ``i`` shares weights across depth like the whole field does (built once, then cached)."""
        cached = self.__dict__.get("_parts")
        if cached is None:
            layer_parts = [parts for parts in map(parts_of, self.layers) if parts is not None]
            if len(layer_parts) < len(self.layers) or len({len(p) for p in layer_parts}) != 1:
                raise AttributeError(
                    "parts: the layers of this WeightSharedField are not all split into the same number of parts"
                )
            cached = tuple(WeightSharedField(group, self.depth) for group in zip(*layer_parts))
            # Kept out of the module tree: the parts reuse the layers' own parameters.
            self.__dict__["_parts"] = cached
        return cached


def _select(rows: Tensor, chosen: State, other: State) -> State:
    """Per sample (leading dimension), ``chosen`` where ``rows`` is True, else ``other``."""

    def pick(a: Tensor, b: Tensor) -> Tensor:
        return torch.where(rows.reshape(-1, *([1] * (a.ndim - 1))), a, b)

    if isinstance(chosen, Tensor) and isinstance(other, Tensor):
        return pick(chosen, other)
    return tuple(map(pick, chosen, other))
