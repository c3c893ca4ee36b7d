"""What is particular to DistilBERT, ALBERT and ELECTRA (their exactness, heads, gradients and orders are checked with
every family in ``tests/test_hf_families.py``): ALBERT's shared layer as an autonomous field and its groupings, the
projected embeddings, the refusals, and evolving attention (EA, Wang et al. 2021 §4.2) added to the three, as
``tests/test_ea_bert.py`` checks it on BERT."""

from __future__ import annotations

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from tests._hf_zoo import HEADS, LAYERS, config, inputs, model, two_blocks
from tests._huggingface import hf_output, hf_zeroes_blind_queries, max_diff, transformers
from tests.test_convergence import fitted_order

EA = dict(alpha=0.3, beta=0.6)
ENCODERS = ("distilbert", "albert", "electra")


def _tokens(converted, ids, mask):
    """``x(0)`` and the padding mask the encoder takes."""
    return converted.family.embed(converted.base, ids, None, None), None if mask is None else ~mask.bool()


def test_albert_reads_one_shared_layer_as_an_autonomous_field(device):
    """One layer over ``[0, L]``: no jump times, no domain; ``parameters()`` yields each tensor once, the Hugging
    Face model's own."""
    hf_model = model("albert").to(device)
    converted = from_transformers(hf_model)
    field = converted.encoder.field
    assert len(field.layers) == 1 and field.depth == LAYERS
    assert field.jump_times == [] and field.domain is None
    params = list(converted.parameters())
    assert len(params) == len({id(p) for p in params}) == len(list(hf_model.parameters()))


def test_albert_flow_of_the_stack_is_the_flow_of_one_block_composed(device):
    """``φ_{[0, L]} = φ_{[0, 1]}^L`` (RK4, step 1/4): the shared layer's field does not read ``t``; a stack of distinct
    layers (3 groups) is no such composition."""
    ids, mask = inputs("albert", "right", device)
    gaps = []
    for groups in (1, 3):
        hf_model = model("albert", "base", num_hidden_groups=groups).to(device)
        stack = from_transformers(hf_model, method="rk4", step_size=0.25)
        block = from_transformers(hf_model, method="rk4", step_size=0.25, t1=1.0)
        x, padding = _tokens(stack, ids, mask)
        with torch.no_grad():
            composed = x
            for _ in range(LAYERS):
                composed = block.encoder(composed, key_padding_mask=padding)
            gaps.append(max_diff(stack.encoder(x, key_padding_mask=padding), composed))
    assert gaps[0] <= 1e-12 and gaps[1] > 1e-3


def test_albert_steps_need_not_align_with_the_blocks(device):
    """RK4 with step 3/4 on ``[0, 3]``: 4 equal steps for the shared layer; a stack of 3 distinct layers puts a grid
    point on each boundary (6 steps), and declares the jumps that adaptive solvers step onto."""
    ids, mask = inputs("albert", "right", device)
    steps, jumps = [], []
    for groups in (1, 3):
        converted = from_transformers(
            model("albert", num_hidden_groups=groups).to(device), method="rk4", step_size=0.75
        )
        with torch.no_grad():
            converted(ids, mask)
        steps.append(converted.encoder.stats.n_accepted)
        jumps.append(converted.encoder.field.jump_times)
    assert steps == [4, 6] and jumps == [[], [1.0, 2.0]]


@pytest.mark.parametrize(
    ("overrides", "layers", "jumps"),
    [(dict(num_hidden_layers=6, num_hidden_groups=3), 3, [2.0, 4.0]), (dict(inner_group_num=2), 6, [1.0, 2.0, 3.0])],
)
def test_albert_groups_are_read_as_hugging_face_applies_them(overrides, layers, jumps, device):
    """3 groups over 6 blocks: a weight-shared field of 3 layers, 2 blocks each; a group of 2 layers cycled over 3
    blocks: 6 blocks, whose repeats share their parts (the same modules)."""
    hf_model = model("albert", "base", **overrides).to(device)
    converted = from_transformers(hf_model)
    field = converted.encoder.field
    assert len(field.layers) == layers and field.jump_times[:3] == jumps
    if layers == 6:
        assert field.layers[0].parts[0].branch is field.layers[2].parts[0].branch
        assert field.layers[0].parts[0].branch is not field.layers[1].parts[0].branch
    ids, mask = inputs("albert", "left", device)
    with torch.no_grad():
        assert max_diff(converted(ids, mask), hf_output(hf_model, ids, mask)) <= 1e-10


@pytest.mark.parametrize("name", ["electra", "albert"])
def test_a_projected_embedding_starts_the_tokens_at_its_own_scale(name, device):
    """Embedding width 16, hidden 32: ``x(0)`` is the projection (scale about 0.2 at initializer_range 0.05), where
    the post-norm relaxations vary fast: RK4 is far from its order with 4-16 steps per block and reaches it from 32."""
    converted = from_transformers(model(name, "base", **two_blocks(name)).to(device))
    ids, mask = inputs(name, "right", device, batch=2)
    with torch.no_grad():
        x, _ = _tokens(converted, ids, mask)
        assert x.shape[-1] == 32 and 0.1 < float(x.std(-1).mean()) < 0.4
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / 512)
        reference = converted(ids, mask)
        errors = {}
        for n in (4, 8, 16, 32, 64, 128):
            neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / n)
            errors[n] = max_diff(converted(ids, mask), reference, mask.bool())
    coarse = fitted_order([1 / n for n in (4, 8, 16)], [errors[n] for n in (4, 8, 16)])
    fine = fitted_order([1 / n for n in (32, 64, 128)], [errors[n] for n in (32, 64, 128)])
    assert coarse < 3.5 and abs(fine - 4) <= 0.3, f"{name}: errors {errors}"


