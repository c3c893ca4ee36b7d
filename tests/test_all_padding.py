"""A query that may see no key has zero attention weights, in every attention kind and in converted Hugging Face
models (as their default ``sdpa`` attention); a padding row with no real token is warned about."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import torch

from neuralode_tf import ContinuousDepth
from neuralode_tf.models import CausalLM, TextClassifier, from_transformers
from neuralode_tf.models.frontends.set_reference import ReferenceMAB
from neuralode_tf.nn import AttentionBranch
from neuralode_tf.nn._empty_rows import attend, sdpa_mask, softmax_weights
from neuralode_tf.nn.evolving import EvolvingAttentionBranch
from tests import _conditioned
from tests._huggingface import FAMILIES, compared, hf_output, inputs, max_diff, model

ALL_PADDING = "padding throughout"


def written_out(q, k, v, allowed):
    """``Σ_j a_ij v_j`` with ``a_i = softmax`` over the allowed keys of query ``i``, and ``a_i = 0`` without any."""
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for index in itertools.product(*map(range, q.shape[:-1])):
        keys = allowed[index[0], 0, index[-1]]
        if keys.any():
            scores = k[index[:-1]][keys] @ q[index] / math.sqrt(q.shape[-1])
            out[index] = scores.softmax(-1) @ v[index[:-1]][keys]
    return out


def increment(branch, x, memory, pad):
    """The branch's output; an evolving branch's from its initial logits."""
    if isinstance(branch, EvolvingAttentionBranch):
        return branch(x, branch.initial_logits(x, memory, pad), memory, pad)[0]
    return branch(x, memory, pad)


@pytest.mark.cpu_only("float64 against a loop over queries; the kernels' masks are covered on devices below")
def test_attend_and_softmax_weights_against_the_definition():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 4, 8, dtype=torch.float64), torch.randn(2, 3, 5, 8, dtype=torch.float64)
    v = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    allowed = torch.rand(2, 1, 4, 5) < 0.5
    allowed[0, 0, 1] = False  # a query that sees no key
    allowed[1, 0, :, 0] = True
    expected = written_out(q, k, v, allowed)
    assert max_diff(attend(q, k, v, sdpa_mask(allowed)), expected) <= 1e-14
    weights = softmax_weights(q @ k.transpose(-1, -2) / math.sqrt(8), ~allowed)
    assert max_diff(weights @ v, expected) <= 1e-14
    assert weights[0, :, 1].abs().max() == 0.0
    q.requires_grad_(True)
    attend(q, k, v, sdpa_mask(allowed)).sum().backward()
    assert torch.isfinite(q.grad).all() and q.grad[0, :, 1].abs().max() == 0.0


def test_cross_attention_to_a_memory_that_is_all_padding(device):
    """The attention output before ``W_o`` is zero: the branch gives ``W_o``'s bias, whatever the memory holds;
    the other samples are those of a batch without this one."""
    torch.manual_seed(0)
    x, memory = torch.randn(3, 4, 16, device=device), torch.randn(3, 6, 12, device=device)
    pad = torch.zeros(3, 6, dtype=torch.bool, device=device)
    pad[1], pad[2, 4:] = True, True
    for branch in (
        AttentionBranch(16, 4, context_dim=12).to(device),
        EvolvingAttentionBranch(16, 4, cross_attention=True, context_dim=12).to(device),
    ):
        out = increment(branch, x, memory, pad)
        assert torch.isfinite(out).all()
        assert max_diff(out[1], branch.proj.bias.expand(4, -1)) == 0.0
        spoiled = memory.clone()
        spoiled[1] = 1e3
        assert max_diff(increment(branch, x, spoiled, pad), out) == 0.0
        rest = [0, 2]
        assert max_diff(increment(branch, x[rest], memory[rest], pad[rest]), out[rest]) <= 1e-6


@pytest.mark.parametrize("kind", _conditioned.KINDS)
def test_continuous_depth_warns_about_a_row_of_padding(kind, device):
    field = _conditioned.build(kind, 8, 2).to(device)
    model = ContinuousDepth(field, **_conditioned.unit_steps(kind, field))
    x, memory = torch.randn(2, 5, 8, device=device), torch.randn(2, 3, 8, device=device)
    partial = _conditioned.padding_mask([5, 3], 5, device)
    memory_pad = _conditioned.padding_mask([3, 2], 3, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # partial padding: no warning
        model(x, **_conditioned.conditioning(kind, x, partial, memory, memory_pad))
    full = _conditioned.padding_mask([5, 0], 5, device)
    with pytest.warns(UserWarning, match=rf"1 row\(s\) of key_padding_mask \(index \[1\].*{ALL_PADDING}"):
        out = model(x, **_conditioned.conditioning(kind, x, full, memory, memory_pad))
    assert torch.isfinite(out).all()


def test_a_memory_of_padding_is_warned_about(device):
    field = _conditioned.build("decoder", 8, 2).to(device)
    x, memory = torch.randn(2, 5, 8, device=device), torch.randn(2, 3, 8, device=device)
    memory_pad = _conditioned.padding_mask([3, 0], 3, device)
    with pytest.warns(UserWarning, match=f"memory_key_padding_mask .*{ALL_PADDING}"):
        ContinuousDepth(field, **_conditioned.unit_steps("decoder", field))(
            x, memory=memory, memory_key_padding_mask=memory_pad
        )


def test_an_uninverted_hugging_face_mask_is_warned_about(device):
    """``attention_mask.bool()`` (True at real tokens) passed as ``key_padding_mask``: the unpadded row is then
    padding throughout, and the warning says how to invert it."""
    lm = CausalLM(50, 16, 2, 2, block_size=8).to(device)
    tokens = torch.randint(1, 50, (2, 6), device=device)
    attention_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], device=device)
    with pytest.warns(UserWarning, match=r"~attention_mask\.bool\(\)"):
        lm(tokens, key_padding_mask=attention_mask.bool())


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_text_classifier_pools_no_token_to_zero(pooling, device):
    """A document with no real token has finite logits, the head's bias (max pooling over nothing was -inf)."""
    classifier = TextClassifier(30, 3, dim=16, num_heads=2, pooling=pooling).to(device).eval()
    tokens = torch.randint(1, 30, (2, 5), device=device)
    tokens[1] = 0
    with pytest.warns(UserWarning, match=ALL_PADDING):
        logits = classifier(tokens)
    assert torch.isfinite(logits).all()
    assert max_diff(logits[1], classifier.head.bias) == 0.0


