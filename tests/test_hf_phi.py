"""What is particular to Phi, Phi-3 and StableLM (their exactness, heads, gradients, orders and cache are checked with
every family in ``tests/test_hf_families.py``): which norm each branch reads (with every norm's weights moved off
their initial values), the readings, the dropouts drawn as Hugging Face draws them, Phi-3's LongRoPE through the
model's own rotary module, the variants the zoo leaves out, StableLM's per-head norms under transformers 4.52, and the
heads that are refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters import huggingface as hf
from tests._hf_zoo import compared, config, inputs, model
from tests._huggingface import hf_output, max_diff, transformers

_SPECIMENS = ["phi", "phi3", "stablelm", "stablelm_parallel"]


def _moved_norms(hf_model: Any) -> Any:
    """``hf_model`` with the weights and biases of all its norms moved randomly (they start at one and zero, where a
    branch that read another norm of the block would still be exact)."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for module in hf_model.modules():
            if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm"):
                for parameter in module.parameters(recurse=False):
                    noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
                    parameter.add_(0.3 * noise.to(parameter.device))
    return hf_model


def _assert_exact(name: str, hf_model: Any, device: torch.device, padding: str = "left") -> None:
    ids, mask = inputs(name, padding, device)
    with torch.no_grad():
        expected, got = hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)
    assert max_diff(got, expected, compared(name, mask)) <= 1e-10


@pytest.mark.parametrize("name", _SPECIMENS)
def test_each_branch_reads_its_own_norms(name, device):
    """Phi's one LayerNorm and StableLM's parallel block feed both branches; Phi-3's and StableLM's sequential blocks
    have a norm per branch; Phi's and StableLM's per-head query/key norms, the final norm: all moved, all read."""
    _assert_exact(name, _moved_norms(model(name).to(device)), device)


@pytest.mark.parametrize(
    ("name", "variant"),
    [
        ("phi", dict(qk_layernorm=False, partial_rotary_factor=1.0, num_key_value_heads=4)),
        ("phi3", dict(sliding_window=None, partial_rotary_factor=1.0)),
        ("stablelm", dict(qk_layernorm=False, use_qkv_bias=False, num_key_value_heads=4, partial_rotary_factor=0.25)),
    ],
)
def test_the_variants_the_zoo_leaves_out(name, variant, device):
    """No per-head norms, full rotary, one key/value head per query head; Phi-3 without window; StableLM's default
    quarter of the head's features rotated, without biases."""
    _assert_exact(name, _moved_norms(model(name, **variant).to(device)), device, padding="right")


@pytest.mark.parametrize("name", ["stablelm", "stablelm_parallel"])
def test_stablelm_per_head_norms_in_both_versions(name, device, monkeypatch):
    """StableLM's ``qk_layernorm``: one LayerNorm per query head and per key/value head, each read for its own head
    (their weights moved apart). transformers 4.52 cannot build it (its ``_init_weights`` zeroes every LayerNorm's
    bias, which these lack), so it is built here with that initialisation left out for them."""
    base = transformers().StableLmPreTrainedModel
    initialise = base._init_weights

    def _init_weights(self: Any, module: nn.Module) -> None:
        if not (isinstance(module, nn.LayerNorm) and module.bias is None):
            initialise(self, module)

    monkeypatch.setattr(base, "_init_weights", _init_weights)
    hf_model = _moved_norms(model(name, qk_layernorm=True).to(device))
    attention = from_transformers(hf_model).encoder.field.layers[0].parts[0].branch
    assert attention.q_norm is hf_model.model.layers[0].self_attn.q_layernorm
    assert len(attention.k_norm.norms) == 2
    _assert_exact(name, hf_model, device)


def test_phi3_longrope_is_the_models_own_rotary(device):
    """LongRoPE (short and long factors per frequency) past ``original_max_position_embeddings``: the model's own
    rotary module gives the angles, so the converted model follows its scaling, which changes the output."""
    scaling = {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 3.0, 5.0, 8.0]}
    plain = dict(partial_rotary_factor=1.0, max_position_embeddings=16)
    hf_model = model("phi3", **plain, rope_scaling=scaling, original_max_position_embeddings=4).to(device)
    assert hf_model.model.rotary_emb.rope_type == "longrope"
    _assert_exact("phi3", hf_model, device)
    ids, _ = inputs("phi3", "none", device)
    with torch.no_grad():
        assert max_diff(hf_output(hf_model, ids, None), hf_output(model("phi3", **plain).to(device), ids, None)) > 1e-3


@pytest.mark.cpu_only("compares the readings of configs")
def test_the_readings():
    """Phi and StableLM with ``use_parallel_residual``: one Euler step of both branches (a parallel field); Phi-3
    and StableLM's sequential block: one Lie-Trotter step."""
    readings = {name: from_transformers(model(name)).encoder.field.layers[0] for name in _SPECIMENS}
    assert {name: type(layer).__name__ for name, layer in readings.items()} == {
        "phi": "ParallelField",
        "phi3": "SplitField",
        "stablelm": "SplitField",
        "stablelm_parallel": "ParallelField",
    }


@pytest.mark.parametrize(
    ("name", "rates"),
    [
        ("phi", dict(resid_pdrop=0.3, embd_pdrop=0.3)),
        ("phi3", dict(resid_pdrop=0.3)),
        ("stablelm", dict(hidden_dropout=0.3)),
        ("stablelm_parallel", dict(hidden_dropout=0.3)),
    ],
)
def test_dropouts_are_drawn_as_hugging_face_draws_them(name, rates, device):
    """Phi's ``embed_dropout`` and ``resid_dropout`` (one draw per branch), Phi-3's ``resid_attn_dropout`` and
    ``resid_mlp_dropout``, StableLM's ``dropout`` on the MLP branch alone: in training mode the converted model draws
    the same masks in the same order, so under one seed it equals the Hugging Face model."""
    hf_model = model(name, **rates).to(device).train()
    converted = from_transformers(hf_model)
    ids, _ = inputs(name, "none", device)
    torch.manual_seed(7)
    expected = hf_output(hf_model, ids, None)
    torch.manual_seed(7)
    got = converted(ids)
    torch.manual_seed(8)
    assert max_diff(got, expected) <= 1e-10 and max_diff(converted(ids), expected) > 1e-3


@pytest.mark.parametrize("name", ["phi", "phi3", "stablelm"])
def test_the_attention_reads_the_attention_dropout(name, device):
    converted = from_transformers(model(name, attention_dropout=0.2).to(device))
    assert [layer.parts[0].branch.dropout for layer in converted.encoder.field.layers] == [0.2] * 3


@pytest.mark.parametrize("name", ["phi", "phi3", "stablelm"])
def test_token_classification_is_refused_by_name(name, device):
    prefix = {"phi": "Phi", "phi3": "Phi3", "stablelm": "StableLm"}[name]
    hf_model = getattr(transformers(), f"{prefix}ForTokenClassification")(config(name)).to(device)
    with pytest.raises(TypeError, match=f"cannot read the head of {prefix}ForTokenClassification"):
        from_transformers(hf_model)


@pytest.mark.cpu_only("inspects the registry")
def test_the_families_are_registered():
    names = {name for family in hf.families() for name in family.base_classes}
    assert {"PhiModel", "Phi3Model", "StableLmModel"} <= names
