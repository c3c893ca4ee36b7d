"""EA-BERT: evolving attention added to a converted BERT or RoBERTa (``from_transformers(model, evolving=...)``).
With ``α = β = 0`` it is the Hugging Face model; one step per block is eq. 4 by hand around the Hugging Face layers;
padding never reaches a real token; and the blocks with their carried logits are an ODE that other methods and
adjoints integrate (random-weight models from small configs, float64)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import neuralode_tf
from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters.huggingface import EvolvingTransformersAttention, EvolvingTransformersStack
from tests._huggingface import HEADS, LAYERS, hf_output, inputs, max_diff, model, two_blocks
from tests.test_convergence import fitted_order

EA = dict(alpha=0.3, beta=0.6)


@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize(
    ("family", "task"), [("bert", "sequence_classification"), ("bert", "base"), ("roberta", "sequence_classification")]
)
def test_alpha_and_beta_zero_is_the_hf_model(family, task, padding, device):
    """Every position, padded ones too (left padding puts BERT's pooled first token at a padded position)."""
    hf_model = model(family, task).to(device)
    converted = from_transformers(hf_model, evolving=dict(alpha=0.0, beta=0.0))
    ids, mask = inputs(family, padding, device)
    with torch.no_grad():
        assert max_diff(converted(ids, mask), hf_output(hf_model, ids, mask)) <= 1e-10


def test_training_mode_keeps_the_attention_dropout(device):
    """In training mode the attention probabilities go through the block's dropout as in Hugging Face's eager
    attention: with the same random state, ``α = β = 0`` draws the same masks and gives the same output."""
    hf_model = model("bert", "base", attention_probs_dropout_prob=0.3, attn_implementation="eager").to(device).train()
    converted = from_transformers(hf_model, evolving=dict(alpha=0.0, beta=0.0))
    ids, mask = inputs("bert", "right", device)
    outputs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        outputs.append(converted(ids, mask))
    torch.manual_seed(5)
    assert max_diff(outputs[0], hf_output(hf_model, ids, mask)) <= 1e-10
    assert max_diff(outputs[0], outputs[1]) == 0.0 and max_diff(outputs[0], outputs[2]) > 1e-3


def _discrete_ea(hf_model, converted, ids, mask, alpha, beta):
    """EA-BERT's blocks by hand around the Hugging Face layers (eq. 4; block 0 has no previous map): logits of padded
    rows and columns zeroed before the convolution and in the carried map, padded keys -inf in the softmax."""
    bert = hf_model.base_model
    x = bert.embeddings(input_ids=ids)
    batch, n, width = x.shape
    pad = ~mask.bool()
    hidden = pad[:, None, :, None] | pad[:, None, None, :]
    carried = None
    for index, layer in enumerate(bert.encoder.layer):
        attention = layer.attention.self
        q, k, v = (
            p(x).view(batch, n, HEADS, -1).transpose(1, 2) for p in (attention.query, attention.key, attention.value)
        )
        logits = q @ k.transpose(-1, -2) / math.sqrt(width // HEADS)
        if index > 0:
            conv = converted.encoder.field.attentions[index].conv
            mixed = alpha * carried + (1 - alpha) * logits
            convolved = F.conv2d(
                mixed.masked_fill(hidden, 0.0), conv.weight, conv.bias, padding=conv.kernel_size[0] // 2
            )
            logits = beta * F.relu(convolved) + (1 - beta) * mixed
        weights = logits.masked_fill(pad[:, None, None, :], -math.inf).softmax(-1)
        x = layer.attention.output((weights @ v).transpose(1, 2).reshape(batch, n, width), x)
        x = layer.output(layer.intermediate(x), x)
        carried = logits.masked_fill(hidden, 0.0)
    return x


@pytest.mark.parametrize("kernel_size", [1, 3, 5])
@pytest.mark.parametrize("padding", ["right", "left"])
def test_one_step_per_block_is_eq_4_by_hand(padding, kernel_size, device):
    hf_model = model("bert", "base").to(device)
    converted = from_transformers(hf_model, evolving=dict(EA, kernel_size=kernel_size))
    assert converted.encoder.solve_options["method"] == "lie_trotter"
    assert converted.encoder.solve_options["step_size"] == 1.0
    ids, mask = inputs("bert", padding, device)
    with torch.no_grad():
        expected = _discrete_ea(hf_model, converted, ids, mask, **EA)
        got = converted(ids, mask)
        assert max_diff(got, expected) <= 1e-10
        assert max_diff(got, hf_output(hf_model, ids, mask)) > 1e-3  # the convolutions change the model


def test_padding_never_reaches_a_real_token(device):
    """Right padding: each sequence's real positions are those of the sequence alone, whatever the padded ids."""
    hf_model = model("bert", "base").to(device)
    converted = from_transformers(hf_model, evolving=EA)
    ids, mask = inputs("bert", "right", device)
    noise = torch.randint(2, 97, ids.shape, generator=torch.Generator().manual_seed(3)).to(device)
    with torch.no_grad():
        padded = converted(ids, mask)
        other = converted(torch.where(mask.bool(), ids, noise), mask)
        for row, length in enumerate(mask.sum(-1).tolist()):
            alone = converted(ids[row : row + 1, :length])
            assert max_diff(padded[row, :length], alone[0]) <= 1e-10
            assert max_diff(other[row, :length], alone[0]) <= 1e-10


def test_the_first_block_has_no_convolution_and_the_rest_share_the_hf_parameters(device):
    """``L - 1`` convolutions of ``H² k² + H`` parameters are the only new ones; the others are the Hugging Face
    model's own ``Parameter`` objects, and back-propagation reaches both."""
    hf_model = model("bert", "sequence_classification").to(device)
    converted = from_transformers(hf_model, evolving=dict(EA, kernel_size=5))
    attentions = converted.encoder.field.attentions
    assert [a.conv is None for a in attentions] == [True] + [False] * (LAYERS - 1)
    new = {id(p) for p in converted.parameters()} - {id(p) for p in hf_model.parameters()}
    assert {id(p) for a in attentions[1:] for p in a.conv.parameters()} == new
    assert sum(p.numel() for a in attentions[1:] for p in a.conv.parameters()) == (LAYERS - 1) * (HEADS**2 * 25 + HEADS)
    assert {id(p) for p in hf_model.parameters()} <= {id(p) for p in converted.parameters()}
    assert all(
        a.conv.weight.dtype == torch.float64 and a.conv.weight.device.type == device.type for a in attentions[1:]
    )
    torch.manual_seed(7)  # nn.Conv2d's initialisation from torch's random state, block 1 first
    again = from_transformers(hf_model, evolving=dict(EA, kernel_size=5)).encoder.field.attentions
    torch.manual_seed(7)
    for attention in again[1:]:
        expected = torch.nn.Conv2d(HEADS, HEADS, 5)
        assert torch.equal(attention.conv.weight.cpu(), expected.weight.double())
        assert torch.equal(attention.conv.bias.cpu(), expected.bias.double())
    ids, mask = inputs("bert", "right", device)
    converted(ids, mask).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in converted.parameters() if p.requires_grad)


def _ode(device, **solve_options):
    hf_model = model("bert", "base", **two_blocks("bert")).to(device)
    return hf_model, from_transformers(hf_model, evolving=EA, **solve_options)


@pytest.mark.parametrize(("method", "steps"), [("midpoint", [2, 4, 8, 16]), ("rk4", [1, 2, 4, 8])])
def test_more_steps_converge(method, steps, device):
    """The state is ``(x, A)``: rk4 and midpoint with more steps per block converge to the flow (errors against rk4
    with 64 steps per block); the ReLU makes the field piecewise smooth, so the fitted order is only bounded below."""
    _, converted = _ode(device)
    assert isinstance(converted.encoder.field, EvolvingTransformersStack)
    ids, mask = inputs("bert", "right", device, batch=2)
    with torch.no_grad():
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / 64)
        reference = converted(ids, mask)
        errors = []
        for n in steps:
            neuralode_tf.set_solve_options(converted, method=method, step_size=1 / n)
            errors.append(max_diff(converted(ids, mask), reference, mask.bool()))
    fitted = fitted_order([1 / n for n in steps], errors)
    assert fitted >= 0.8 and all(b < a for a, b in zip(errors, errors[1:])), f"errors {errors}, order {fitted:.2f}"


