"""What is particular to OLMo, OLMo 2 and GPT-J (their exactness, heads, gradients, orders and cache are checked with
every family in ``tests/test_hf_families.py``): OLMo's clipped projections, the variants the zoo leaves out, OLMo 2's
norms (weights moved off their initial values), GPT-J's one LayerNorm, interleaved rotary (full and partial), segment
ids, dropouts, the float32 logits of its eager attention, the readings and the heads that are refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters import huggingface as hf
from tests._hf_zoo import compared, config, inputs, model
from tests._huggingface import hf_output, max_diff, transformers


def _moved_norms(hf_model: Any) -> Any:
    """``hf_model`` with the weights and biases of all its norms moved randomly (they start at one and zero, where a
    branch that read another norm of the block would still be exact; OLMo's norms have none)."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for module in hf_model.modules():
            if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm"):
                for parameter in module.parameters(recurse=False):
                    noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
                    parameter.add_(0.3 * noise.to(parameter.device))
    return hf_model


def _assert_exact(name: str, hf_model: Any, device: torch.device, padding: str = "left", **kwargs: Any) -> None:
    ids, mask = inputs(name, padding, device)
    with torch.no_grad():
        expected = hf_output(hf_model, ids, mask, **kwargs)
        got = from_transformers(hf_model)(ids, mask, **kwargs)
    assert max_diff(got, expected, compared(name, mask)) <= 1e-10


def test_olmo_clip_qkv_bites_and_is_read(device):
    """The zoo's ``clip_qkv = 0.05`` changes the output (the projections reach past it), and is read exactly."""
    clipped, free = model("olmo", "base").to(device), model("olmo", "base", clip_qkv=None).to(device)
    _assert_exact("olmo", clipped, device)
    ids, _ = inputs("olmo", "none", device)
    with torch.no_grad():
        assert max_diff(hf_output(clipped, ids, None), hf_output(free, ids, None)) > 1e-3


@pytest.mark.parametrize(
    ("name", "variant"),
    [
        ("olmo", dict(clip_qkv=None, num_key_value_heads=4, attention_bias=True)),
        ("olmo2", dict(num_key_value_heads=4, attention_bias=True)),
        ("olmo2", dict(clip_qkv=0.05)),  # in the config, but OLMo 2's attention clips nothing
        ("gptj", dict(rotary_dim=8)),  # the whole head rotated
    ],
)
def test_the_variants_the_zoo_leaves_out(name, variant, device):
    """OLMo without clip, one key/value head per query head, projection biases; OLMo 2 likewise; GPT-J's full
    rotary. The norms' weights are moved: OLMo 2's branch-output and query/key norms, GPT-J's shared ``ln_1``."""
    _assert_exact(name, _moved_norms(model(name, "base", **variant).to(device)), device, padding="right")


@pytest.mark.parametrize("name", ["olmo2", "gptj"])
def test_each_branch_reads_its_own_norms(name, device):
    """OLMo 2's ``post_attention_layernorm``, ``post_feedforward_layernorm``, ``q_norm``, ``k_norm`` and final norm;
    GPT-J's one ``ln_1`` for both branches and ``ln_f``: all moved, all read."""
    _assert_exact(name, _moved_norms(model(name, "base").to(device)), device)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("task", ["base", "sequence_classification"])
def test_gptj_eager_attention_has_float32_logits(task, padding, device):
    """GPT-J's ``eager`` attention (transformers 4.52's default) computes ``q kᵀ / sqrt(d_h)`` in float32 in a
    float64 model: the reading does too, to the bit (the LM head is left out: 4.52 casts its logits to float32). The
    real tokens are compared: a padded query that sees no key gets the mean of the values from eager attention."""
    hf_model = model("gptj", task, attn_implementation="eager").to(device)
    assert hf_model.config._attn_implementation == "eager"
    ids, mask = inputs("gptj", padding, device)
    with torch.no_grad():
        expected, got = hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)
    assert max_diff(got, expected, mask.bool() if task == "base" else None) <= 1e-10


def test_gptj_eager_and_sdpa_attention_differ_and_each_is_read(device):
    """transformers 5 runs GPT-J with ``sdpa`` (in the model's dtype) by default: its output differs from the eager
    attention's float32 logits by more than the float64 tolerance, and the reading follows each."""
    readings = {}
    for implementation in ("eager", "sdpa"):
        try:
            hf_model = model("gptj", "base", attn_implementation=implementation).to(device)
        except ValueError:  # transformers 4.52: eager (or FlashAttention) only
            pytest.skip(f"GPT-J has no {implementation} attention in transformers {transformers().__version__}")
        _assert_exact("gptj", hf_model, device, "right")
        readings[implementation] = hf_output(hf_model, *inputs("gptj", "none", device)).detach()
    assert max_diff(readings["eager"], readings["sdpa"]) > 1e-10


def test_gptj_segment_ids_are_embedded_by_the_token_table(device):
    hf_model = model("gptj", "base").to(device)
    ids, mask = inputs("gptj", "right", device)
    segments = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(2)).to(device)
    _assert_exact("gptj", hf_model, device, "right", token_type_ids=segments)
    with torch.no_grad():
        assert max_diff(hf_output(hf_model, ids, mask, token_type_ids=segments), hf_output(hf_model, ids, mask)) > 1e-3


def test_gptj_dropouts_are_drawn_as_hugging_face_draws_them(device):
    """GPT-J's ``drop`` on the tokens, ``resid_dropout`` on the attention and the MLP's dropout: in training mode the
    converted model draws the same masks in the same order, so under one seed it equals the Hugging Face model."""
    hf_model = model("gptj", "base", resid_pdrop=0.3, embd_pdrop=0.3).to(device).train()
    converted = from_transformers(hf_model)
    ids, _ = inputs("gptj", "none", device)
    torch.manual_seed(7)
    expected = hf_output(hf_model, ids, None)
    torch.manual_seed(7)
    got = converted(ids)
    torch.manual_seed(8)
    assert max_diff(got, expected) <= 1e-10 and max_diff(converted(ids), expected) > 1e-3


@pytest.mark.parametrize(("name", "rate"), [("gptj", "attn_pdrop"), ("olmo", "attention_dropout")])
def test_the_attention_reads_the_attention_dropout(name, rate, device):
    converted = from_transformers(model(name, **{rate: 0.2}).to(device))
    assert [layer.parts[0].branch.dropout for layer in converted.encoder.field.layers] == [0.2] * 3


@pytest.mark.cpu_only("compares the readings of configs")
def test_the_readings():
    """OLMo and OLMo 2: one Lie-Trotter step per block; GPT-J: one Euler step of both branches (a parallel field)."""
    readings = {name: from_transformers(model(name)).encoder.field.layers[0] for name in ("olmo", "olmo2", "gptj")}
    assert {name: type(layer).__name__ for name, layer in readings.items()} == {
        "olmo": "SplitField",
        "olmo2": "SplitField",
        "gptj": "ParallelField",
    }


def test_gptj_question_answering_is_refused_by_name(device):
    hf_model = transformers().GPTJForQuestionAnswering(config("gptj")).to(device)
    with pytest.raises(TypeError, match="cannot read the head of GPTJForQuestionAnswering"):
        from_transformers(hf_model)


@pytest.mark.cpu_only("inspects the registry")
def test_the_families_are_registered():
    names = {name for family in hf.families() for name in family.base_classes}
    assert {"OlmoModel", "Olmo2Model", "GPTJModel"} <= names
