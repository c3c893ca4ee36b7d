"""timm ResNets (plain, AA-, EA-AA-) read as ODEs over each stage's blocks after the first."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("timm")

from neuralode_tf.models import aa_resnet, augmented_convolutions, continuous_resnet  # noqa: E402
from tests._resnets import SMALL, randomise_norms  # noqa: E402


def build(kind: str, device) -> nn.Module:
    torch.manual_seed(0)
    if kind == "resnet":
        from timm.models.resnet import BasicBlock, ResNet

        model = ResNet(BasicBlock, (2, 3, 2, 1), num_classes=5, channels=(8, 16, 32, 64))
    elif kind == "bottleneck":
        model = aa_resnet(50, evolving=True, **{**SMALL, "layers": (1, 2, 3, 1), "channels": (4, 8, 16, 32)})
    else:
        # stage 1's maps are pooled to 4x4, so its chain goes on into stage 2 (4x4): logits cross a stage boundary
        model = aa_resnet(34, evolving=kind == "ea", **{**SMALL, "layers": (2, 3, 2, 1), "pooled_stages": (1,)})
    return randomise_norms(model).double().eval().to(device)


def images(kind: str, device) -> torch.Tensor:
    size = 32 if kind == "resnet" else 8
    return torch.randn(3, 3, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(device)


@pytest.mark.parametrize("kind", ["resnet", "aa", "ea", "bottleneck"])
def test_one_lie_trotter_step_per_block_is_the_timm_forward(kind, device):
    model = build(kind, device)
    x = images(kind, device)
    continuous = continuous_resnet(model)
    assert (continuous(x) - model(x)).abs().max().item() <= 1e-12
    assert {id(p) for p in continuous.parameters()} == {id(p) for p in model.parameters()}


def test_evolving_logits_cross_the_stage_boundary(device):
    model = build("ea", device)
    convs = augmented_convolutions(model)
    assert [c.size for c in convs] == [(4, 4)] * 10  # one chain through stages 1 and 2
    assert [c.evolution is not None for c in convs] == [False] + [True] * 9


def fitted_order(model: nn.Module, x: torch.Tensor, method: str) -> float:
    reference = continuous_resnet(model, method="rk4", step_size=1 / 64)(x)
    sizes = [1 / 4, 1 / 8, 1 / 16]
    errors = [(continuous_resnet(model, method=method, step_size=h)(x) - reference).abs().max().item() for h in sizes]
    return float(np.polyfit(np.log(sizes), np.log(errors), 1)[0])


@pytest.mark.parametrize("kind", ["aa", "ea"])
def test_other_solvers_integrate_the_same_ode(kind, device):
    """Fitted orders: Lie-Trotter Euler first order; midpoint and RK4 second (the ReLUs make the field piecewise
    smooth, so RK4 loses its fourth order; measured 1.9)."""
    model = build(kind, device)
    x = images(kind, device)
    assert 0.8 < fitted_order(model, x, "lie_trotter") < 1.3
    assert 1.7 < fitted_order(model, x, "midpoint") < 2.4
    assert fitted_order(model, x, "rk4") > 1.7


def test_gradients_through_the_solver(device):
    """Checkpointing recomputes backprop's graph (equal to rounding); the adjoint integrates a backward ODE of its
    own, whose error shrinks with the step (measured 0.85%, 0.40%, 0.28% of the largest gradient at h = 1/4, 1/8,
    1/16: the ReLU relaxation is not smooth, so it converges slowly)."""
    model = build("ea", device)
    x = images("ea", device)

    def gradients(step_size: float, method: str, **extra) -> torch.Tensor:
        model.zero_grad()
        continuous_resnet(model, method=method, step_size=step_size, **extra)(x).square().sum().backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    def error(step_size: float, method: str = "rk4", **extra) -> float:
        backprop = gradients(step_size, method)
        return ((gradients(step_size, method, **extra) - backprop).abs().max() / backprop.abs().max()).item()

    assert error(1 / 4, gradient="checkpoint") <= 1e-12
    # torchdiffeq's fourth-order method is Kutta's 3/8 rule (rk4_38), on both sides of the comparison.
    coarse, fine = (error(h, "rk4_38", gradient="adjoint", backend="torchdiffeq") for h in (1 / 4, 1 / 16))
    assert fine < 0.5 * coarse and coarse < 2e-2


@pytest.mark.cpu_only("checks arguments; nothing is computed")
def test_rejects_steps_and_other_models():
    model = aa_resnet(18, **SMALL)
    with pytest.raises(ValueError, match="step_size"):
        continuous_resnet(model, steps=4)
    with pytest.raises(TypeError, match="BasicBlock or Bottleneck"):
        continuous_resnet(nn.Sequential(nn.Linear(2, 2)))
