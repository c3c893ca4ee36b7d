"""Every family of the zoo (``tests/hf_zoo``) read exactly and as an ODE: the default solve is the Hugging Face model
(LM head, sequence classification, base model; float64 and float32; padding none/right/left), shares and trains its
parameters, integrates its blocks' ODE at each method's order with adjoint gradients, and a decoder generates with
its key/value cache what Hugging Face's greedy decoding gives."""

from __future__ import annotations

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from tests._hf_checks import check_adjoint_gradients, check_cached_logits, check_generation
from tests._hf_zoo import DECODERS, LAYERS, VOCAB, ZOO, compared, inputs, model, two_blocks
from tests._huggingface import hf_output, max_diff
from tests.test_convergence import fitted_order

FLOAT32 = 1e-5
NAMES = list(ZOO)


def _both(hf_model, ids, mask):
    """(Hugging Face's output, the converted model's) on the same inputs."""
    with torch.no_grad():
        return hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("name", NAMES)
def test_the_default_solve_is_the_hf_model(name, padding, dtype, device):
    """The LM head's logits, batch of 3 (10, 7 and 4 real tokens), at every position (transformers 4: those whose
    query sees a key)."""
    hf_model = model(name, dtype=dtype).to(device)
    ids, mask = inputs(name, padding, device)
    expected, got = _both(hf_model, ids, mask)
    assert got.shape == expected.shape and got.dtype == dtype and torch.isfinite(got).all()
    tolerance = ZOO[name].float64 if dtype == torch.float64 else FLOAT32
    assert max_diff(got, expected, compared(name, mask, dtype)) <= tolerance


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize(("name", "task"), [(name, task) for name in NAMES for task in ZOO[name].tasks])
def test_heads_and_base_models(name, task, padding, device):
    """``*ForSequenceClassification`` (a decoder pools its last non-padding token, an encoder its first); the base
    model gives ``last_hidden_state``."""
    hf_model = model(name, task).to(device)
    ids, mask = inputs(name, padding, device)
    expected, got = _both(hf_model, ids, mask)
    assert got.shape == expected.shape
    where = compared(name, mask, torch.float64)
    if task != "base":  # a pooled head: every sequence, or (eager_blind) those whose every position is compared
        where = where.all(-1) if where is not None and ZOO[name].eager_blind else None
    assert max_diff(got, expected, where) <= ZOO[name].float64


@pytest.mark.parametrize("name", NAMES)
def test_parameters_are_shared_not_copied(name, device):
    hf_model = model(name).to(device)
    converted = from_transformers(hf_model)
    assert {id(p) for p in converted.parameters()} == {id(p) for p in hf_model.parameters()}
    field_pointers = {p.data_ptr() for p in converted.encoder.parameters()}
    assert field_pointers and field_pointers <= {p.data_ptr() for p in hf_model.base_model.parameters()}
    ids = inputs(name, "none", device)[0]
    with torch.no_grad():  # an in-place change of the Hugging Face weights changes the converted model
        before = converted(ids)
        for p in hf_model.base_model.parameters():
            p.mul_(1.5)
        assert max_diff(converted(ids), before) > 1e-3


