"""The states of a model's tokens along depth-time: one solve of the model's own ODE, read at any depth.

A model whose stack of blocks is a :class:`~neuralode_tf.ContinuousDepth` computes its features from the solution of

.. math:: \\frac{dx}{dt} = f(t, x), \\qquad x(t_0) = x_0, \\qquad t \\in [t_0, t_1],

where ``x_0`` is what the model's front-end gives the depth module (the embedded tokens, patches, ...) and ``f``
the module's field. :func:`depth_trajectory` returns ``x(t)`` at each requested depth-time. At an integer depth
``k`` of a stack read with one unit Lie-Trotter (or Euler) step per block, the default of the converted Hugging Face
models and the front-ends, ``x(k)`` is the output of block ``k``, computed exactly as the discrete network computes
it; ``x(t_0)`` is the embedding. Between steps the state is the solve's dense output, the cubic Hermite interpolant
of :mod:`neuralode_tf.numerics.dense`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..continuous import ContinuousDepth
from ..numerics import InvalidTimesError, Stats

__all__ = ["DepthTrajectory", "depth_trajectory", "find_depth_module"]


@dataclass(frozen=True, eq=False)
class DepthTrajectory:
    """The state of every token at each requested depth-time.

    Attributes:
        t: The depth-times, a 1-D tensor (the caller's tensor, or a float64 tensor on the states' device).
        states: ``x(t_i)`` stacked along a new dim 0: ``(len(t), *x.shape)``.
        stats: The :class:`~neuralode_tf.Stats` of the one solve behind them (``nfe`` of the steps, ``nfe_dense``
            of the dense output; a copy), or ``None`` if the module kept none.
        conditioning: The keyword arguments the model passed to its depth module (e.g. ``key_padding_mask``, True at
            padding; ``rotary``), which the solve used too.
    """

    t: Tensor
    states: Tensor
    stats: Stats | None
    conditioning: Mapping[str, Any]


class _InitialStateCaught(Exception):
    """Raised by the pre-hook to stop the model's forward once its depth module's inputs are known."""

    def __init__(self, x0: Any, conditioning: dict[str, Any]):
        super().__init__("the depth module's initial state was caught")
        self.x0, self.conditioning = x0, conditioning


def find_depth_module(model: nn.Module, depth_module: nn.Module | str | None = None) -> ContinuousDepth:
    """The :class:`~neuralode_tf.ContinuousDepth` of ``model`` whose trajectory is asked for.

    Args:
        model: Any module holding ContinuousDepth modules (``model`` itself may be one).
        depth_module: ``None``: the model's only ContinuousDepth; a name (``"encoder"``, ``"decoder"``, as
            ``model.get_submodule`` takes it); or the module itself, which must be one of ``model``'s.

    Raises:
        ValueError: ``model`` holds none, several and ``depth_module`` is ``None``, or ``depth_module`` is not one
            of them; the message names the candidates.
    """
    candidates = {name: module for name, module in model.named_modules() if isinstance(module, ContinuousDepth)}
    names = ", ".join(repr(name) if name else "'' (the model itself)" for name in candidates) or "none"
    if isinstance(depth_module, nn.Module):
        if isinstance(depth_module, ContinuousDepth) and any(m is depth_module for m in candidates.values()):
            return depth_module
        raise ValueError(f"depth_module is not one of the ContinuousDepth modules of {type(model).__name__}: {names}")
    if isinstance(depth_module, str):
        if depth_module not in candidates:
            raise ValueError(
                f"{type(model).__name__} has no ContinuousDepth named {depth_module!r}; its ContinuousDepth modules "
                f"are: {names}"
            )
        return candidates[depth_module]
    if depth_module is not None:
        raise TypeError(f"depth_module must be None, a name or a module, got {type(depth_module).__name__}")
    if len(candidates) != 1:
        problem = "holds no ContinuousDepth module" if not candidates else "holds several ContinuousDepth modules"
        raise ValueError(f"{type(model).__name__} {problem} ({names}): name the one to read with depth_module=...")
    return next(iter(candidates.values()))


def depth_trajectory(
    model: nn.Module,
    t: Sequence[float] | Tensor,
    *args: Any,
    depth_module: nn.Module | str | None = None,
    **kwargs: Any,
) -> DepthTrajectory:
    """The state ``x(t)`` of every token at each depth-time in ``t``, for the inputs ``model(*args, **kwargs)``.

    ``x`` solves ``dx/dt = f(t, x)`` on ``[t_0, t_1]`` from ``x(t_0)``, the tensor the model's forward passes to its
    depth module (module docstring). The model's forward runs up to that call, where a forward pre-hook takes
    ``x(t_0)`` and the conditioning (padding mask, rotary angles, memory) and stops it before any field evaluation;
    then :meth:`~neuralode_tf.ContinuousDepth.trajectory` makes one dense solve with the module's own settings.
    At times that are step boundaries (an integer depth of a stack solved with unit Lie-Trotter or Euler steps, where
    ``x(k)`` is the output of block ``k``; and ``t_0``, ``t_1``) this costs exactly the field evaluations of the
    model's forward solve; a depth inside a step adds at most two per step touched (``stats.nfe_dense``). The states
    carry gradients to the parameters and inputs when grad mode is on. Only the first call of the depth module in
    the forward is read, and the hook is removed whatever happens.

    Args:
        model: Any model whose forward calls ``depth_module`` (the front-ends, a model from
            :func:`~neuralode_tf.models.from_transformers` or :func:`~neuralode_tf.models.continuous_from_timm`).
        t: Depth-times, a 1-D sequence or tensor within ``[t_0, t_1]`` of the depth module, in any order.
        *args, **kwargs: The inputs of ``model``'s forward.
        depth_module: Which ContinuousDepth to read (:func:`find_depth_module`); needed when there are several
            (``"encoder"`` or ``"decoder"`` of a :class:`~neuralode_tf.models.Seq2Seq`).

    Raises:
        ~neuralode_tf.numerics.InvalidTimesError: ``t`` is not 1-D, empty, not finite or outside ``[t_0, t_1]``
            (a ``ValueError``).
        ValueError: no or several ContinuousDepth modules (:func:`find_depth_module`).
        RuntimeError: the forward returned without calling the depth module.
    """
    module = find_depth_module(model, depth_module)
    _check_depth_times(t, module.t0, module.t1)
    x0, conditioning = _initial_state(model, module, args, kwargs)
    states = module.trajectory(x0, t, **conditioning)
    if not isinstance(states, Tensor):
        raise TypeError(f"depth_trajectory reads tensor states; the depth module's state is {type(states).__name__}")
    times = t if isinstance(t, Tensor) else torch.tensor([float(v) for v in t], dtype=torch.float64)
    stats = None if module.stats is None else dataclasses.replace(module.stats)
    return DepthTrajectory(times.to(states.device), states, stats, conditioning)


def _initial_state(
    model: nn.Module, module: ContinuousDepth, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``(x0, conditioning)``: what ``model(*args, **kwargs)`` passes to ``module``, caught before it solves."""

    def catch(_: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any]) -> None:
        conditioning = dict(hook_kwargs)
        x0 = hook_args[0] if hook_args else conditioning.pop("x")
        raise _InitialStateCaught(x0, conditioning)

    handle = module.register_forward_pre_hook(catch, with_kwargs=True)
    try:
        model(*args, **kwargs)
    except _InitialStateCaught as caught:
        return caught.x0, caught.conditioning
    finally:
        handle.remove()
    raise RuntimeError(f"{type(model).__name__}'s forward returned without calling its depth module")


def _check_depth_times(t: Sequence[float] | Tensor, t0: float, t1: float) -> None:
    """Raise ``InvalidTimesError`` unless ``t`` is a non-empty 1-D sequence of finite times within ``[t0, t1]``."""
    if isinstance(t, Tensor):
        if t.ndim != 1:
            raise InvalidTimesError(f"t must be a 1-D sequence of depth-times, got a tensor of shape {tuple(t.shape)}")
        values = [float(v) for v in t.detach().cpu().tolist()]
    else:
        try:
            values = [float(v) for v in t]
        except (TypeError, ValueError) as error:
            raise InvalidTimesError(f"t must be a 1-D sequence of depth-times (numbers), got {t!r}") from error
    if not values:
        raise InvalidTimesError("t is empty: ask for at least one depth-time")
    outside = [v for v in values if not (math.isfinite(v) and t0 <= v <= t1)]
    if outside:
        raise InvalidTimesError(
            f"depth-times must be finite and within the depth module's [t0, t1] = [{t0:g}, {t1:g}]; got {outside[:5]}"
        )
