"""Checks shared by the Hugging Face test modules (the built-in families of ``tests/_huggingface.py`` and the zoo of
``tests/_hf_zoo.py``): adjoint gradients, the KV cache and generation."""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from neuralode_tf.models import from_transformers
from neuralode_tf.nn import KVCache
from neuralode_tf.numerics import CausalityWarning
from tests._huggingface import max_diff


def check_adjoint_gradients(hf_model: Any, ids: torch.Tensor, mask: torch.Tensor) -> None:
    """``gradient="adjoint"`` (torchdiffeq, dopri5) gives the gradients of backpropagating through the same solve, to
    its tolerance, on the real positions of ``mask``."""
    gradients = []
    for adjoint in ("backprop", "adjoint"):
        hf_model.zero_grad(set_to_none=True)
        converted = from_transformers(hf_model, method="dopri5", rtol=1e-8, atol=1e-8, gradient=adjoint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalityWarning)
            (converted(ids, mask) * mask[..., None]).square().sum().backward()
        gradients.append({key: p.grad.clone() for key, p in hf_model.named_parameters() if p.grad is not None})
    backprop, adjoint = gradients
    assert converted.encoder.stats.nfe_backward > 0
    assert adjoint.keys() == backprop.keys() and len(backprop) > 5
    scale = max(float(g.abs().max()) for g in backprop.values())
    assert max(max_diff(adjoint[key], backprop[key]) for key in backprop) <= 1e-5 * scale
    assert all(math.isfinite(float(g.abs().max())) for g in adjoint.values())


def prompt(vocab: int, device: torch.device, batch: int = 2, length: int = 5) -> torch.Tensor:
    return torch.randint(2, vocab, (batch, length), generator=torch.Generator().manual_seed(3)).to(device)


def check_cached_logits(hf_model: Any, vocab: int, tolerance: float, device: torch.device) -> None:
    """Prompt, then one token at a time past a sliding window of 4: every step's logits equal those of the forward
    over the whole sequence."""
    converted = from_transformers(hf_model)
    tokens = prompt(vocab, device, length=7)
    cache = KVCache()
    with torch.no_grad():
        pieces = [converted(tokens[:, :3], kv_cache=cache)]
        pieces += [converted(tokens[:, i : i + 1], kv_cache=cache) for i in range(3, 7)]
        full = converted(tokens)
    assert cache.length == 7
    assert max_diff(torch.cat(pieces, dim=1), full) <= tolerance


def check_generation(hf_model: Any, vocab: int, device: torch.device) -> None:
    """Generation with and without the cache gives the same tokens, greedy ones Hugging Face's own, sampled ones the
    same under one generator."""
    converted = from_transformers(hf_model)
    start = prompt(vocab, device)
    cached = converted.generate(start, 6, top_k=1)
    assert cached.shape == (2, 11) and torch.equal(cached[:, :5], start)
    assert torch.equal(cached, converted.generate(start, 6, top_k=1, cache=False))
    with torch.no_grad():
        greedy = hf_model.generate(
            start, max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0, min_new_tokens=6
        )
    assert torch.equal(cached, greedy)
    sampled = [
        converted.generate(start, 6, temperature=0.8, cache=cache, generator=torch.Generator().manual_seed(5))
        for cache in (True, False)
    ]
    assert torch.equal(*sampled)
