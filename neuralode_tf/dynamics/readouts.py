"""Readouts at any depth: the model's own head applied to the state ``x(t)`` (the logit lens, in continuous depth).

A model reads its prediction off the end of its depth, ``y = H(x(t_1))``, with ``H`` its final norm, pooling and head.
The readout at depth ``t`` applies the same ``H`` to the state there,

.. math:: y(t) = H\\big(x(t)\\big), \\qquad t \\in [t_0, t_1],

so ``y(t_1)`` is the model's output. For a language model ``H(x) = W_U N(x)`` (final norm ``N``, unembedding
``W_U``) and ``y(t)`` is the *logit lens* (nostalgebraist, "interpreting GPT: the logit lens", 2020) at any
depth-time, not only after whole blocks. :func:`depth_readout` reads it at the depths of one solve
(:func:`~neuralode_tf.dynamics.trajectories.depth_trajectory`) and measures how far each is from the final
prediction ``p = softmax(y(t_1))``, per position (a token, or a sequence for a classifier):

.. math::

    \\mathrm{KL}\\big(p \\,\\|\\, q_t\\big) = \\sum_v p_v \\big(\\log p_v - \\log q_{t,v}\\big), \\quad
    q_t = \\mathrm{softmax}\\big(y(t)\\big), \\qquad
    \\mathrm{agreement}(t) = \\mathbb{1}\\big[\\arg\\max_v q_{t,v} = \\arg\\max_v p_v\\big],

each averaged over the positions (the real tokens only, when the model was given a padding mask). Both are 0 and 1
at ``t_1``. Heads are found by the model's type in a registry (:func:`register_readout`): one readout per kind of
model, which applies that model's own modules, in eval mode as the caller left them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..models.converters.huggingface import ContinuousTransformersModel
from ..models.converters.timm import ContinuousVisionTransformer
from ..models.frontends.causal_lm import CausalLM
from ..models.frontends.text import TextClassifier, _masked_pool
from ..models.frontends.vit import ViT
from .trajectories import DepthTrajectory, _check_depth_times, depth_trajectory, find_depth_module

__all__ = ["ReadoutInputs", "Readout", "DepthReadout", "register_readout", "readout_for", "depth_readout"]


@dataclass(frozen=True, eq=False)
class ReadoutInputs:
    """What a readout may need besides the state: the model's inputs and the conditioning of its depth module.

    Attributes:
        args, kwargs: The inputs of the model's forward.
        conditioning: The keywords the model passed to its depth module.
    """

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    conditioning: Mapping[str, Any]

    @property
    def padding(self) -> Tensor | None:
        """The depth module's ``key_padding_mask`` (bool ``(B, n)``, True at padding), or ``None``."""
        return self.conditioning.get("key_padding_mask")


Readout = Callable[[Any, Tensor, ReadoutInputs], Tensor]
"""``readout(model, x, inputs) -> output``: the model's head applied to one state ``x`` of its depth module."""

_READOUTS: dict[type[nn.Module], Readout] = {}


def register_readout(model_type: type[nn.Module], readout: Readout) -> None:
    """Read models of ``model_type`` (and its subclasses without a readout of their own) with ``readout``."""
    if not (isinstance(model_type, type) and issubclass(model_type, nn.Module)):
        raise TypeError(f"model_type must be an nn.Module class, got {model_type!r}")
    _READOUTS[model_type] = readout


def readout_for(model: nn.Module) -> Readout:
    """The readout registered for ``model``'s class or its nearest base class.

    Raises:
        TypeError: no readout is registered for it; the message names the supported classes.
    """
    for cls in type(model).__mro__:
        if cls in _READOUTS:
            return _READOUTS[cls]
    supported = ", ".join(sorted(cls.__name__ for cls in _READOUTS))
    raise TypeError(
        f"no readout for {type(model).__name__}: the supported models are {supported} (and their subclasses); "
        "register_readout(model_type, readout) adds one"
    )


@dataclass(frozen=True, eq=False)
class DepthReadout:
    """The model's head applied at each requested depth, and how close each readout is to the final one.

    Attributes:
        t: The depth-times, 1-D.
        logits: ``y(t_i)`` stacked along a new dim 0: ``(len(t), *output.shape)``.
        final_logits: ``y(t_1)``, the model's own output.
        kl: ``KL(softmax y(t_1) || softmax y(t_i))`` averaged over positions, ``(len(t),)``.
        agreement: The fraction of positions whose top-1 class at ``t_i`` is the final one, ``(len(t),)``.
        trajectory: The states ``x(t_i)`` behind the readouts, and the solve's stats.
    """

    t: Tensor
    logits: Tensor
    final_logits: Tensor
    kl: Tensor
    agreement: Tensor
    trajectory: DepthTrajectory


