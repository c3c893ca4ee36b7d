"""What is particular to Mixtral, StarCoder2, Falcon, OPT and OLMo (their exactness, heads, gradients and orders are
checked with every family in ``tests/test_hf_families.py``): Falcon's projection layouts, OPT's positions and post-LN
blocks, the dropouts read, the refusals."""

from __future__ import annotations

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters import huggingface as hf
from tests._hf_zoo import compared, config, inputs, model
from tests._huggingface import hf_output, max_diff, transformers
from tests.test_convergence import fitted_order


def test_the_attention_reads_the_layout_of_falcon_projections(device):
    """Multi-query (one key/value head), grouped (``num_kv_heads`` groups) and per-head fused projections."""
    heads = {}
    for name in ("falcon", "falcon_grouped", "falcon_sequential"):
        converted = from_transformers(model(name).to(device))
        attention = converted.encoder.field.layers[0].parts[0].branch
        heads[name] = (attention.num_heads, attention.num_kv_heads)
    assert heads == {"falcon": (4, 1), "falcon_grouped": (4, 2), "falcon_sequential": (4, 4)}


def test_dropout_matches_in_training_mode_where_it_is_off(device):
    """Residual and embedding dropouts are read (StarCoder2's ``residual_dropout``, ``embedding_dropout``;
    Falcon's sequential ``attention_dropout``/``hidden_dropout``): with them the two models are random in
    training mode and equal in eval mode; the converted model follows the Hugging Face model's mode."""
    for name, rates in (
        ("starcoder2", dict(residual_dropout=0.3, embedding_dropout=0.3)),
        ("falcon_sequential", dict(attention_dropout=0.3, hidden_dropout=0.3)),
    ):
        hf_model = model(name, **rates).to(device)
        converted = from_transformers(hf_model)
        ids, _ = inputs(name, "none", device)
        with torch.no_grad():
            assert max_diff(converted(ids), hf_output(hf_model, ids, None)) <= 1e-10
            converted.train()
            assert hf_model.training and max_diff(converted(ids), converted(ids)) > 1e-3
        dropouts = [m for m in converted.encoder.modules() if isinstance(m, torch.nn.Dropout)]
        assert dropouts and all(m.p == 0.3 for m in dropouts if m.p)


def test_unread_variants_raise_type_errors_naming_them(device):
    with pytest.raises(TypeError, match="cannot read FalconDecoderLayer with alibi=True"):
        from_transformers(model("falcon", alibi=True))
    with pytest.raises(TypeError, match="cannot read FalconDecoderLayer with hidden_dropout=0.1 on a parallel block"):
        from_transformers(model("falcon", hidden_dropout=0.1))
    with pytest.raises(TypeError, match="cannot read the head of MixtralForTokenClassification"):
        from_transformers(transformers().MixtralForTokenClassification(config("mixtral")))
    hf_model = model("starcoder2")
    hf_model.model.layers[1] = torch.nn.Identity()
    with pytest.raises(TypeError, match="cannot read Identity: the blocks of Starcoder2Model it reads are Starcoder2"):
        from_transformers(hf_model)


@pytest.mark.cpu_only("inspects the registry")
def test_the_families_are_registered():
    names = {name for family in hf.families() for name in family.base_classes}
    assert {"Starcoder2Model", "MixtralModel", "FalconModel", "OPTModel"} <= names


def test_top_k_routing_makes_the_field_jump_and_loses_the_orders(device):
    """Mixtral's top-2 of 4 experts: the field jumps where two experts swap rank, so Strang and RK4 fall to about
    first order (the module docstring's warning); routing every expert restores them (``tests/test_hf_families.py``)."""
    converted = from_transformers(model("mixtral", "base", num_hidden_layers=2).to(device))
    ids, mask = inputs("mixtral", "right", device, batch=2)
    steps = [4, 8, 16]
    with torch.no_grad():
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / 64)
        reference = converted(ids, mask)
        errors = []
        for n in steps:
            neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / n)
            errors.append(max_diff(converted(ids, mask), reference, mask.bool()))
    assert fitted_order([1 / n for n in steps], errors) < 2.0, errors


