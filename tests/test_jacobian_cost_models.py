"""``jacobian_cost=``: RNODE's Jacobian cost on the front-ends' encoders, beside the kinetic energy."""

from __future__ import annotations

import csv

import pytest
import torch

from neuralode_tf.continuous import regularization
from neuralode_tf.fields import JacobianFrobenius, KineticEnergy
from neuralode_tf.models import NODETransformer, ViT, stack_encoder
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.train import TrainConfig, train
from tests._problems import tokens


def _sets(depth: int, device) -> list[list[torch.nn.Module]]:
    return [
        [AttentionBranch(8, 2).to(device, torch.float64), MLPBranch(8).to(device, torch.float64)] for _ in range(depth)
    ]


@pytest.mark.parametrize("field", ["split", "parallel", "composed"])
def test_the_encoder_carries_both_costs_and_moves_the_tokens_as_without_them(field, device):
    sets, x = _sets(2, device), tokens(n=4, dim=8, device=device)
    plain = stack_encoder(field, 2, sets)
    both = stack_encoder(field, 2, sets, transport_cost=0.5, jacobian_cost=0.2)
    jacobian = both.field
    assert isinstance(jacobian, JacobianFrobenius) and isinstance(jacobian.field, KineticEnergy)
    assert jacobian.weight == 0.2 and jacobian.field.transport_cost == 0.5
    assert both.solve_options == plain.solve_options  # the default method goes by the wrapped field
    with torch.no_grad():
        gap = (both(x) - plain(x)).abs().max().item()
    assert gap == 0.0
    assert both.regularization.item() == jacobian.jacobian_cost.item() + jacobian.wrapped_cost.item()
    assert jacobian.jacobian_cost.item() > 0 and jacobian.wrapped_cost.item() > 0


def test_the_node_transformer_wraps_every_ode_and_sums_the_costs(device):
    sets, x = _sets(3, device), tokens(n=4, dim=8, device=device)
    node = stack_encoder("node", 3, sets, jacobian_cost=0.1)
    assert isinstance(node, NODETransformer)
    assert all(isinstance(ode.field, JacobianFrobenius) and ode.field.weight == 0.1 for ode in node.odes)
    node(x)
    costs = [ode.regularization for ode in node.odes]
    assert regularization(node).item() == pytest.approx(sum(c.item() for c in costs), rel=1e-15)


@pytest.mark.parametrize("field", ["evolving", "discrete"])
def test_readings_without_a_jacobian_cost_refuse_it_by_name(field, device):
    with pytest.raises(ValueError, match="jacobian_cost"):
        stack_encoder(field, 2, _sets(2, device), jacobian_cost=0.1)


def test_a_vit_trains_its_field_through_the_cost(device):
    torch.manual_seed(0)
    model = ViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=8, depth=2, num_heads=2, jacobian_cost=1.0)
    model = model.to(device)
    model(torch.randn(2, 1, 8, 8, device=device))
    cost = regularization(model)
    assert cost.item() > 0 and cost.item() == model.encoder.regularization.item()
    cost.backward()
    # every weight matrix of the blocks shapes the Jacobian (a bias of the last sub-layer would only shift x(T))
    weights = [p for name, p in model.named_parameters() if name.startswith("encoder.") and p.ndim == 2]
    assert len(weights) == 2 * 4 and all(p.grad is not None and p.grad.abs().sum() > 0 for p in weights)


@pytest.mark.cpu_only("a short training run of a preset, on the CPU by its config")
def test_a_preset_takes_model_jacobian_cost_and_its_curve_records_the_cost(tmp_path):
    config = TrainConfig(
        "vit_digits", max_steps=3, progress=False, out_dir=str(tmp_path), model={"jacobian_cost": 0.01, "depth": 2}
    )
    train(config)
    with open(tmp_path / "metrics.csv") as rows:
        costs = [float(row["regularization"]) for row in csv.DictReader(rows)]
    assert len(costs) == 3 and all(cost > 0 for cost in costs)
