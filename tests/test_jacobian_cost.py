"""RNODE's Jacobian Frobenius cost (Finlay et al. 2020) by Hutchinson's estimator (Hutchinson 1989)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.continuous import regularization
from neuralode_tf.fields import JacobianFrobenius, KineticEnergy, SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from tests._problems import backward_grads, skip_torchode_backprop_on_xla, tokens, transformer_field

COPIES = 4000
"""Independent probes per estimate: one state copied along the batch, each copy drawing its own probe."""


class _Linear(nn.Module):
    """``f(x) = x Aᵀ`` token by token: ``∂f/∂x = I_n ⊗ A`` per sample, so ``||∂f/∂x||_F² / (n d) = ||A||_F² / d``."""

    def __init__(self, matrix: torch.Tensor):
        super().__init__()
        self.matrix = matrix

    def forward(self, t, x):
        return x @ self.matrix.T


class _Tanh(_Linear):
    """``f(x) = tanh(x Aᵀ)``: a Jacobian that depends on the state."""

    def forward(self, t, x):
        return torch.tanh(x @ self.matrix.T)


def _small_field(device) -> SplitField:
    return SplitField(AttentionBranch(8, 2), MLPBranch(8)).to(device=device, dtype=torch.float64)


def _exact_rate(field: nn.Module, x: torch.Tensor) -> float:
    """``||∂f/∂x||_F² / (n d)`` of the one sample ``x`` ``(1, n, d)``, from the full Jacobian (``jacrev``)."""
    with sdpa_kernel(SDPBackend.MATH):  # vmap has no batching rule for the fused kernels' backward
        jacobian = torch.func.jacrev(lambda y: field(torch.tensor(0.0), y))(x)
    return jacobian.pow(2).sum().item() / x.numel()


def _mean_and_standard_error(samples: torch.Tensor) -> tuple[float, float]:
    return samples.mean().item(), samples.std().item() / samples.numel() ** 0.5


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("distribution", ["gaussian", "rademacher"])
def test_rate_of_a_linear_field_is_unbiased_for_its_known_norm(distribution, device):
    matrix = torch.randn(8, 8, dtype=torch.float64).to(device)
    field, x = _Linear(matrix), torch.randn(1, 4, 8, dtype=torch.float64).to(device)
    known = matrix.pow(2).sum().item() / 8
    assert _exact_rate(field, x) == pytest.approx(known, rel=1e-12)
    augmented = JacobianFrobenius(field, distribution=distribution, generator=_generator(1))
    copies = x.expand(COPIES, 4, 8)
    estimates = augmented(torch.tensor(0.0), augmented.initial_state(copies))[1]
    mean, error = _mean_and_standard_error(estimates)
    assert abs(mean - known) <= 2 * error, (mean, known, error)
    if distribution == "rademacher":
        assert set(augmented.drawn_probes[0].unique().tolist()) == {-1.0, 1.0}


@pytest.mark.parametrize("distribution", ["gaussian", "rademacher"])
def test_rate_of_an_attention_field_is_unbiased_and_probes_average(distribution, device):
    field, x = _small_field(device), torch.randn(1, 4, 8, dtype=torch.float64).to(device)
    exact = _exact_rate(field, x)
    copies = x.expand(COPIES, 4, 8)
    spread = {}
    for probes in (1, 16):
        augmented = JacobianFrobenius(field, probes=probes, distribution=distribution, generator=_generator(probes))
        estimates = augmented(torch.tensor(0.0), augmented.initial_state(copies))[1]
        mean, error = _mean_and_standard_error(estimates)
        assert abs(mean - exact) <= 2 * error, (probes, mean, exact, error)
        spread[probes] = estimates.std().item()
    assert spread[16] == pytest.approx(spread[1] / 4, rel=0.1)  # 16 independent probes: a quarter of the spread


def test_integrated_cost_is_unbiased_for_the_euler_sum_of_the_exact_norm(device):
    field, x = _small_field(device), torch.randn(1, 4, 8, dtype=torch.float64).to(device)
    steps, duration = 4, 1.0
    states = solve(field, x, torch.linspace(0, duration, steps + 1).tolist(), method="euler", steps=steps).ys
    exact = sum(duration / steps * _exact_rate(field, state) for state in states[:-1])
    augmented = JacobianFrobenius(field, generator=_generator(0))
    copies = x.expand(COPIES, 4, 8)
    y = solve(augmented, augmented.initial_state(copies), [0.0, duration], method="euler", steps=steps).y1
    mean, error = _mean_and_standard_error(y[1])
    assert abs(mean - exact) <= 2 * error, (mean, exact, error)
    assert (y[0] - states[-1]).abs().max().item() <= 1e-15


def test_the_probe_is_held_for_the_whole_solve(device):
    """A constant Jacobian and one probe: j(T) = T · ||εᵀ A||² / (nd) exactly, were ε redrawn per step it would not."""
    matrix = torch.randn(8, 8, dtype=torch.float64).to(device)
    augmented = JacobianFrobenius(_Linear(matrix), generator=_generator(3))
    x = tokens(batch=3, n=4, dim=8, device=device)
    y = solve(augmented, augmented.initial_state(x), [0.0, 1.5], method="rk4", steps=5).y1
    (probe,) = augmented.drawn_probes
    expected = 1.5 * (probe[0] @ matrix).pow(2).sum((1, 2)) / 32
    assert (y[1] - expected).abs().max().item() <= 1e-13


@pytest.mark.parametrize("field_kind", ["linear", "tanh"])
def test_gradcheck_of_the_cost_with_a_fixed_probe(field_kind, device):
    kind = {"linear": _Linear, "tanh": _Tanh}[field_kind]

    def cost(matrix, x):
        augmented = JacobianFrobenius(kind(matrix), 0.3, generator=_generator(4))  # the same probe every call
        y = solve(augmented, augmented.initial_state(x), [0.0, 1.0], method="midpoint", steps=3).y1
        return augmented.final_state(y)[1]

    matrix = torch.randn(3, 3, dtype=torch.float64).to(device).requires_grad_()
    x = torch.randn(2, 2, 3, dtype=torch.float64).to(device).requires_grad_()
    assert torch.autograd.gradcheck(cost, (matrix, x))


def test_continuous_depth_reports_the_cost_and_it_trains_the_field(device):
    field, x = _small_field(device), tokens(n=4, dim=8, device=device)
    model = ContinuousDepth(JacobianFrobenius(field, 0.1, generator=_generator(5)), method="rk4", steps=2)
    x1 = model(x)
    assert x1.shape == x.shape and model.field.jacobian_cost is model.regularization
    cost = regularization(model)
    assert cost.item() > 0
    cost.backward()  # the cost alone: J(x(t)) sees every parameter, through J or through the path x(t)
    norms = {name: p.grad.norm().item() for name, p in field.named_parameters()}
    assert min(norms.values()) > 0, norms


ADAPTIVE = dict(method="dopri5", rtol=1e-9, atol=1e-9)
GRADIENT_METHODS = [  # (reference by backprop, the same solve differentiated otherwise, tolerance)
    (dict(method="rk4", steps=4), dict(gradient="checkpoint"), 1e-12),
    (dict(ADAPTIVE, backend="torchdiffeq"), dict(gradient="adjoint"), 1e-6),
    (dict(ADAPTIVE, backend="torchode", per_sample=False), dict(gradient="adjoint"), 1e-6),
]


@pytest.mark.parametrize("reference, other, tolerance", GRADIENT_METHODS, ids=["checkpoint", "torchdiffeq", "torchode"])
def test_gradient_methods_agree_with_backprop(reference, other, tolerance, device):
    """The same probe (a reseeded generator) in both solves: the gradients of loss + both costs agree."""
    skip_torchode_backprop_on_xla(device, reference)
    field, x = transformer_field(dim=8, device=device), tokens(n=4, dim=8, device=device)
    params = list(field.parameters())
    grads = []
    for settings in (reference, {**reference, **other}):
        augmented = JacobianFrobenius(KineticEnergy(field, 1.0), 0.5, generator=_generator(6))
        model = ContinuousDepth(augmented, **settings)
        grads.append(backward_grads(model(x).square().mean() + regularization(model), params))
    worst = max((a - b).abs().max().item() for a, b in zip(*grads))
    assert worst <= tolerance * max(g.abs().max().item() for g in grads[0])


def test_torchodes_per_sample_backsolve_is_refused_by_name(device):
    field, x = transformer_field(dim=8, device=device), tokens(n=4, dim=8, device=device)
    model = ContinuousDepth(
        JacobianFrobenius(field), **ADAPTIVE, backend="torchode", per_sample=True, gradient="adjoint"
    )
    with pytest.raises(ValueError, match="per-sample backsolve.* is not supported: use per_sample=False"):
        (model(x).sum() + regularization(model)).backward()


def test_with_kinetic_energy_both_costs_are_reported_and_summed(device):
    field, x = _small_field(device), tokens(n=4, dim=8, device=device)
    settings = dict(method="euler", steps=5)
    grid = torch.linspace(0, 1, 6).tolist()
    with torch.no_grad():
        both = JacobianFrobenius(KineticEnergy(field, 0.5), 0.2, generator=_generator(7))
        path = solve(both, both.initial_state(x), grid, **settings).ys
        plain = solve(field, x, grid, **settings).ys
        assert (path[0] - plain).abs().max().item() == 0.0  # the tokens move exactly as without the costs
        model = ContinuousDepth(both, **settings)
        both.generator.manual_seed(7)  # the probe of the solve above again
        model(x)
        kinetic = ContinuousDepth(KineticEnergy(field, 0.5), **settings)
        kinetic(x)
        jacobian = ContinuousDepth(JacobianFrobenius(field, 0.2, generator=_generator(7)), **settings)
        jacobian(x)
    assert both.wrapped_cost.item() == kinetic.regularization.item() > 0
    assert both.jacobian_cost.item() == jacobian.regularization.item() > 0
    assert model.regularization.item() == both.jacobian_cost.item() + both.wrapped_cost.item()
    assert regularization(model).item() == model.regularization.item()
    with_grad = ContinuousDepth(JacobianFrobenius(KineticEnergy(field, 0.5), 0.2), **settings)(x)
    without = ContinuousDepth(field, **settings)(x)
    # With gradients on, attention runs its math kernel inside the products (fused kernels have no double backward).
    assert (with_grad - without).abs().max().item() <= 1e-14


def test_splitting_steps_the_cost_part_first(device):
    field, x = _small_field(device), tokens(n=4, dim=8, device=device)
    assert len(JacobianFrobenius(KineticEnergy(field)).parts) == 4
    augmented = JacobianFrobenius(field, generator=_generator(8))
    assert len(augmented.parts) == 3
    with torch.no_grad():
        y = solve(augmented, augmented.initial_state(x), [0.0, 2.0], method="lie_trotter", steps=2).y1
        states = solve(field, x, [0.0, 1.0, 2.0], method="lie_trotter", step_size=1.0).ys
        rates = [augmented.derivatives(torch.tensor(0.0), (state,))[1] for state in states[:2]]  # the same probe
    assert (y[0] - states[-1]).abs().max().item() == 0.0
    assert (y[1] - (rates[0] + rates[1])).abs().max().item() <= 1e-12


def test_padding_is_left_out_of_the_jacobian(device):
    field, x = _small_field(device), tokens(n=6, dim=8, device=device)
    mask = torch.zeros(2, 6, dtype=torch.bool, device=device)
    mask[0, 4:] = True
    model = ContinuousDepth(JacobianFrobenius(field, generator=_generator(9)), method="euler", steps=1)
    model(x, key_padding_mask=mask)
    (probe,) = model.field.drawn_probes
    field.parts[0].branch.bind()  # unbind the mask: the truncated samples have no padding
    rows = []
    for sample, real in ((0, 4), (1, 6)):  # the real tokens alone, unmasked: the same attention
        state = x[sample : sample + 1, :real]
        _, product = torch.func.vjp(lambda y: field(torch.tensor(0.0), y), state)
        (row,) = product(probe[0, sample : sample + 1, :real])
        rows.append(row.pow(2).sum().item() / (real * 8))
    assert model.regularization.item() == pytest.approx(sum(rows) / 2, rel=1e-12)


def test_errors_name_the_problem(device):
    field = _Linear(torch.eye(3, dtype=torch.float64, device=device))
    for weight in (-0.1, True, "1"):
        with pytest.raises(ValueError, match="weight .* must be a number >= 0"):
            JacobianFrobenius(field, weight)
    for probes in (0, 1.5, True):
        with pytest.raises(ValueError, match="probes must be an integer >= 1"):
            JacobianFrobenius(field, probes=probes)
    with pytest.raises(ValueError, match="unknown probe distribution 'uniform'"):
        JacobianFrobenius(field, distribution="uniform")
    augmented = JacobianFrobenius(field)
    with pytest.raises(TypeError, match="real floating-point state, got torch.int64"):
        augmented.initial_state(torch.ones(2, 3, dtype=torch.long, device=device))
    x = torch.randn(2, 3, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match="no probes drawn"):
        augmented(torch.tensor(0.0), (x, torch.zeros(2, dtype=x.dtype, device=device)))
    with pytest.raises(TypeError, match=r"wrap it inside: JacobianFrobenius\(KineticEnergy"):
        solve(KineticEnergy(augmented), KineticEnergy(augmented).initial_state(x), [0.0, 1.0], method="euler", steps=1)
    augmented.initial_state(x)
    with pytest.raises(ValueError, match=r"drawn for a state of shape \(2, 3\), the field got \(4, 3\)"):
        augmented(torch.tensor(0.0), (x.repeat(2, 1), torch.zeros(4, dtype=x.dtype, device=device)))


def test_a_seeded_generator_reproduces_the_cost(device):
    field, x = _small_field(device), tokens(n=4, dim=8, device=device)
    costs = []
    for seed in (11, 11, 12):
        model = ContinuousDepth(JacobianFrobenius(field, 1.0, generator=_generator(seed)), method="euler", steps=2)
        model(x)
        costs.append(model.regularization.item())
    assert costs[0] == costs[1] != costs[2]