@pytest.mark.parametrize(
    ("name", "overrides"),
    [("electra", dict(embedding_size=32)), ("distilbert", dict(sinusoidal_pos_embds=True, activation="relu"))],
)
def test_variants_read_exactly(name, overrides, device):
    """ELECTRA with ``embedding_size`` equal to the hidden size (no ``embeddings_project``); DistilBERT with sinusoidal
    positions (the same table, filled with sinusoids) and ReLU."""
    hf_model = model(name, **overrides).to(device)
    assert not hasattr(hf_model.base_model, "embeddings_project")
    ids, mask = inputs(name, "right", device)
    with torch.no_grad():
        assert max_diff(from_transformers(hf_model)(ids, mask), hf_output(hf_model, ids, mask)) <= 1e-10


def test_unread_settings_raise_type_errors_naming_them(device):
    ids, _ = inputs("distilbert", "none", device)
    with pytest.raises(ValueError, match="DistilBertModel takes no token_type_ids"):
        from_transformers(model("distilbert").to(device))(ids, token_type_ids=torch.zeros_like(ids))
    with pytest.raises(TypeError, match="cannot read the head of DistilBertForTokenClassification"):
        from_transformers(transformers().DistilBertForTokenClassification(config("distilbert")))
    with pytest.raises(TypeError, match="cannot read ElectraLayer with is_decoder=True"):
        from_transformers(model("electra", "base", is_decoder=True))
    if hf_zeroes_blind_queries():  # transformers 5 builds no relative positions for ALBERT and ELECTRA
        return
    for name in ("albert", "electra"):
        with pytest.raises(TypeError, match="with position_embedding_type='relative_key': only absolute"):
            from_transformers(model(name, "base", position_embedding_type="relative_key"))


# Evolving attention on the three encoders


@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("task", ["sequence_classification", "base"])
@pytest.mark.parametrize("name", ENCODERS)
def test_ea_with_alpha_and_beta_zero_is_the_hf_model(name, task, padding, device):
    hf_model = model(name, task).to(device)
    converted = from_transformers(hf_model, evolving=dict(alpha=0.0, beta=0.0))
    ids, mask = inputs(name, padding, device)
    with torch.no_grad():
        assert max_diff(converted(ids, mask), hf_output(hf_model, ids, mask)) <= 1e-10
        ea = from_transformers(hf_model, evolving=EA)
        assert max_diff(ea(ids, mask), hf_output(hf_model, ids, mask)) > 1e-5  # the convolutions change the model


@pytest.mark.parametrize("name", ENCODERS)
def test_ea_adds_l_minus_1_convolutions_and_gradients_reach_all_parameters(name, device):
    """The first block has no convolution; the ``L - 1`` others of ``H² k² + H`` parameters are the only new ones;
    back-propagation reaches them and the Hugging Face parameters, each yielded once by ``parameters()``."""
    hf_model = model(name, "sequence_classification").to(device)
    converted = from_transformers(hf_model, evolving=dict(EA, kernel_size=5))
    attentions = converted.encoder.field.attentions
    assert [a.conv is None for a in attentions] == [True] + [False] * (LAYERS - 1)
    new = {id(p) for p in converted.parameters()} - {id(p) for p in hf_model.parameters()}
    assert {id(p) for a in attentions[1:] for p in a.conv.parameters()} == new
    assert sum(p.numel() for a in attentions[1:] for p in a.conv.parameters()) == (LAYERS - 1) * (HEADS**2 * 25 + HEADS)
    params = list(converted.parameters())
    assert len(params) == len({id(p) for p in params}) == len(list(hf_model.parameters())) + 2 * (LAYERS - 1)
    ids, mask = inputs(name, "right", device)
    converted(ids, mask).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in converted.parameters() if p.requires_grad)


def test_ea_albert_keeps_the_shared_layer_and_adds_a_convolution_per_block(device):
    """Every EA block reads the one shared attention (the same query/key/value modules) with its own convolution, so
    the EA field jumps at the integer times where ALBERT's own field does not."""
    converted = from_transformers(model("albert").to(device), evolving=EA)
    field = converted.encoder.field
    shared = {id(a.attention) for a in field.attentions}
    assert len(shared) == 1 and len({id(a.conv) for a in field.attentions[1:]}) == LAYERS - 1
    assert field.jump_times == [1.0, 2.0]


@pytest.mark.parametrize("name", ENCODERS)
def test_ea_more_steps_converge(name, device):
    """The augmented state ``(x, A)``: RK4 with more steps per block converges to the flow (errors against 64 steps
    per block; the ReLU makes the field piecewise smooth, so the fitted order is only bounded below)."""
    converted = from_transformers(
        model(name, "base", **two_blocks(name), initializer_range=0.15).to(device), evolving=EA
    )
    ids, mask = inputs(name, "right", device, batch=2)
    steps = [1, 2, 4, 8]
    with torch.no_grad():
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / 64)
        reference = converted(ids, mask)
        errors = []
        for n in steps:
            neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / n)
            errors.append(max_diff(converted(ids, mask), reference, mask.bool()))
    fitted = fitted_order([1 / n for n in steps], errors)
    assert fitted >= 0.8 and all(b < a for a, b in zip(errors, errors[1:])), f"errors {errors}, order {fitted:.2f}"