def depth_readout(
    model: nn.Module, t: Sequence[float] | Tensor, *args: Any, mask_padding: bool = True, **kwargs: Any
) -> DepthReadout:
    """The readouts ``y(t) = H(x(t))`` at each depth-time in ``t`` for the inputs ``model(*args, **kwargs)``.

    One solve gives the states at ``t`` and at ``t_1`` (a step boundary: free), so this costs the field evaluations
    of the model's forward, plus the dense output's for depths inside steps
    (:func:`~neuralode_tf.dynamics.trajectories.depth_trajectory`), plus one head per depth.

    Args:
        model: A model with a registered readout (:func:`readout_for`) and one ContinuousDepth, the stack its head
            reads.
        t: Depth-times within the depth module's ``[t_0, t_1]``.
        *args, **kwargs: The inputs of ``model``'s forward.
        mask_padding: Average ``kl`` and ``agreement`` over real tokens only, when the readout has one row per token
            and the model passed a padding mask to its depth module.

    Raises:
        TypeError: no readout for ``model`` (:func:`readout_for`), or a converted Hugging Face base model (no head).
        ValueError: as :func:`~neuralode_tf.dynamics.trajectories.depth_trajectory`.
    """
    readout = readout_for(model)
    module = find_depth_module(model)
    _check_depth_times(t, module.t0, module.t1)
    if isinstance(t, Tensor):
        times = t if t.is_floating_point() else t.to(torch.float64)
        with_end: Tensor | list[float] = torch.cat([times, times.new_tensor([module.t1])])
    else:
        with_end = [*map(float, t), module.t1]
    solved = depth_trajectory(model, with_end, *args, depth_module=module, **kwargs)
    inputs = ReadoutInputs(args, kwargs, solved.conditioning)
    outputs = torch.stack([readout(model, x, inputs) for x in solved.states.unbind(0)])
    logits, final = outputs[:-1], outputs[-1]
    real = _real_positions(final, inputs.padding) if mask_padding else None
    log_q, log_p = logits.log_softmax(-1), final.log_softmax(-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    agrees = (logits.argmax(-1) == final.argmax(-1)).to(kl.dtype)
    trajectory = DepthTrajectory(solved.t[:-1], solved.states[:-1], solved.stats, solved.conditioning)
    return DepthReadout(trajectory.t, logits, final, _mean(kl, real), _mean(agrees, real), trajectory)


def _real_positions(final: Tensor, padding: Tensor | None) -> Tensor | None:
    """True at the output's real positions, when it has one row per token of the padding mask; else ``None``."""
    if padding is None or tuple(padding.shape) != tuple(final.shape[:-1]):
        return None
    return ~padding.bool()


def _mean(values: Tensor, real: Tensor | None) -> Tensor:
    """The mean of ``values`` ``(T, *positions)`` over the positions (those where ``real`` is True), ``(T,)``."""
    if real is None:
        return values.flatten(1).mean(1)
    kept = torch.where(real, values, torch.zeros((), dtype=values.dtype, device=values.device))
    return kept.flatten(1).sum(1) / real.sum().clamp(min=1).to(values.dtype)


def _causal_lm(model: CausalLM, x: Tensor, inputs: ReadoutInputs) -> Tensor:
    """``W_U N(x)``: the final norm (identity when it is inside the field) and the (tied) output projection."""
    return model.forward_head(model.norm(x))


def _transformers(model: ContinuousTransformersModel, x: Tensor, inputs: ReadoutInputs) -> Tensor:
    """The family's final norm, then the task's head (LM head, masked-LM head, last-token classification)."""
    if model.head == "base":
        raise TypeError("a converted base model (task='base') has no head to read its states with")
    norm = model.family.final_norm(model.base)
    input_ids = inputs.args[0] if inputs.args else inputs.kwargs["input_ids"]
    return model.forward_head(x if norm is None else norm(x), input_ids)


def _text_classifier(model: TextClassifier, x: Tensor, inputs: ReadoutInputs) -> Tensor:
    """Final LayerNorm, pooling over the real tokens (the mask the encoder was given), then the head."""
    return model.forward_head(_masked_pool(model.norm(x), inputs.padding, model.pooling))


def _vit(model: ViT, x: Tensor, inputs: ReadoutInputs) -> Tensor:
    """Final LayerNorm, then the head on the class token."""
    return model.forward_head(model.norm(x))


def _timm_vit(model: ContinuousVisionTransformer, x: Tensor, inputs: ReadoutInputs) -> Tensor:
    """timm's ``norm``, then its ``forward_head`` (pooling, ``fc_norm``, head)."""
    return model.forward_head(model.vit.norm(x))


register_readout(CausalLM, _causal_lm)
register_readout(ContinuousTransformersModel, _transformers)
register_readout(TextClassifier, _text_classifier)
register_readout(ViT, _vit)
register_readout(ContinuousVisionTransformer, _timm_vit)
