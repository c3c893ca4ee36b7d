"""Converted Hugging Face decoders generate with a key/value cache: the same tokens as without it and as the
Hugging Face model's own greedy decoding; the cached logits are the full forward's."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf import set_solve_options
from neuralode_tf.models import from_transformers
from neuralode_tf.nn import KVCache
from neuralode_tf.numerics import CausalityWarning
from tests._huggingface import ENCODERS, FAMILIES, VOCAB, model

DECODERS = [family for family in FAMILIES if family not in ENCODERS]


def _prompt(device, batch: int = 2, length: int = 5) -> torch.Tensor:
    return torch.randint(2, VOCAB, (batch, length), generator=torch.Generator().manual_seed(3)).to(device)


@pytest.mark.parametrize("family", DECODERS)
def test_cached_logits_are_the_full_forwards(family, device):
    """Prompt, then one token at a time past the sliding window (Mistral, Qwen2: 4): every step's logits equal those
    of the forward over the whole sequence (float64)."""
    converted = from_transformers(model(family).to(device))
    tokens = _prompt(device, length=7)
    cache = KVCache()
    with torch.no_grad():
        pieces = [converted(tokens[:, :3], kv_cache=cache)] + [
            converted(tokens[:, i : i + 1], kv_cache=cache) for i in range(3, 7)
        ]
        full = converted(tokens)
    assert cache.length == 7
    assert (torch.cat(pieces, dim=1) - full).abs().max().item() <= 1e-10


@pytest.mark.parametrize("family", DECODERS)
def test_generation_with_and_without_the_cache_and_hugging_faces_greedy_agree(family, device):
    hf_model = model(family).to(device)
    converted = from_transformers(hf_model)
    prompt = _prompt(device)
    cached = converted.generate(prompt, 6, top_k=1)
    assert cached.shape == (2, 11) and torch.equal(cached[:, :5], prompt)
    assert torch.equal(cached, converted.generate(prompt, 6, top_k=1, cache=False))
    with torch.no_grad():
        greedy = hf_model.generate(
            prompt, max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0, min_new_tokens=6
        )
    assert torch.equal(cached, greedy)
    sampled = [
        converted.generate(prompt, 6, temperature=0.8, cache=cache, generator=torch.Generator().manual_seed(5))
        for cache in (True, False)
    ]
    assert torch.equal(*sampled)


@pytest.mark.cpu_only("refusals, on small CPU models")
def test_what_the_cache_cannot_serve_is_refused_by_name():
    converted = from_transformers(model("llama"))
    prompt = _prompt("cpu")
    with pytest.raises(ValueError, match="takes no padding"):
        converted(prompt, torch.tensor([[1, 1, 1, 1, 0], [1] * 5]), kv_cache=KVCache())
    with pytest.raises(TypeError, match="needs a causal LM head; this converted model's task is 'base'"):
        from_transformers(model("llama", "base")).generate(prompt, 2)
    with pytest.raises(ValueError, match=r"5 \+ 600 tokens exceed the model's"):
        from_transformers(model("gpt2")).generate(prompt, 600)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        converted.generate(prompt, 2, temperature=0.0)
    set_solve_options(converted, method="dopri5")
    with pytest.raises(ValueError, match="method 'dopri5' is adaptive"):
        converted.generate(prompt, 2)
    with pytest.warns(CausalityWarning, match="'dopri5' is adaptive"):  # it decodes, with the solver's caveat
        assert converted.generate(prompt, 2, cache=False).shape == (2, 7)
    with pytest.raises(ValueError, match="a KVCache serves causal attention"):
        from_transformers(model("bert"))(prompt, kv_cache=KVCache())
