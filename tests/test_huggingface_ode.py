"""A converted Hugging Face model is an ODE: more steps per block converge to its flow at the method's order,
adaptive solves and adjoint gradients work, and the post-norm (BERT) reading is an ODE too."""

from __future__ import annotations

import warnings

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from neuralode_tf.numerics import CausalityWarning
from tests._hf_checks import check_adjoint_gradients
from tests._huggingface import inputs, max_diff, model, two_blocks
from tests.test_convergence import fitted_order

ORDERS = [
    # family, method, substep, theoretical order, steps per block
    ("gpt2", "lie_trotter", None, 1, [4, 8, 16, 32]),
    ("gpt2", "strang", "midpoint", 2, [2, 4, 8, 16]),
    ("gpt2", "rk4", None, 4, [1, 2, 4]),
    ("qwen3", "lie_trotter", None, 1, [4, 8, 16, 32]),
    ("qwen3", "strang", "midpoint", 2, [2, 4, 8, 16]),
    ("qwen3", "rk4", None, 4, [4, 8, 16]),
    ("gpt_neox", "euler", None, 1, [8, 16, 32, 64]),
    ("gpt_neox", "rk4", None, 4, [2, 4, 8]),
    ("bert", "lie_trotter", None, 1, [4, 8, 16, 32]),
    ("bert", "rk4", None, 4, [4, 8, 16]),
]
"""Lie-Trotter is first order whatever the sub-step, Strang second with a second-order sub-step; float64 base
models of two blocks, errors against rk4 with 64 steps per block."""


def _converted(family: str, device: torch.device, **solve_options):
    hf_model = model(family, "base", **two_blocks(family)).to(device)
    return hf_model, from_transformers(hf_model, **solve_options)


@pytest.mark.parametrize(("family", "method", "substep", "order", "steps"), ORDERS)
def test_more_steps_per_block_converge_at_the_method_order(family, method, substep, order, steps, device):
    _, converted = _converted(family, device)
    ids, mask = inputs(family, "right", device, batch=2)
    with torch.no_grad():
        neuralode_tf.set_solve_options(converted, method="rk4", step_size=1 / 64)
        reference = converted(ids, mask)
        errors = []
        for n in steps:
            options = {"substep": substep} if substep else {}
            neuralode_tf.set_solve_options(converted, method=method, step_size=1 / n, **options)
            errors.append(max_diff(converted(ids, mask), reference, mask.bool()))
    fitted = fitted_order([1 / n for n in steps], errors)
    assert abs(fitted - order) <= 0.3, f"{family} {method}: errors {errors}, fitted order {fitted:.2f}"
    assert errors[-1] < errors[0]


def test_the_post_norm_part_relaxes_towards_the_norm(device):
    """BERT's reading with ``h < 1``: an Euler sub-step of the norm's part moves the fraction ``h`` of the way to
    ``N(x)``, ``x + h (N(x) - x)``, so several steps per block integrate the relaxation, not repeat ``N``."""
    _, converted = _converted("bert", device, method="lie_trotter", step_size=0.25)
    part = converted.encoder.field.layers[0].parts[1]
    x = torch.randn(2, 5, 32, dtype=torch.float64, device=device)
    step = x + 0.25 * part(torch.zeros((), dtype=torch.float64), x)
    assert max_diff(step, 0.75 * x + 0.25 * part.branch.norm(x)) <= 1e-14


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_an_adaptive_solve_reaches_the_flow(family, device):
    _, converted = _converted(family, device, method="rk4", step_size=1 / 64)
    ids, mask = inputs(family, "right", device, batch=2)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalityWarning)  # a decoder: the adaptive steps see every position
        reference = converted(ids, mask)
        neuralode_tf.set_solve_options(converted, method="dopri5", rtol=1e-8, atol=1e-8)
        got = converted(ids, mask)
    assert converted.encoder.stats.backend == "torchdiffeq"
    assert converted.encoder.stats.nfe > 2 * 6
    assert max_diff(got, reference, mask.bool()) <= 1e-5


def test_an_adaptive_solve_of_a_decoder_warns_that_it_is_not_exactly_causal(device):
    _, converted = _converted("llama", device, method="dopri5")
    with pytest.warns(CausalityWarning), torch.no_grad():
        converted(inputs("llama", "none", device, batch=1)[0])


@pytest.mark.parametrize("family", ["gpt2", "qwen3"])
def test_adjoint_gradients_match_backprop(family, device):
    """``gradient="adjoint"`` (torchdiffeq) integrates the gradient backwards through the Hugging Face parameters."""
    hf_model = model(family, "base", **two_blocks(family)).to(device)
    check_adjoint_gradients(hf_model, *inputs(family, "right", device, batch=2))