def test_opt_post_norm_blocks_read_like_bert(device):
    """OPT-350m's post-LN block: attention, ``PostNorm(LN_1)``, MLP, ``PostNorm(LN_2)``; a pre-LN block: two parts."""
    post = from_transformers(model("opt_post_norm").to(device)).encoder.field.layers[0].parts
    pre = from_transformers(model("opt").to(device)).encoder.field.layers[0].parts
    names = [type(part.branch).__name__ for part in post]
    assert names == ["_OPTAttention", "PostNorm", "Sequential", "PostNorm"] and len(pre) == 2


def test_opt_positions_count_the_real_tokens(device):
    """Left padding shifts OPT's positions (``cumsum(mask) * mask - 1``, offset by 2 in the table): the converted model
    computes them from the attention mask as Hugging Face does, and given ``position_ids`` win over the mask."""
    from neuralode_tf.models.converters.huggingface.opt import opt_positions

    hf_model = model("opt").to(device)
    converted = from_transformers(hf_model)
    ids, mask = inputs("opt", "left", device)
    assert torch.equal(opt_positions(mask)[2], torch.tensor([-1] * 6 + [0, 1, 2, 3], device=device))
    with torch.no_grad():
        counted = converted(ids, mask)
        where = compared("opt", mask)
        assert max_diff(counted, hf_output(hf_model, ids, mask), where) <= 1e-10
        plain = torch.arange(ids.shape[1], device=device).expand_as(ids)
        assert max_diff(converted(ids, mask, position_ids=plain), counted) > 1e-3
        expected = hf_model(input_ids=ids, attention_mask=mask, position_ids=plain).logits
        assert max_diff(converted(ids, mask, position_ids=plain), expected, where) <= 1e-10


def test_opt_reads_the_installed_query_scaling(device):
    """OPT scales its queries by ``d_h^{-1/2}``; transformers before huggingface/transformers#38290 (4.52.1) scaled the
    logits once more. The reading follows the installed attention, so both ends of the range are exact (above)."""
    from neuralode_tf.models.converters.huggingface.opt import _scales_twice

    hf_model = model("opt").to(device)
    attention = from_transformers(hf_model).encoder.field.layers[0].parts[0].branch
    twice = _scales_twice(hf_model.model.decoder.layers[0].self_attn)
    assert attention.scale == (0.125**0.5 if twice else 1.0) and attention.query_scale == 8**-0.5


def test_opt_refuses_layerdrop_by_name(device):
    with pytest.raises(TypeError, match="cannot read OPTDecoderLayer with layerdrop=0.1"):
        from_transformers(model("opt", layerdrop=0.1).to(device))


def test_olmo_clips_its_projections_and_olmo2_normalises_its_branch_outputs(device):
    """The zoo's OLMo clips at 0.05 a projection whose values reach past it (so the clip bites, and the exact match
    covers it); OLMo 2's attention has no pre-norm, and its branches end in their norms."""
    hf_model = model("olmo", "base").to(device)
    attention = from_transformers(hf_model).encoder.field.layers[0].parts[0].branch
    ids = inputs("olmo", "none", device)[0]
    with torch.no_grad():
        h = attention.norm(hf_model.embed_tokens(ids))
        assert attention.clip == 0.05 and float(attention.q_proj(h).abs().max()) > 0.1
        unclipped = model("olmo", "base", clip_qkv=None).to(device)
        assert max_diff(hf_output(hf_model, ids, None), hf_output(unclipped, ids, None)) > 1e-3
    olmo2 = model("olmo2", "base").to(device)
    parts = from_transformers(olmo2).encoder.field.layers[0].parts
    layer = olmo2.layers[0]
    assert isinstance(parts[0].branch.norm, torch.nn.Identity)
    assert parts[0].branch.out[1] is layer.post_attention_layernorm
    assert list(parts[1].branch) == [layer.mlp, layer.post_feedforward_layernorm]
