"""What the decoders' ``generate`` share: the checks of its settings and of a model's solves, and the sampling."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..continuous import ContinuousDepth
from ..nn import EvolvingAttentionBranch
from ..numerics import FIXED_GRID_METHODS

__all__ = ["check_cacheable", "check_sampling", "sample_next"]

_ITERATED = ("implicit_adams", "fixed_adams")
"""Fixed-grid methods whose corrector iterates until the state converges: their evaluations depend on the state."""


def check_sampling(prompt: Tensor, max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    """Raise ``ValueError`` for a prompt that is no ``(B, n0)``, ``n0 >= 1``, or sampling settings out of range."""
    if prompt.ndim != 2 or not prompt.shape[1]:
        raise ValueError(f"prompt must be (B, n0) with n0 >= 1, got shape {tuple(prompt.shape)}")
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 0):
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if top_k is not None and not (isinstance(top_k, int) and top_k >= 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")


def check_cacheable(model: nn.Module) -> None:
    """Raise ``ValueError`` unless every solve of ``model`` makes a fixed sequence of evaluations, which a
    :class:`~neuralode_tf.nn.KVCache` needs (it keeps one slot per attention call, by call order)."""
    if any(isinstance(module, EvolvingAttentionBranch) for module in model.modules()):
        raise ValueError("field='evolving' has no KV cache (its state carries n × n logit maps); use cache=False")
    for module in (m for m in model.modules() if isinstance(m, ContinuousDepth)):
        options = module.solve_options
        method = options["method"]
        if method not in FIXED_GRID_METHODS or method in _ITERATED:
            kind = "iterates its corrector to a tolerance" if method in _ITERATED else "is adaptive"
            raise ValueError(
                f"the KV cache needs a fixed sequence of field evaluations, and method {method!r} {kind}: use a "
                "fixed-grid Runge-Kutta or splitting method, or cache=False"
            )
        if options.get("compile"):
            raise ValueError("the KV cache is not supported with compile=...: use cache=False")
        if torch.is_grad_enabled() and options.get("gradient", "backprop") != "backprop":
            raise ValueError("a kv_cache under autograd needs gradient='backprop': the others evaluate again")


def sample_next(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> Tensor:
    """One token per row of ``logits`` ``(B, V)``: from ``softmax(logits / temperature)`` over the ``top_k`` largest.

    ``top_k=1`` is greedy: the most likely token, the first of equals (Hugging Face's greedy search), whatever the
    temperature, and nothing is drawn from ``generator``. (A draw costs ``V`` exponential variates: 1 ms per token
    for GPT-2's vocabulary on a CPU, more than the step of a small model.)"""
    if top_k == 1:
        if torch.isnan(logits).any():  # argmax would pick a token silently; a draw refuses NaN too
            raise ValueError("the logits hold NaN: no token can be chosen (a non-finite model output)")
        return logits.argmax(-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)
