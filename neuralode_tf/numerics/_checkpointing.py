"""Checkpointing schedules of the built-in fixed-grid march: ``solve(..., gradient="checkpoint", checkpoints=c)``.

Backward through ``N`` steps needs each step's activations, last step first. Backprop keeps all of them.
Checkpointing keeps some of the states instead and recomputes the steps after them in backward: a segment of
steps runs under :func:`torch.utils.checkpoint.checkpoint` (non-reentrant), which saves the segment's input
and nothing inside it. Such checkpoints nest: the recomputation of a segment runs the checkpoints inside it,
and only then do these save their inputs. Two schedules, each keeping one step's activations at a time:

* **Recursive halving** (``checkpoints=None``; Chen et al. 2016, sec. 4.3; Griewank 1992): the steps are cut
  in two halves, each checkpointed and cut in two again inside, down to single steps. Backward keeps the
  inputs of the halves along one path of that binary tree, at most ``ceil(log2 N) + 1`` states, so memory
  barely grows with ``N`` (``benchmarks/suite.py``: 1.1x from 8 to 64 steps). A half is recomputed up to
  where its second half starts, so each step runs at most ``1 + log2(N) / 2`` times in backward.
* **Binomial** (``checkpoints=c``; Griewank 1992; Griewank & Walther 2000, revolve): ``c`` states at most.
  Writing ``β(c, r) = C(c + r, c)`` and ``r`` for the least integer with ``N <= β(c, r)``, backward
  recomputes each step at most ``r`` times and ``r N - β(c + 1, r - 1)`` steps in all, the fewest of any
  schedule that keeps ``c`` states (Griewank & Walther 2000). Recursively: the first ``m`` steps
  run under a checkpoint, which keeps the input; the other ``N - m`` are reversed with ``c - 1`` states
  left, then the first ``m`` are recomputed and reversed with ``c``. That costs ``m + T(m, c) + T(N - m, c - 1)``
  steps, which is ``T(N, c) = r N - β(c + 1, r - 1)`` when the first part fits one fewer repetition and the
  rest ``c - 1`` states: ``β(c, r - 2) <= m <= β(c, r - 1)`` and ``β(c - 1, r - 1) <= N - m <= β(c - 1, r)``.
  :func:`recomputed_steps` gives the count. ``c >= N`` keeps every step's activations: backprop, no checkpoint.

The counts assume that every evaluation of the field saves a tensor for backward (any field with a
nonlinearity, or a weight acting on the state): PyTorch stops a recomputation after the last tensor it needs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.checkpoint import checkpoint as _torch_checkpoint

from .._typing import Field, State
from ._state import leaves
from .solution import Stats

__all__ = [
    "Step",
    "Plan",
    "MAX_REPETITIONS",
    "run",
    "checkpointed",
    "repetitions",
    "recomputed_steps",
    "BackwardCounter",
    "count_stored_states",
]

Step = Callable[[float, float, State], State]
Plan = list[tuple[Step, float, float, bool]]
"""The steps of a march: (step function, t, h, whether the step ends a requested interval)."""

T = TypeVar("T")

MAX_REPETITIONS = 64
"""The most times a budget may have a step recomputed. A step recomputed ``r`` times runs inside ``r`` nested
checkpoints, about 6 Python frames each (torch 2.14), so ``r = 64`` takes some 400 of Python's default
recursion limit of 1000 in forward and again in backward. Only tiny budgets go that deep: ``c = 1`` beyond 65
steps, ``c = 2`` beyond 2145."""


def run(plan: Plan, y: State, per_step: bool = False) -> tuple[State, list[State]]:
    """Run the steps of ``plan`` from ``y``, each under a checkpoint of its own with ``per_step``: the last
    state and the states that end requested intervals."""
    ends = []
    for fn, t, h, ends_interval in plan:
        y = _checkpointed_step(fn, t, h, y) if per_step else fn(t, h, y)
        if _PROBES:
            _PROBES[-1].watch(y)
        if ends_interval:
            ends.append(y)
    return y, ends


def checkpointed(plan: Plan, y: State, checkpoints: int | None) -> tuple[State, list[State]]:
    """:func:`run` with checkpointing: recursive halving (``checkpoints=None``) or binomial with at most
    ``checkpoints`` states (fewer than the steps). torch_xla's checkpoint does not nest: there every step is
    checkpointed on its own (``solve`` refuses ``checkpoints`` there)."""
    if leaves(y)[0].device.type == "xla":
        return run(plan, y, per_step=True)
    return _bisected(plan, y) if checkpoints is None else _binomial(plan, checkpoints, y)


def _bisected(plan: Plan, y: State) -> tuple[State, list[State]]:
    """Recursive halving: each half of ``plan`` runs under a checkpoint and is cut in halves again inside."""
    if len(plan) == 1:
        return run(plan, y, per_step=True)
    ends: list[State] = []
    for half in (plan[: len(plan) // 2], plan[len(plan) // 2 :]):
        # A single step is checkpointed by run already; checkpointing it twice would recompute it twice.
        y, half_ends = _bisected(half, y) if len(half) == 1 else _checkpoint(_bisected, half, y)
        ends.extend(half_ends)
    return y, ends


def _binomial(plan: Plan, budget: int, y: State) -> tuple[State, list[State]]:
    """Binomial checkpointing with at most ``budget`` states: checkpointed first parts of :func:`_split`'s
    lengths, one fewer state left after each, and the last step run plainly (its activations kept)."""
    ends: list[State] = []
    while len(plan) > 1:
        m = _split(len(plan), budget)
        y, part_ends = _checkpoint(_binomial, plan[:m], budget, y)
        ends.extend(part_ends)
        plan, budget = plan[m:], budget - 1
    y, last = run(plan, y)
    return y, ends + last


def _beta(c: int, r: int) -> int:
    """``β(c, r) = C(c + r, c)``: the most steps ``c`` states reverse with each step recomputed at most ``r``
    times (0 for ``r < 0``)."""
    return math.comb(c + r, c) if r >= 0 else 0


def repetitions(n: int, c: int) -> int:
    """``r``, the least integer with ``n <= β(c, r)``."""
    r = 0
    while _beta(c, r) < n:
        r += 1
    return r


def _split(n: int, c: int) -> int:
    """Length of the checkpointed first part of ``n > 1`` steps under a budget of ``c`` states: the shortest
    optimal one, ``max(1, β(c, r - 2), n - β(c - 1, r))`` (module docstring)."""
    r = repetitions(n, c)
    return max(1, _beta(c, r - 2), n - _beta(c - 1, r))


def recomputed_steps(n: int, c: int) -> int:
    """Steps that backward recomputes under binomial checkpointing of ``n`` steps with ``c`` states:
    ``r n - β(c + 1, r - 1)``, and 0 for ``c >= n`` (backprop)."""
    if c >= n:
        return 0
    r = repetitions(n, c)
    return r * n - _beta(c + 1, r - 1)


def _checkpoint(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` under a non-reentrant checkpoint, which keeps the state ``args[-1]`` for backward."""
    if _PROBES:
        _PROBES[-1].store(args[-1])
    return _torch_checkpoint(fn, *args, use_reentrant=False)


