"""Changing a trained model's solver: ContinuousDepth.set_solve_options and neuralode_tf.set_solve_options.

The changed module must compute exactly what a module built with those options computes (bitwise: the
same field, the same solve call), keep the options the change did not name, and refuse what the
constructor refuses without changing anything.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, set_solve_options
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import SolverConfigError


def _field(device) -> SplitField:
    return SplitField(AttentionBranch(8, num_heads=2), MLPBranch(8)).to(device).double()


def _x(device) -> torch.Tensor:
    return torch.randn(2, 5, 8, dtype=torch.float64, device=device)


@pytest.mark.parametrize(
    "options",
    [
        dict(method="rk4", steps=3),
        dict(method="strang", steps=2, substep="midpoint"),
        dict(method="dopri5", rtol=1e-7, atol=1e-7),
        dict(method="lie_trotter"),
    ],
)
def test_changed_module_computes_what_a_fresh_one_computes(device, options):
    field, x = _field(device), _x(device)
    changed = ContinuousDepth(field, t1=2.0, method="euler", steps=7)
    assert changed.set_solve_options(**options) is changed
    fresh = ContinuousDepth(field, t1=2.0, **options)
    assert dict(changed.solve_options) == dict(fresh.solve_options)
    assert torch.equal(changed(x), fresh(x))
    assert changed.stats == fresh.stats


def test_a_new_method_resets_the_method_options_and_keeps_the_gradient_options(device):
    model = ContinuousDepth(_field(device), method="strang", steps=4, substep="midpoint", gradient="checkpoint")
    model.set_solve_options(method="euler")  # substep belongs to strang: refused by euler if it stayed
    assert model.solve_options["gradient"] == "checkpoint"
    assert dict(model.solve_options) == dict(method="euler", step_size=1.0, gradient="checkpoint")


def test_steps_and_step_size_are_one_setting(device):
    model = ContinuousDepth(_field(device), method="rk4", step_size=0.5)
    model.set_solve_options(steps=3)
    assert dict(model.solve_options) == dict(method="rk4", steps=3)
    model.set_solve_options(rtol=None)  # a change that names neither keeps the grid
    assert model.solve_options["steps"] == 3


def test_refused_options_change_nothing_in_the_whole_model(device):
    model = nn.Sequential(ContinuousDepth(_field(device), method="rk4", steps=2), ContinuousDepth(_field(device)))
    before = [dict(m.solve_options) for m in model]
    with pytest.raises(SolverConfigError):
        set_solve_options(model, method="no_such_method")
    with pytest.raises(TypeError, match="unknown solve setting 'stepz'"):
        set_solve_options(model, stepz=3)
    assert [dict(m.solve_options) for m in model] == before
    assert set_solve_options(model, method="midpoint", steps=4) is model
    assert all(m.solve_options["method"] == "midpoint" and m.solve_options["steps"] == 4 for m in model)


def test_assigning_an_option_as_an_attribute_raises(device):
    model = ContinuousDepth(_field(device))
    with pytest.raises(AttributeError, match=r"use \.set_solve_options\(method=\.\.\.\)"):
        model.method = "rk4"
    with pytest.raises(AttributeError):
        model.solve_options = {"method": "rk4"}
    assert model.solve_options["method"] == "euler"


def test_a_model_without_continuous_depth_is_refused(device):
    with pytest.raises(ValueError, match="holds no ContinuousDepth"):
        set_solve_options(nn.Linear(2, 2).to(device), method="rk4")
