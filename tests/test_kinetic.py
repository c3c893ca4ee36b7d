"""Kinetic-energy augmentation and the transport cost (Kan et al. 2025, eq. 8)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.continuous import regularization
from neuralode_tf.fields import ComposedField, KineticEnergy
from neuralode_tf.nn import AttentionBranch, MLPBranch
from tests._problems import backward_grads, skip_torchode_backprop_on_xla, tokens, transformer_field


def _energy_rate(field, x):
    return field(torch.tensor(0.0), x).pow(2).flatten(1).mean(1)


def test_euler_energy_is_the_left_point_sum(device):
    field, x = transformer_field(device=device), tokens(device=device)
    steps, T = 7, 1.3
    y = solve(KineticEnergy(field), KineticEnergy(field).initial_state(x), [0.0, T], method="euler", steps=steps).y1
    h, expected, xm = T / steps, torch.zeros(2, dtype=x.dtype, device=device), x
    for _ in range(steps):
        expected = expected + h * _energy_rate(field, xm)
        xm = xm + h * field(torch.tensor(0.0), xm)
    assert (y[0] - xm).abs().max().item() <= 1e-12
    assert (y[1] - expected).abs().max().item() <= 1e-12  # float64 rounding


def test_lie_trotter_energy_part_is_stepped_first(device):
    field, x = transformer_field(device=device), tokens(device=device)
    augmented = KineticEnergy(field)
    assert len(augmented.parts) == 3
    y = solve(augmented, augmented.initial_state(x), [0.0, 2.0], method="lie_trotter", steps=2).y1
    plain = solve(field, x, [0.0, 2.0], method="lie_trotter", steps=2)
    states = solve(field, x, [0.0, 1.0, 2.0], method="lie_trotter", step_size=1.0).ys
    expected = _energy_rate(field, states[0]) + _energy_rate(field, states[1])
    assert (y[0] - plain.y1).abs().max().item() == 0.0
    assert (y[1] - expected).abs().max().item() <= 1e-12


def test_adaptive_energy_matches_a_quadrature_along_the_trajectory(device):
    field, x = transformer_field(device=device), tokens(device=device)
    augmented = KineticEnergy(field)
    rtol = atol = 1e-8
    y = solve(augmented, augmented.initial_state(x), [0.0, 1.0], method="dopri5", rtol=rtol, atol=atol).y1
    ts = torch.linspace(0.0, 1.0, 401, dtype=torch.float64)
    path = solve(field, x, ts.tolist(), method="dopri5", rtol=1e-10, atol=1e-10).ys
    rates = torch.stack([_energy_rate(field, xt) for xt in path])  # (401, B)
    h = (ts[1] - ts[0]).item()
    simpson = h / 3 * (rates[0] + rates[-1] + 4 * rates[1:-1:2].sum(0) + 2 * rates[2:-1:2].sum(0))
    assert (y[1] - simpson).abs().max().item() <= 10 * rtol * simpson.abs().max().item()


REFERENCE = dict(method="rk4", steps=64)

CONFIGS = [
    dict(method="rk4", steps=8),
    dict(method="strang", substep="rk4", steps=32),
    dict(method="rk4", steps=8, gradient="checkpoint"),
    dict(method="dopri5", backend="torchdiffeq", rtol=1e-7, atol=1e-7),
    dict(method="dopri5", backend="torchdiffeq", rtol=1e-7, atol=1e-7, gradient="adjoint"),
    dict(method="dopri5", backend="torchdiffeq", rtol=1e-7, atol=1e-7, gradient="adjoint", seminorm=True),
    dict(method="dopri5", backend="torchode", rtol=1e-7, atol=1e-7),
    dict(method="tsit5", backend="torchode", rtol=1e-7, atol=1e-7, per_sample=False),
    dict(method="dopri5", backend="torchode", rtol=1e-7, atol=1e-7, gradient="adjoint"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_every_method_backend_and_gradient_method(config, device):
    """The energy, x(T) and the gradients of (loss + transport cost) agree with a fine rk4 solve by backprop."""
    skip_torchode_backprop_on_xla(device, config)
    field, x = transformer_field(device=device), tokens(device=device)
    params = list(field.parameters())

    def run(**settings):
        model = ContinuousDepth(KineticEnergy(field, transport_cost=0.5), t1=1.0, **settings)
        x1 = model(x)
        loss = x1.sin().mean() + regularization(model)
        return x1.detach(), model.regularization.detach(), backward_grads(loss, params)

    x_ref, cost_ref, grads_ref = run(**REFERENCE)
    x1, cost, grads = run(**config)
    tol = {"rk4": 1e-5, "strang": 1e-4}.get(config["method"], 1e-6)
    assert (x1 - x_ref).abs().max().item() <= tol
    assert abs(cost.item() - cost_ref.item()) <= tol * cost_ref.item()
    for g, g_ref in zip(grads, grads_ref):
        assert (g - g_ref).abs().max().item() <= 10 * tol * max(g_ref.abs().max().item(), 1.0)


def test_adjoint_gradients_of_loss_plus_transport_cost_match_backprop(device):
    """Same solver, same tolerances: the continuous adjoint matches backprop through the solver."""
    field, x = transformer_field(device=device), tokens(device=device)
    params = list(field.parameters())
    grads = {}
    for adjoint in ("backprop", "adjoint"):
        model = ContinuousDepth(KineticEnergy(field, 1.0), method="dopri5", rtol=1e-10, atol=1e-10, gradient=adjoint)
        loss = model(x).square().mean() + regularization(model)
        grads[adjoint] = torch.autograd.grad(loss, params)
    worst = max((a - b).abs().max().item() for a, b in zip(grads["backprop"], grads["adjoint"]))
    assert worst <= 1e-7


def test_gradcheck_of_the_transport_cost(device):
    torch.manual_seed(0)
    field = ComposedField([(AttentionBranch(4, 2).double(), MLPBranch(4, 8).double())]).to(device)
    augmented = KineticEnergy(field, 0.3)

    def cost(x):
        y = solve(augmented, augmented.initial_state(x), [0.0, 1.0], method="midpoint", steps=3).y1
        return augmented.final_state(y)[1]

    x = torch.randn(2, 3, 4, dtype=torch.float64).to(device).requires_grad_()
    assert torch.autograd.gradcheck(cost, (x,))


def test_conventions_paper_and_code(device):
    energy = torch.tensor([1.0, 3.0], device=device)
    assert KineticEnergy(nn.Identity(), 0.5).cost(energy).item() == pytest.approx(0.5 / 2 * 2.0)
    assert KineticEnergy(nn.Identity(), 0.5, "code").cost(energy).item() == pytest.approx(0.5 * 2.0)
    with pytest.raises(ValueError, match="unknown convention 'nanogpt'"):
        KineticEnergy(nn.Identity(), 1.0, "nanogpt")
    with pytest.raises(ValueError, match="must be a number >= 0"):
        KineticEnergy(nn.Identity(), -1.0)
    with pytest.raises(TypeError, match="start from KineticEnergy.initial_state"):
        KineticEnergy(nn.Identity())(torch.tensor(0.0), torch.zeros(2, 3, device=device))


def test_continuous_depth_reports_the_cost_and_tuple_states_count_every_entry(device):
    field, x = transformer_field(device=device), tokens(device=device)
    model = ContinuousDepth(KineticEnergy(field, 2.0), method="euler", steps=1)
    x1 = model(x)
    assert (x1 - (x + field(torch.tensor(0.0), x))).abs().max().item() <= 1e-12
    assert model.regularization.item() == pytest.approx(_energy_rate(field, x).mean().item())  # λ/2 = 1
    plain = ContinuousDepth(field, method="euler", steps=1)
    plain(x)
    assert plain.regularization is None and regularization(plain).item() == 0.0

    class Pair(nn.Module):  # a tuple state (x, z) with dz/dt = 1
        def forward(self, t, y):
            return (field(t, y[0]), torch.ones_like(y[1]))

    pair = KineticEnergy(Pair())
    z = torch.zeros(2, 4, dtype=x.dtype, device=device)
    y = solve(pair, pair.initial_state((x, z)), [0.0, 1.0], method="euler", steps=1).y1
    entries = x[0].numel() + 4
    expected = (field(torch.tensor(0.0), x).pow(2).flatten(1).sum(1) + 4) / entries
    assert len(y) == 3 and (y[2] - expected).abs().max().item() <= 1e-12


def test_padding_is_left_out_of_the_energy(device):
    field, x = transformer_field(device=device), tokens(device=device)
    augmented = KineticEnergy(field)
    mask = torch.zeros(2, 8, dtype=torch.bool, device=device)
    mask[0, 5:] = True
    augmented.bind(key_padding_mask=mask)
    rate = augmented.energy_rate(x, torch.zeros(2, dtype=x.dtype, device=device))
    assert rate[0].item() == pytest.approx(x[0, :5].pow(2).mean().item())
    assert rate[1].item() == pytest.approx(x[1].pow(2).mean().item())
    with pytest.raises(ValueError, match=r"key_padding_mask must be a bool tensor of shape \(\*batch, n\) = \(2, 4\)"):
        augmented.energy_rate(x[:, :4], torch.zeros(2, dtype=x.dtype, device=device))


def _path_ratio(field: nn.Module, x: torch.Tensor, steps: int) -> float:
    """Mean over tokens of (length of the token's Euler path) / (its end-to-end displacement)."""
    path = solve(field, x, torch.linspace(0, 1, steps + 1).tolist(), method="euler", steps=steps).ys
    length = (path[1:] - path[:-1]).norm(dim=-1).sum(0)
    return (length / (path[-1] - path[0]).norm(dim=-1)).mean().item()


def _train_toy(transport_cost: float, device: torch.device) -> tuple[nn.Module, torch.Tensor]:
    """A one-block OT-Transformer (d = 8, no inner residuals, 10 Euler steps) trained for 100 Adam steps
    to classify the sign of a sum over 6 tokens (128 samples, seed 0)."""
    torch.manual_seed(0)
    x = torch.randn(128, 6, 8).to(device)
    target = (x[:, :, 0].sum(1) > 0).long()
    field = ComposedField([(AttentionBranch(8, 2), MLPBranch(8, 16))], inner_residuals=False).to(device)
    encoder = ContinuousDepth(KineticEnergy(field, transport_cost), method="euler", steps=10)
    head = nn.Linear(8, 2).to(device)
    optimizer = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(100):
        loss = nn.functional.cross_entropy(head(encoder(x).mean(1)), target) + regularization(encoder)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "xla":  # run each training step as its own graph, not all 100 as one
            import torch_xla

            torch_xla.sync()
    return field, x


def test_transport_cost_straightens_trajectories(device):
    """λ = 1 makes the trained flow straighter: path length / displacement drops from 1.14 to 1.02."""
    ratios = {cost: _path_ratio(*_train_toy(cost, device), steps=10) for cost in (0.0, 1.0)}
    assert ratios[1.0] < ratios[0.0] - 0.05, ratios