def _checkpointed_step(fn: Step, t: float, h: float, y: State) -> State:
    """``fn(t, h, y)`` under activation checkpointing.

    torch's checkpoint does not know XLA devices, so there torch_xla's (reentrant) variant runs,
    with the tensors of a tuple state passed one by one as it requires.
    """
    tensors = leaves(y)
    if tensors[0].device.type != "xla":
        return _checkpoint(fn, t, h, y)
    if not any(leaf.requires_grad for leaf in tensors):
        # A reentrant checkpoint whose inputs need no gradient would drop the parameters' gradients.
        return fn(t, h, y)
    from torch_xla.utils.checkpoint import checkpoint as xla_checkpoint

    def flat(*tensors: Tensor) -> State:
        return fn(t, h, tuple(tensors) if isinstance(y, tuple) else tensors[0])

    return xla_checkpoint(flat, *tensors)


class BackwardCounter(torch.nn.Module):
    """Calls the field (or a part of it); once armed, counts each call into ``stats.nfe_backward``."""

    def __init__(self, field: Field, stats: Stats, armed: list[bool] | None = None):
        super().__init__()
        self.field, self.stats = field, stats
        self.armed = armed if armed is not None else [False]

    def forward(self, t: Tensor, y: State) -> State:
        if self.armed[0]:
            self.stats.nfe_backward += 1
        return self.field(t, y)

    @property
    def parts(self) -> list[Field]:
        return [BackwardCounter(p, self.stats, self.armed) for p in self.field.parts]  # type: ignore[attr-defined]


class StoredStates:
    """The most states that checkpoints kept at once during backward (:func:`count_stored_states`).

    Every state a checkpoint gets is noted by its storage (a weak reference); when the gradient of a step's
    output arrives, the noted storages still alive are counted. A checkpoint's input is alive while the
    checkpoint (or the recomputation of an enclosing one) keeps it for backward; a copy that shares its storage
    counts once. A caller's reference keeps a state alive too: ``y0``, and states at requested times.
    """

    def __init__(self) -> None:
        self.peak = 0
        self._noted: dict[int, StorageWeakRef] = {}

    def store(self, y: State) -> None:
        ref = StorageWeakRef(leaves(y)[0].untyped_storage())
        self._noted[ref.cdata] = ref

    def watch(self, y: State) -> None:
        leaf = next((x for x in leaves(y) if x.requires_grad), None)
        if leaf is not None:
            leaf.register_hook(self._count)

    def _count(self, grad: Tensor) -> None:
        self.peak = max(self.peak, sum(not ref.expired() for ref in self._noted.values()))


_PROBES: list[StoredStates] = []


@contextlib.contextmanager
def count_stored_states() -> Iterator[StoredStates]:
    """A test hook: while active (forward and backward both inside), count the states checkpoints keep."""
    probe = StoredStates()
    _PROBES.append(probe)
    try:
        yield probe
    finally:
        _PROBES.remove(probe)