@pytest.mark.parametrize("family", list(FAMILIES))
def test_converted_models_equal_hugging_face_on_rows_of_padding(family, device):
    """An all-zero ``attention_mask`` row, and a mask that is all zero, give Hugging Face's output at every
    position (before: 4.1e-2 for BERT's, up to 1.2 for LLaMA's), under transformers 5; under transformers 4,
    whose values there differ, at the positions whose queries see a key."""
    hf_model = model(family).to(device)
    converted = from_transformers(hf_model)
    ids, mask = inputs(family, "right", device)
    one_row = mask.clone()
    one_row[1] = 0
    for attention_mask in (one_row, torch.zeros_like(mask)):
        with torch.no_grad(), pytest.warns(UserWarning, match=ALL_PADDING):
            got = converted(ids, attention_mask)
        where = compared(family, attention_mask)
        if where is None or where.any():
            assert max_diff(got, hf_output(hf_model, ids, attention_mask), where) <= 1e-10


def test_ea_bert_and_the_reference_set_transformer_on_a_row_of_padding(device):
    """Evolving attention on a converted BERT: a sample that is all padding stays finite (its queries see no key)
    and leaves the other samples as they are; with α = β = 0 it equals Hugging Face's BERT under transformers 5.
    The reference Set Transformer's attention over a set that is all padding is zero."""
    hf_model = model("bert").to(device)
    ids, mask = inputs("bert", "right", device)
    mask = mask.clone()
    mask[1] = 0
    evolving = from_transformers(hf_model, evolving=dict(alpha=0.5, beta=0.5))
    with torch.no_grad(), pytest.warns(UserWarning, match=ALL_PADDING):
        out = evolving(ids, mask)
    with torch.no_grad():
        rest = evolving(ids[[0, 2]], mask[[0, 2]])
    assert torch.isfinite(out).all() and max_diff(out[[0, 2]], rest) <= 1e-10
    vanilla = from_transformers(hf_model, evolving=dict(alpha=0.0, beta=0.0))
    with torch.no_grad(), pytest.warns(UserWarning, match=ALL_PADDING):
        got = vanilla(ids, mask)
    assert max_diff(got, hf_output(hf_model, ids, mask), compared("bert", mask)) <= 1e-10
    mab = ReferenceMAB(8, 8, 8, 2).to(device)
    x, y = torch.randn(2, 3, 8, device=device), torch.randn(2, 4, 8, device=device)
    pad = torch.tensor([[False] * 4, [True] * 4], device=device)
    assert mab.attend(x, y, pad)[1].abs().max().item() == 0.0
