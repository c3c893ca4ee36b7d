"""A state's structure, a tensor or a tuple of tensors: its tensors, and states stacked along a new dim 0 (a
trajectory). Shared by the solver and by what reads its trajectories (:class:`~neuralode_tf.ContinuousDepth`)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._typing import State

__all__ = ["leaves", "rebuild", "stack", "unstack"]


def leaves(y: State) -> tuple[Tensor, ...]:
    """The tensors of a state, in order."""
    return y if isinstance(y, tuple) else (y,)


def rebuild(template: State, tensors: tuple[Tensor, ...] | list[Tensor]) -> State:
    """A state with the structure of ``template`` made of ``tensors``."""
    return tuple(tensors) if isinstance(template, tuple) else tensors[0]


def stack(states: list[State]) -> State:
    """Stack a list of states along a new leading (time) dimension."""
    return rebuild(states[0], [torch.stack(xs) for xs in zip(*map(leaves, states))])


def unstack(ys: State) -> list[State]:
    """The states along dim 0 of a stacked state, one by one (the inverse of :func:`stack`)."""
    if isinstance(ys, tuple):
        return [tuple(parts) for parts in zip(*(leaf.unbind(0) for leaf in ys))]
    return list(ys.unbind(0))
