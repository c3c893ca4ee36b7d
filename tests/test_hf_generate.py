"""Converted Hugging Face decoders generate with a key/value cache: the same tokens as without it and as the
Hugging Face model's own greedy decoding; the cached logits are the full forward's."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf import set_solve_options
from neuralode_tf.models import from_transformers
from neuralode_tf.nn import KVCache
from neuralode_tf.numerics import CausalityWarning
from tests._hf_checks import check_cached_logits, check_generation
from tests._hf_checks import prompt as start_prompt
from tests._huggingface import ENCODERS, FAMILIES, VOCAB, model

DECODERS = [family for family in FAMILIES if family not in ENCODERS]


@pytest.mark.parametrize("family", DECODERS)
def test_cached_logits_are_the_full_forwards(family, device):
    """Past the sliding window (Mistral, Qwen2: 4): every step's logits are the full forward's (float64)."""
    check_cached_logits(model(family).to(device), VOCAB, 1e-10, device)


@pytest.mark.parametrize("family", DECODERS)
def test_generation_with_and_without_the_cache_and_hugging_faces_greedy_agree(family, device):
    check_generation(model(family).to(device), VOCAB, device)


@pytest.mark.cpu_only("refusals, on small CPU models")
def test_what_the_cache_cannot_serve_is_refused_by_name():
    converted = from_transformers(model("llama"))
    prompt = start_prompt(VOCAB, torch.device("cpu"))
    with pytest.raises(ValueError, match="takes no padding"):
        converted(prompt, torch.tensor([[1, 1, 1, 1, 0], [1] * 5]), kv_cache=KVCache())
    with pytest.raises(TypeError, match="needs a causal LM head; this converted model's head is 'base'"):
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


@pytest.mark.cpu_only("names, on a small CPU model")
def test_the_head_is_named_head_and_the_former_name_task_still_reads_it():
    from neuralode_tf.models.converters import huggingface

    converted = from_transformers(model("llama"))
    assert converted.head == "causal_lm" and "head='causal_lm'" in repr(converted)
    with pytest.warns(DeprecationWarning, match="'task' is now called 'head'"):
        assert converted.task == "causal_lm"
    with pytest.warns(DeprecationWarning, match="'TASKS' is now called 'HEADS'"):
        assert huggingface.TASKS is huggingface.HEADS
    assert huggingface.HEADS["ForCausalLM"] == "causal_lm"