def test_the_ode_starts_at_rest_in_the_first_block(device):
    """``A(0)`` is the first block's logits of the embedding: several Lie-Trotter steps in block 0 keep the first
    sub-step's rate on ``A`` zero, and the carried map is 0 at padded entries."""
    hf_model, converted = _ode(device)
    ids, mask = inputs("bert", "right", device, batch=2)
    x = converted.family.embed(converted.base, ids, None, None)
    field = converted.encoder.field
    field.attentions[0].attention.bind(key_padding_mask=~mask.bool())
    with torch.no_grad():
        state = field.initial_state(x)
        _, rate = field.layers[0].parts[0](torch.zeros((), dtype=x.dtype), state)
    pad = ~mask.bool()
    assert max_diff(rate, torch.zeros_like(rate)) <= 1e-12
    assert torch.all(state[1][(pad[:, None, :, None] | pad[:, None, None, :]).expand_as(state[1])] == 0)


def test_adjoint_gradients_match_backprop(device):
    """``gradient="adjoint"`` (torchdiffeq) integrates the gradient backwards through the augmented state, into the
    Hugging Face parameters and the convolutions."""
    hf_model, converted = _ode(device, method="dopri5", rtol=1e-9, atol=1e-9)
    ids, mask = inputs("bert", "right", device, batch=2)
    gradients = []
    for adjoint in ("backprop", "adjoint"):
        converted.zero_grad(set_to_none=True)
        neuralode_tf.set_solve_options(converted, gradient=adjoint)
        converted(ids, mask).sin().sum().backward()
        gradients.append({name: p.grad.clone() for name, p in converted.named_parameters() if p.grad is not None})
    backprop, adjoint = gradients
    assert converted.encoder.stats.backend == "torchdiffeq" and converted.encoder.stats.nfe_backward > 0
    assert adjoint.keys() == backprop.keys() and any(".conv." in name for name in backprop)
    scale = max(float(g.abs().max()) for g in backprop.values())
    assert max(max_diff(adjoint[name], backprop[name]) for name in backprop) <= 1e-5 * scale


def test_refused_models_and_settings(device):
    with pytest.raises(TypeError, match="added to BERT and RoBERTa encoders, not to GPT2Model"):
        from_transformers(model("gpt2").to(device), evolving=EA)
    bert = model("bert").to(device)
    for settings in ({"alpha": 0.1}, {**EA, "gamma": 1.0}, 0.1):
        with pytest.raises(TypeError, match="evolving must be a mapping with alpha and beta"):
            from_transformers(bert, evolving=settings)
    with pytest.raises(ValueError, match="beta must be a number in"):
        from_transformers(bert, evolving=dict(alpha=0.1, beta=1.5))
    with pytest.raises(ValueError, match="kernel_size must be a positive odd integer"):
        from_transformers(bert, evolving=dict(EA, kernel_size=4))
    with pytest.raises(ValueError, match="transport_cost is not supported with evolving attention"):
        from_transformers(bert, evolving=EA, transport_cost=0.1)
    attention = from_transformers(model("llama").to(device)).encoder.field.layers[0].parts[0].branch
    with pytest.raises(TypeError, match="causal, windowed or grouped-query"):
        EvolvingTransformersAttention(attention, **EA)
