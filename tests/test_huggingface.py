"""``from_transformers``: the default solve reproduces Hugging Face models exactly, shares their parameters, reads
their masks and heads, and refuses what it cannot read (random-weight models from small configs)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters import huggingface as hf
from tests._huggingface import ENCODERS, FAMILIES, compared, hf_output, inputs, max_diff, model, transformers

EXACT = {torch.float64: 1e-10, torch.float32: 1e-5}
"""Max-abs difference from the Hugging Face output (outputs of size ~1): float64 exact to rounding; float32 to a
few ulps through three blocks (same operations in the same order, kernels chosen per call)."""


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_default_solve_is_the_hf_model(family, padding, dtype, device):
    """One Lie-Trotter (GPT-NeoX parallel: Euler) step per block gives the model's logits, batch of 3, with
    padding, at every position (a left-padded decoder query, which sees no key, has zero attention weights in
    both; see ``compared`` for transformers 4)."""
    hf_model = model(family, dtype=dtype).to(device)
    converted = from_transformers(hf_model)
    ids, mask = inputs(family, padding, device)
    with torch.no_grad():
        expected, got = hf_output(hf_model, ids, mask), converted(ids, mask)
    assert got.shape == expected.shape and got.dtype == dtype
    assert torch.isfinite(got).all()
    assert max_diff(got, expected, compared(family, mask)) <= EXACT[dtype]


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("task", ["sequence_classification", "base"])
@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "qwen3", "gpt_neox", "bert", "roberta"])
def test_heads_and_base_models(family, task, padding, device):
    """``*ForSequenceClassification`` (decoders pool the last non-padding token, BERT its pooler, RoBERTa its
    first token) and the base model's ``last_hidden_state``."""
    hf_model = model(family, task).to(device)
    ids, mask = inputs(family, padding, device)
    with torch.no_grad():
        expected, got = hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)
    assert max_diff(got, expected, compared(family, mask) if task == "base" else None) <= 1e-10


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "linear", "factor": 2.0},
        {"rope_type": "dynamic", "factor": 2.0},
        {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4},
        {
            "rope_type": "llama3",
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 4,
        },
    ],
    ids=lambda s: s["rope_type"],
)
def test_rope_scaling_the_config_selects(scaling, device):
    """The rotary positions come from the model's own rotary module; dynamic scaling starts past 8 positions."""
    hf_model = model("llama", rope_scaling=scaling, rope_theta=500.0, max_position_embeddings=8).to(device)
    ids, mask = inputs("llama", "right", device)
    with torch.no_grad():
        expected, got = hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)
    assert max_diff(got, expected, compared("llama", mask)) <= 1e-10


def test_a_sliding_window_switched_off_is_not_applied(device):
    hf_model = model("qwen2", use_sliding_window=False).to(device)
    converted = from_transformers(hf_model)
    assert {m.window for m in converted.modules() if isinstance(m, hf.TransformersAttention)} == {None}
    ids, mask = inputs("qwen2", "right", device)
    with torch.no_grad():
        assert max_diff(converted(ids, mask), hf_output(hf_model, ids, mask), compared("qwen2", mask)) <= 1e-10