@pytest.mark.parametrize("name", NAMES)
def test_gradients_flow_into_the_hf_parameters(name, device):
    """Backpropagating through the converted model gives the Hugging Face model's own gradients (of the positions
    compared in the forward; without padding where Hugging Face's padded float64 output has NaN, eager_blind)."""
    hf_model = model(name).to(device)
    ids, mask = inputs(name, "none" if ZOO[name].eager_blind else "right", device)
    where = compared(name, mask, torch.float64)
    weight = 1.0 if where is None else where[..., None].double()
    (hf_output(hf_model, ids, mask) * weight).square().sum().backward()
    expected = {key: p.grad.clone() for key, p in hf_model.named_parameters() if p.grad is not None}
    hf_model.zero_grad(set_to_none=True)
    (from_transformers(hf_model)(ids, mask) * weight).square().sum().backward()
    got = {key: p.grad for key, p in hf_model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys() and len(got) > 5
    scale = max(float(g.abs().max()) for g in expected.values())
    assert max(max_diff(got[key], expected[key]) for key in got) <= 10 * ZOO[name].float64 * max(scale, 1.0)


@pytest.mark.parametrize("name", NAMES)
def test_default_method_and_set_solve_options(name, device):
    """One Lie-Trotter step per block (Euler for a parallel field); another solve integrates the same ODE, and
    switching back gives the Hugging Face output again."""
    method = {"split": "lie_trotter", "parallel": "euler"}[ZOO[name].reading]
    hf_model = model(name).to(device)
    converted = from_transformers(hf_model)
    assert converted.encoder.solve_options["method"] == method
    assert converted.encoder.solve_options["step_size"] == 1.0
    assert type(converted.encoder.field.layers[0]).__name__ == f"{ZOO[name].reading.capitalize()}Field"
    ids, _ = inputs(name, "none", device)
    with torch.no_grad():
        expected = hf_output(hf_model, ids, None)
        neuralode_tf.set_solve_options(converted, method="rk4", steps=2 * LAYERS)
        assert max_diff(converted(ids), expected) > 1e-6
        neuralode_tf.set_solve_options(converted, method=method)
        assert max_diff(converted(ids), expected) <= ZOO[name].float64


_ORDERS = {
    # reading: (method, substep, theoretical order, steps per block)
    "split": [
        ("lie_trotter", None, 1, [4, 8, 16, 32]),
        ("strang", "midpoint", 2, [2, 4, 8, 16]),
        ("rk4", None, 4, None),
    ],
    "parallel": [("euler", None, 1, [8, 16, 32, 64]), ("rk4", None, 4, None)],
}
"""RK4's steps are the specimen's (``Specimen.rk4_steps``)."""


@pytest.mark.parametrize(
    ("name", "method", "substep", "order", "steps"),
    [
        (name, method, substep, order, steps or list(ZOO[name].rk4_steps))
        for name in NAMES
        for method, substep, order, steps in _ORDERS[ZOO[name].reading]
    ],
)
def test_more_steps_per_block_converge_at_the_method_order(name, method, substep, order, steps, device):
    """Fitted order of the error against rk4 with 64 steps per block (float64 base models of two blocks):
    Lie-Trotter first order, Strang second with a second-order sub-step, RK4 fourth (of a smooth field,
    ``Specimen.smooth``: Mixtral routes every expert here, ``tests/test_hf_decoders.py`` shows its top-2 routing losing
    the orders; OPT has GELU for ReLU), with ``Specimen.order_steps`` times as many steps for a stiff field."""
    converted = from_transformers(model(name, "base", **two_blocks(name), **ZOO[name].smooth).to(device))
    ids, mask = inputs(name, "right", device, batch=2)
    scale = ZOO[name].order_steps
    with torch.no_grad():
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / (64 * scale))
        reference = converted(ids, mask)
        errors = []
        for n in steps:
            options = {"substep": substep} if substep else {}
            neuralode_tf.set_solve_options(converted, method=method, step_size=1 / (n * scale), **options)
            errors.append(max_diff(converted(ids, mask), reference, mask.bool()))
    fitted = fitted_order([1 / n for n in steps], errors)
    assert abs(fitted - order) <= 0.3, f"{name} {method}: errors {errors}, fitted order {fitted:.2f}"
    assert errors[-1] < errors[0]


@pytest.mark.parametrize("name", NAMES)
def test_adjoint_gradients_match_backprop(name, device):
    """``gradient="adjoint"`` (torchdiffeq, dopri5) integrates the gradient backwards through the Hugging Face
    parameters: the gradients of backpropagating through the same solve, to its tolerance (of a smooth field, as for
    the orders: an adaptive solve across ReLU's kinks or an expert swap meets a jump of the field's derivative)."""
    hf_model = model(name, "base", **two_blocks(name), **ZOO[name].smooth).to(device)
    check_adjoint_gradients(hf_model, *inputs(name, "right", device, batch=2))


@pytest.mark.parametrize("name", DECODERS)
def test_cached_logits_are_the_full_forwards(name, device):
    check_cached_logits(model(name).to(device), VOCAB, ZOO[name].float64, device)


@pytest.mark.parametrize("name", DECODERS)
def test_generation_with_and_without_the_cache_and_hugging_faces_greedy_agree(name, device):
    check_generation(model(name).to(device), VOCAB, device)
