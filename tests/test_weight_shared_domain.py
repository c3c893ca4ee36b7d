"""A WeightSharedField of several sets is defined on [0, D]; solving past it warns (one set: nothing to choose)."""

from __future__ import annotations

import warnings

import pytest

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import KineticEnergy, WeightSharedField
from tests._problems import tokens, transformer_field


def _stack(sets: int, device) -> WeightSharedField:
    return WeightSharedField([transformer_field(dim=8, device=device) for _ in range(sets)], depth=2)


@pytest.mark.parametrize("interval", [[0.0, 3.0], [-1.0, 2.0], [1.0, 2.5]])
def test_solving_outside_the_depth_warns_with_the_interval_and_the_depth(interval, device):
    field, x = _stack(2, device), tokens(n=4, dim=8, device=device)
    assert field.domain == (0.0, 2.0)
    with pytest.warns(UserWarning, match=r"outside the depth \[0, 2\] where WeightSharedField's layers are") as caught:
        solve(field, x, interval, method="euler", step_size=0.5)
    assert f"solving over [{interval[0]:g}, {interval[1]:g}]" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller's solve


def test_a_wrapped_stack_and_a_continuous_depth_past_it_warn_too(device):
    x = tokens(n=4, dim=8, device=device)
    with pytest.warns(UserWarning, match="outside the depth"):
        ContinuousDepth(KineticEnergy(_stack(2, device)), t1=4.0)(x)


def test_within_the_depth_and_with_one_set_nothing_warns(device):
    x = tokens(n=4, dim=8, device=device)
    one = _stack(1, device)
    assert one.domain is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve(_stack(2, device), x, [0.0, 2.0], method="dopri5", rtol=1e-4, atol=1e-4)  # steps past 2 inside
        solve(one, x, [0.0, 6.0], method="rk4", steps=3)