def test_position_and_token_type_ids(device):
    ids, mask = inputs("llama", "left", device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    llama = model("llama").to(device)
    with torch.no_grad():
        expected = hf_output(llama, ids, mask, position_ids=positions)
        got = from_transformers(llama)(ids, mask, position_ids=positions)
    assert max_diff(got, expected, compared("llama", mask)) <= 1e-10
    segments = (torch.arange(ids.shape[-1], device=device) >= 5).long().expand_as(ids)
    for family in ("bert", "gpt2"):
        hf_model = model(family).to(device)
        ids, mask = inputs(family, "right", device)
        with torch.no_grad():
            expected = hf_output(hf_model, ids, mask, token_type_ids=segments)
            got = from_transformers(hf_model)(ids, mask, token_type_ids=segments)
        assert max_diff(got, expected, compared(family, mask)) <= 1e-10
    with pytest.raises(ValueError, match="LlamaModel takes no token_type_ids"):
        from_transformers(llama)(ids, token_type_ids=segments)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen3", "bert"])
def test_parameters_are_shared_not_copied(family, device):
    hf_model = model(family).to(device)
    converted = from_transformers(hf_model)
    assert {id(p) for p in converted.parameters()} == {id(p) for p in hf_model.parameters()}
    field_pointers = {p.data_ptr() for p in converted.encoder.parameters()}
    block_pointers = {p.data_ptr() for p in hf_model.base_model.parameters()}
    assert field_pointers and field_pointers <= block_pointers
    with torch.no_grad():  # an in-place change of the Hugging Face weights changes the converted model
        before = converted(inputs(family, "none", device)[0])
        for p in hf_model.base_model.parameters():
            p.mul_(1.5)
        assert max_diff(converted(inputs(family, "none", device)[0]), before) > 1e-3


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen3", "gpt_neox", "bert"])
def test_gradients_flow_into_the_hf_parameters(family, device):
    """Backpropagating through the converted model gives the Hugging Face model's own gradients (of the positions
    compared in the forward: under transformers 4 a query that sees no key, past Qwen3's window, has other values)."""
    hf_model = model(family).to(device)
    ids, mask = inputs(family, "right", device)
    where = compared(family, mask)
    weight = 1.0 if where is None else where[..., None].double()
    (hf_output(hf_model, ids, mask) * weight).square().sum().backward()
    expected = {name: p.grad.clone() for name, p in hf_model.named_parameters() if p.grad is not None}
    hf_model.zero_grad(set_to_none=True)
    (from_transformers(hf_model)(ids, mask) * weight).square().sum().backward()
    got = {name: p.grad for name, p in hf_model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys() and len(got) > 10
    assert max(max_diff(got[name], expected[name]) for name in got) <= 1e-9


def test_attention_mask_follows_hugging_face(device):
    """1 (or True) marks real tokens: the real positions of a right-padded sequence are those of the sequence
    alone; an all-ones mask is no mask; bool and integer masks agree."""
    converted = from_transformers(model("llama").to(device))
    ids, mask = inputs("llama", "right", device)
    with torch.no_grad():
        padded = converted(ids, mask)
        alone = converted(ids[2:3, :4])
        assert max_diff(padded[2, :4], alone[0]) <= 1e-10
        assert torch.equal(converted(ids, mask.bool()), padded)
        assert torch.equal(converted(ids, torch.ones_like(mask)), converted(ids))
    with pytest.raises(ValueError, match="attention_mask must be a tensor shaped like input_ids"):
        converted(ids, mask[:, :-1])
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        converted(ids.double())


def test_sequence_classification_needs_a_pad_token_for_a_batch(device):
    hf_model = model("llama", "sequence_classification", pad_token_id=None).to(device)
    ids, _ = inputs("llama", "none", device)
    converted = from_transformers(hf_model)
    with torch.no_grad():
        assert max_diff(converted(ids[:1]), hf_output(hf_model, ids[:1], None)) <= 1e-10
    with pytest.raises(ValueError, match="no pad_token_id"):
        converted(ids)


@pytest.mark.parametrize(
    ("family", "method"),
    [("gpt2", "lie_trotter"), ("llama", "lie_trotter"), ("gpt_neox", "euler"), ("gpt_neox_sequential", "lie_trotter")],
)
def test_default_method_and_set_solve_options(family, method, device):
    hf_model = model(family).to(device)
    converted = from_transformers(hf_model)
    assert converted.encoder.solve_options["method"] == method
    assert converted.encoder.solve_options["step_size"] == 1.0
    ids, _ = inputs(family, "none", device)
    with torch.no_grad():
        expected = hf_output(hf_model, ids, None)
        neuralode_tf.set_solve_options(converted, method="rk4", steps=2 * 3)
        assert max_diff(converted(ids), expected) > 1e-6
        neuralode_tf.set_solve_options(converted, method=method)
        assert max_diff(converted(ids), expected) <= 1e-10


def test_unreadable_models_raise_type_errors_naming_the_class(device):
    lib = transformers()
    with pytest.raises(TypeError, match="not Linear"):
        from_transformers(torch.nn.Linear(2, 2))
    bloom = lib.BloomModel(lib.BloomConfig(vocab_size=97, hidden_size=16, n_layer=1, n_head=2))
    refused = "cannot read BloomModel: its base model BloomModel is none of the registered families' GPT2Model"
    with pytest.raises(TypeError, match=refused):
        from_transformers(bloom)
    with pytest.raises(TypeError, match="cannot read the head of BertForTokenClassification"):
        from_transformers(lib.BertForTokenClassification(model("bert").config))
    with pytest.raises(TypeError, match="cannot read the head of GPT2DoubleHeadsModel"):
        from_transformers(lib.GPT2DoubleHeadsModel(model("gpt2").config))
    with pytest.raises(TypeError, match="cannot read GPT2Block with cross-attention"):
        from_transformers(model("gpt2", add_cross_attention=True))
    with pytest.raises(TypeError, match="cannot read BertLayer with is_decoder=True"):
        from_transformers(model("bert", "base", is_decoder=True))
    llama = model("llama")
    llama.model.layers[1] = torch.nn.Identity()
    with pytest.raises(TypeError, match="cannot read Identity: the blocks of LlamaModel it reads are LlamaDecoder"):
        from_transformers(llama)


@pytest.mark.parametrize("family", ENCODERS)
def test_bert_reads_post_norms_as_parts_whose_unit_step_is_the_norm(family, device):
    """Each post-LN sub-layer is two parts: its branch, then ``N(x) - x``, whose Euler step of size 1 is ``N(x)``."""
    converted = from_transformers(model(family).to(device))
    layer = converted.encoder.field.layers[0]
    parts = [part.branch for part in layer.parts]
    assert [type(p).__name__ for p in parts] == ["_BertAttention", "PostNorm", "Sequential", "PostNorm"]
    x = torch.randn(2, 5, 32, dtype=torch.float64, device=device)
    assert max_diff(x + parts[1](x), parts[1].norm(x)) <= 1e-14


def test_the_attention_exposes_what_its_logits_are_made_of(device):
    """``qkv`` gives the rotated queries and keys and the values: ``softmax(s q kᵀ) v`` through ``W_o`` is the
    attention branch (a reading with carried logits, such as evolving attention, starts from them)."""
    converted = from_transformers(model("llama").to(device))
    attention = converted.encoder.field.layers[0].parts[0].branch
    ids, _ = inputs("llama", "none", device)
    x = converted.family.embed(converted.base, ids, None, None)
    attention.bind(rotary=converted.family.rotary(converted.base, x, None))
    q, k, v = attention.qkv(x)
    k, v = (z.repeat_interleave(attention.num_heads // attention.num_kv_heads, dim=-3) for z in (k, v))
    logits = attention.scale * q @ k.transpose(-1, -2)
    logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), float("-inf"))
    out = attention.out((logits.softmax(-1) @ v).transpose(-3, -2).flatten(-2))
    assert max_diff(out, attention(x)) <= 1e-12


def test_the_blocks_share_their_attention_masks(device):
    """One :class:`AttentionMasks` for all blocks: a forward builds each distinct mask once (one per window: Qwen2
    has a full and a windowed one in recent transformers), and a padding mask changed in place is not mistaken for
    the one it was."""
    converted = from_transformers(model("qwen2").to(device))
    attentions = [m for m in converted.modules() if isinstance(m, hf.TransformersAttention)]
    assert len(attentions) == 3 and len({id(a.masks) for a in attentions}) == 1
    masks = attentions[0].masks
    ids, mask = inputs("qwen2", "right", device)
    with torch.no_grad():
        converted(ids, mask)
    assert len(masks._masks) == len({a.window for a in attentions})
    padding = ~mask.bool()
    first = masks.get(padding, 10, padding.device, True, None)
    assert masks.get(padding, 10, padding.device, True, None) is first
    padding[0, -1] = True
    assert not torch.equal(masks.get(padding, 10, padding.device, True, None).allowed, first.allowed)


@pytest.mark.cpu_only("imports the package in a fresh interpreter")
def test_importing_the_package_does_not_import_transformers():
    code = "import sys, neuralode_tf, neuralode_tf.models.converters.huggingface; print('transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


@pytest.mark.cpu_only("inspects the package's names")
def test_the_package_lists_its_public_names():
    assert dir(hf) == sorted(hf.__all__)
    assert {name for family in hf.families() for name in family.base_classes} >= {
        "GPT2Model",
        "LlamaModel",
        "MistralModel",
        "Qwen2Model",
        "Qwen3Model",
        "GPTNeoXModel",
        "BertModel",
        "RobertaModel",
    }


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_token_ids_outside_the_vocabulary_are_named(family, device):
    """An id outside the input embedding's ``[0, vocab_size)`` raises ``ValueError`` naming it, its (batch, token)
    position and the vocabulary size, where the embedding lookup would raise a bare ``IndexError``."""
    converted = from_transformers(model(family).to(device))
    ids, mask = inputs(family, "right", device)
    vocab = converted.base.get_input_embeddings().num_embeddings
    for bad_id in (vocab, -1):
        bad = ids.clone()
        bad[2, 1] = bad_id
        with pytest.raises(ValueError, match=rf"input_ids holds token id {bad_id} at \(batch 2, token 1\).*{vocab}\)"):
            converted(bad, mask)
