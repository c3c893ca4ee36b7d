"""What is particular to Gemma and Gemma 2 (their exactness, heads, gradients and cache are checked with every family in
``tests/test_hf_families.py``): the embedding's rounded ``sqrt(d)``, Gemma 2's capped attention logits under each
attention implementation of each transformers version, its capped final logits, the explicit capped attention of
:class:`~neuralode_tf.models.converters.huggingface.TransformersAttention`, and the refusals."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters.huggingface._attention import TransformersAttention, split_heads
from neuralode_tf.nn import KVCache
from tests._hf_zoo import ZOO, compared, inputs, model
from tests._huggingface import hf_output, hf_zeroes_blind_queries, max_diff


def _attention(converted, block: int = 0):
    return converted.encoder.field.layers[block].parts[0].branch


@pytest.mark.parametrize("name", ["gemma", "gemma2"])
def test_the_embedding_scale_is_rounded_as_hugging_face_rounds_it(name, device):
    """``sqrt(d)`` in bfloat16 (transformers 4.52: ``tensor(sqrt(d), dtype)``; 5: a float32 buffer cast to the
    model's dtype): the tokens equal Hugging Face's first hidden state bit for bit, where an unrounded ``sqrt(d)``
    would not."""
    hf_model = model(name, "base", dtype=torch.bfloat16).to(device)
    converted = from_transformers(hf_model)
    ids, _ = inputs(name, "none", device)
    with torch.no_grad():
        tokens = converted.family.embed(hf_model, ids, None, None)
        first = hf_model(input_ids=ids, output_hidden_states=True).hidden_states[0]
        unrounded = F.embedding(ids, hf_model.embed_tokens.weight) * hf_model.config.hidden_size**0.5
    assert torch.equal(tokens, first) and not torch.equal(tokens, unrounded)


def test_gemma2_reads_the_cap_as_the_default_attention_applies_it(device):
    """transformers 5 runs Gemma 2 with ``eager`` attention (it refuses ``sdpa``), which caps the logits: the
    converted model caps them. transformers 4.52 runs it with ``sdpa`` by default, which ignores
    ``attn_logit_softcapping``: the converted model does not cap, as the Hugging Face model computes (the exactness
    of that default is checked in ``tests/test_hf_families.py``); its output then differs from the eager model's."""
    default = model("gemma2").to(device)
    eager = model("gemma2", attn_implementation="eager").to(device)
    ids, _ = inputs("gemma2", "none", device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        caps = [_attention(from_transformers(m)).softcap for m in (default, eager)]
    ignored = [w for w in caught if "ignores attn_logit_softcapping=2.0" in str(w.message)]
    assert bool(ignored) == (default.config._attn_implementation == "sdpa")  # said whenever the cap is dropped
    if hf_zeroes_blind_queries():  # transformers 5
        assert default.config._attn_implementation == "eager" and caps == [2.0, 2.0]
    else:
        assert default.config._attn_implementation == "sdpa" and caps == [None, 2.0]
        with torch.no_grad():
            assert max_diff(hf_output(default, ids, None), hf_output(eager, ids, None)) > 1e-2


@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("name", ["gemma", "gemma2"])
def test_eager_attention_equals_hugging_face(name, padding, device, monkeypatch):
    """``attn_implementation="eager"`` in both versions (Gemma 2: capped logits), float32, at the positions whose
    query sees a key: Hugging Face's eager attention averages the values uniformly for a query that sees none (in
    float64 its float32 softmax of ``-inf`` rows makes them NaN, which then spreads to the whole sequence through the
    padded keys, so float64 is compared unpadded, to 1e-5: the eager softmax runs in float32 whatever the dtype)."""
    monkeypatch.setattr("tests._hf_zoo.hf_zeroes_blind_queries", lambda: False)  # compare the seen positions only
    ids, mask = inputs(name, padding, device)
    for dtype, tolerance in ((torch.float32, 1e-5), (torch.float64, 1e-5)):
        if dtype == torch.float64 and padding != "none":
            continue
        hf_model = model(name, dtype=dtype, attn_implementation="eager").to(device)
        with torch.no_grad():
            expected, got = hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)
        assert max_diff(got, expected, compared(name, mask)) <= tolerance


def test_both_caps_matter_and_a_config_without_the_final_cap_has_none(device):
    """The specimen's caps (2 for attention logits up to about 3.5, 3 for final logits up to about 5) bend both: the
    converted model without its attention caps is off, the uncapped logits differ from Hugging Face's capped ones
    (which the converted model gives), and a config without ``final_logit_softcapping`` gives them uncapped."""
    hf_model = model("gemma2", attn_implementation="eager").to(device)
    converted = from_transformers(hf_model)
    ids, _ = inputs("gemma2", "none", device)
    with torch.no_grad():
        expected = hf_output(hf_model, ids, None)
        assert max_diff(converted(ids), expected) <= ZOO["gemma2"].float64
        assert max_diff(hf_model.lm_head(hf_model.model(input_ids=ids).last_hidden_state), expected) > 0.1
        for block in range(len(hf_model.model.layers)):
            _attention(converted, block).softcap = None
        assert max_diff(converted(ids), expected) > 0.1
        uncapped = model("gemma2", attn_implementation="eager", final_logit_softcapping=None).to(device)
        hidden = uncapped.model(input_ids=ids).last_hidden_state
        assert max_diff(from_transformers(uncapped)(ids), uncapped.lm_head(hidden)) <= ZOO["gemma2"].float64


def test_capped_gradients_are_hugging_faces(device):
    """Backpropagating through the capped attention (eager, both versions; unpadded float64, where Hugging Face's
    eager attention has no NaN) gives the Hugging Face model's gradients."""
    hf_model = model("gemma2", attn_implementation="eager").to(device)
    ids, _ = inputs("gemma2", "none", device)
    gradients = []
    for forward in (lambda: hf_output(hf_model, ids, None), lambda: from_transformers(hf_model)(ids)):
        hf_model.zero_grad(set_to_none=True)
        forward().square().sum().backward()
        gradients.append({key: p.grad.clone() for key, p in hf_model.named_parameters() if p.grad is not None})
    expected, got = gradients
    assert got.keys() == expected.keys() and len(got) > 5
    scale = max(float(g.abs().max()) for g in expected.values())
    assert max(max_diff(got[key], expected[key]) for key in got) <= 10 * ZOO["gemma2"].float64 * max(scale, 1.0)


def test_gemma2_blocks_have_sandwich_norms_windows_and_their_scale(device):
    """Attention ``o_proj`` then ``post_attention_layernorm``; MLP between ``pre_`` and ``post_feedforward_layernorm``;
    a window of 4 on layers 0 and 2; the scale ``query_pre_attn_scalar^{-1/2}``."""
    hf_model = model("gemma2", attn_implementation="eager").to(device)
    converted = from_transformers(hf_model)
    block = hf_model.model.layers[0]
    attention, mlp = (part.branch for part in converted.encoder.field.layers[0].parts)
    assert list(attention.out) == [block.self_attn.o_proj, block.post_attention_layernorm]
    assert list(mlp) == [block.pre_feedforward_layernorm, block.mlp, block.post_feedforward_layernorm]
    assert [_attention(converted, i).window for i in range(3)] == [4, None, 4]
    assert attention.scale == 20**-0.5 and attention.head_dim == 12 and attention.num_kv_heads == 2


def test_capped_attention_is_cached_like_the_full_forward(device):
    """The explicit capped attention under the key/value cache (both versions, eager): prompt, then one token at a
    time past the window; each step's logits are the full forward's."""
    converted = from_transformers(model("gemma2", attn_implementation="eager").to(device))
    tokens = torch.randint(2, 97, (2, 7), generator=torch.Generator().manual_seed(3)).to(device)
    cache = KVCache()
    with torch.no_grad():
        pieces = [converted(tokens[:, :3], kv_cache=cache)]
        pieces += [converted(tokens[:, i : i + 1], kv_cache=cache) for i in range(3, 7)]
        assert max_diff(torch.cat(pieces, dim=1), converted(tokens)) <= 1e-12


class _Projections(TransformersAttention):
    """A bare attention: queries, keys and values are slices of the tokens."""

    def project(self, h):
        q, k, v = h.split([4 * 6, 2 * 6, 2 * 6], dim=-1)
        return split_heads(q, 6), split_heads(k, 6), split_heads(v, 6)


@pytest.mark.parametrize("window", [None, 3])
def test_a_negligible_cap_gives_the_sdpa_path_blind_queries_included(window, device):
    """With ``c = 1e9`` the explicit path computes ``scaled_dot_product_attention``'s attention (grouped-query heads,
    padding, window, a left-padded query that sees no key: zero weights), values and gradients."""
    torch.manual_seed(0)
    x = torch.randn(3, 8, 48, dtype=torch.float64, device=device, requires_grad=True)
    padding = torch.zeros(3, 8, dtype=torch.bool, device=device)
    padding[1, :3], padding[2, 5:] = True, True
    outputs, gradients = [], []
    for softcap in (None, 1e9):
        attention = _Projections(
            None, torch.nn.Identity(), num_heads=4, num_kv_heads=2, head_dim=6, scale=0.3, causal=True, window=window
        )
        attention.softcap = softcap
        attention.bind(key_padding_mask=padding)
        out = attention(x)
        (gradient,) = torch.autograd.grad(out.square().sum(), x)
        outputs.append(out)
        gradients.append(gradient)
    assert max_diff(*outputs) <= 1e-12 and max_diff(*gradients) <= 1e-12
    assert float(outputs[1][1, :3].detach().abs().max()) == 0.0


def test_refusals_name_the_setting(device):
    for name in ("gemma", "gemma2"):
        hf_model = model(name, use_bidirectional_attention=True).to(device)
        with pytest.raises(TypeError, match="cannot read Gemma2?DecoderLayer with use_bidirectional_attention=True"):
            from_transformers(hf_model)
