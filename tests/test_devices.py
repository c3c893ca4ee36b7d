"""Device smoke tests: a split attention/MLP field solved with rk4 on the device under test."""

from __future__ import annotations

import copy

import pytest
import torch

import neuralode_tf
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch


def _field() -> SplitField:
    return SplitField(AttentionBranch(16, 2), MLPBranch(16))


def test_rk4_matches_cpu(device: torch.device) -> None:
    print(f"device under test: {device}")
    field_cpu = _field()
    field_dev = copy.deepcopy(field_cpu).to(device)
    y0 = torch.randn(2, 8, 16)
    ref = neuralode_tf.solve(field_cpu, y0, [0.0, 1.0], method="rk4", steps=4).y1
    out = neuralode_tf.solve(field_dev, y0.to(device), [0.0, 1.0], method="rk4", steps=4).y1
    assert out.device.type == torch.device(device).type
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("adjoint", ["backprop", "checkpoint"])
def test_rk4_backward_matches_cpu(device: torch.device, adjoint: str) -> None:
    field_cpu = _field()
    field_dev = copy.deepcopy(field_cpu).to(device)
    y0 = torch.randn(2, 8, 16)
    grads = []
    for field, dev in ((field_cpu, torch.device("cpu")), (field_dev, device)):
        y = y0.detach().to(dev).requires_grad_()
        loss = neuralode_tf.solve(field, y, [0.0, 0.5, 1.0], method="rk4", steps=4, gradient=adjoint).ys.square().sum()
        loss.backward()
        grads.append((y.grad.cpu(), [p.grad.cpu() for p in field.parameters()]))
    (gy_cpu, gp_cpu), (gy_dev, gp_dev) = grads
    torch.testing.assert_close(gy_dev, gy_cpu, atol=1e-4, rtol=1e-4)
    for a, b in zip(gp_dev, gp_cpu, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_lie_trotter_on_device(device: torch.device) -> None:
    field = _field().to(device)
    y0 = torch.randn(2, 8, 16, device=device)
    sol = neuralode_tf.solve(field, y0, [0.0, 1.0], method="lie_trotter", substep="rk4", steps=2)
    assert sol.y1.shape == y0.shape
    assert sol.y1.device.type == torch.device(device).type
    assert bool(torch.isfinite(sol.y1.cpu()).all())
