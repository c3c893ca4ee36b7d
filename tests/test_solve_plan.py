"""``solve`` checks its arguments once per configuration (``numerics/_plan.py``) and what can change between calls on
every call; a compiled march reports finiteness from its own graph (``numerics/_compiled.py``)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch import nn

from neuralode_tf import solve
from neuralode_tf.fields import WeightSharedField
from neuralode_tf.numerics import InvalidStateError, NonFiniteStateError, SolverConfigError, _plan
from neuralode_tf.numerics._field_checks import declared
from neuralode_tf.numerics._registry import get_backend, register_backend
from tests._problems import tokens, transformer_field


class Decay(nn.Module):
    def __init__(self):
        super().__init__()
        self.rate = nn.Parameter(torch.tensor(-1.0))

    def forward(self, t, y):
        return self.rate * y


class Square(nn.Module):
    """dy/dt = y²: Euler from 1 with h = 0.5 overflows float32 at its 10th step. Through a 4x4 identity matrix, so
    that inductor does not inline twenty squarings into one expression of 2^20 terms (it would take hours)."""

    def __init__(self):
        super().__init__()
        self.identity = nn.Linear(4, 4, bias=False)
        nn.init.eye_(self.identity.weight)

    def forward(self, t, y):
        return y * self.identity(y)


def _plans(field) -> dict:
    return _plan._PLANS.get(field, {})


def test_a_second_call_of_one_configuration_reuses_its_plan_and_any_change_settles_anew(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    first = solve(field, y0, [0.0, 1.0], method="rk4", steps=4).y1
    (plan,) = _plans(field).values()
    again = solve(field, y0, [0.0, 1.0], method="rk4", steps=4).y1
    assert list(_plans(field).values()) == [plan] and torch.equal(first, again)
    solve(field, y0, [0.0, 2.0], method="rk4", steps=4)  # other times
    solve(field, y0, [0.0, 1.0], method="rk4", steps=8)  # another argument
    solve(field, torch.ones(2, 3, device=device), [0.0, 1.0], method="rk4", steps=4)  # another shape
    with torch.no_grad():
        solve(field, y0, [0.0, 1.0], method="rk4", steps=4)  # another grad mode
    assert len(_plans(field)) == 5


_EULER = dict(method="euler", steps=2)
_DOPRI5 = dict(method="dopri5", backend="torchdiffeq")


@pytest.mark.parametrize(
    "first, then, message",
    [
        (_EULER, dict(_EULER, steps=2.0), "steps must be a positive integer, got 2.0"),
        (_EULER, dict(_EULER, dense=0), "dense must be True or False, got 0"),
        (_EULER, dict(_EULER, compile=0), "compile must be True, False or a dict of torch.compile options, got 0"),
        (
            dict(_DOPRI5, options={"first_step": 1}),
            dict(_DOPRI5, options={"first_step": True}),  # in a dict too
            r"options\['first_step'\] must be a positive finite number, got True",
        ),
    ],
)
def test_an_argument_equal_to_a_remembered_one_but_of_another_type_is_checked_anew(device, first, then, message):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    solve(field, y0, [0.0, 1.0], **first)
    with pytest.raises(SolverConfigError, match=message):
        solve(field, y0, [0.0, 1.0], **then)  # 2.0 == 2 and 0 == False: equal keys, were it not for their types


def test_the_settings_a_backend_gets_are_shared_by_the_calls_of_a_configuration_and_read_only(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    seen = []
    builtin = get_backend("builtin")

    def spy(field, y0, times, settings, stats):
        seen.append(settings)
        return builtin.solve(field, y0, times, settings, stats)

    register_backend(dataclasses.replace(builtin, solve=spy), replace=True)
    try:
        for _ in range(2):
            solution = solve(field, y0, [0.0, 1.0], method="euler", steps=2)
    finally:
        register_backend(builtin, replace=True)
    assert seen[0] is seen[1] and seen[0].trajectory is None
    with pytest.raises(TypeError):
        seen[0].options["first_step"] = 0.1  # type: ignore[index]
    assert solution.ts.dtype == torch.float64 and solution.ts.tolist() == [0.0, 1.0]


def test_unplain_arguments_are_settled_every_time(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    solve(field, y0, torch.tensor([0.0, 1.0]), method="euler", steps=2)  # tensor times
    solve(field, y0, [0.0, 1.0], method="dopri5", event=lambda t, y: y.sum() - 0.5)  # a callable
    assert not _plans(field)


def test_a_bad_argument_raises_on_every_call(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    for _ in range(2):
        with pytest.raises(SolverConfigError, match="needs exactly one of step_size= or steps="):
            solve(field, y0, [0.0, 1.0], method="euler")
    assert not _plans(field)


def test_what_changes_between_calls_is_checked_on_every_call(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    solve(field, y0, [0.0, 1.0], method="euler", steps=2)
    field.double()  # the same configuration, but the parameters no longer share y0's dtype
    with pytest.raises(InvalidStateError, match="y0 has dtype torch.float32 but the field's parameters have dtype"):
        solve(field, y0, [0.0, 1.0], method="euler", steps=2)
    field.float()
    field.callback_step = lambda t0, y0, dt: None  # a torchdiffeq callback the built-in backend would never call
    with pytest.raises(SolverConfigError, match="torchdiffeq's step callbacks"):
        solve(field, y0, [0.0, 1.0], method="euler", steps=2)


def test_the_grid_follows_the_fields_jump_times_on_every_call(device):
    stack = WeightSharedField([Decay().to(device), Decay().to(device)], depth=2)
    y0 = torch.ones(3, device=device)
    assert solve(stack, y0, [0.0, 2.0], method="euler", steps=1).stats.n_accepted == 2  # a grid point on the jump 1
    stack.depth = 4.0  # the same configuration, but the jump moves to 2, the end of the span
    solution = solve(stack, y0, [0.0, 2.0], method="euler", steps=1)
    assert solution.stats.n_accepted == 1 and len(_plans(stack)) == 1


def test_the_domain_warning_and_the_rtol_warning_come_on_every_call(device):
    stack = WeightSharedField([transformer_field(dim=8, device=device) for _ in range(2)], depth=2)
    x = tokens(n=4, dim=8, device=device)
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"outside the depth \[0, 2\]"):
            solve(stack, x, [0.0, 3.0], method="euler", steps=3)
    field, y0 = Decay().to(device), torch.ones(3, device=device, dtype=torch.bfloat16)
    field.bfloat16()
    for _ in range(2):
        with pytest.warns(UserWarning, match="rtol=1e-05 is below 0.00390625"):
            solve(field, y0, [0.0, 1.0], method="dopri5", rtol=1e-5, atol=1e-3, backend="torchdiffeq")
    assert len(_plans(field)) == 1


def test_a_backend_registered_since_and_a_module_added_since_are_seen(device):
    field, y0 = Decay().to(device), torch.ones(3, device=device)
    solve(field, y0, [0.0, 1.0], method="euler", steps=2)
    builtin = get_backend("builtin")
    register_backend(builtin, replace=True)  # the registry changed: settled anew
    solve(field, y0, [0.0, 1.0], method="euler", steps=2)
    assert len(_plans(field)) == 2
    holder = nn.Module()
    holder.inner = Decay()
    assert [type(m) for m, _ in declared(holder, "domain")] == []
    holder.stack = WeightSharedField([Decay(), Decay()], depth=2)  # a registration: walked again
    assert [domain for _, domain in declared(holder, "domain")] == [(0.0, 2.0)]


def test_a_compiled_march_reports_a_non_finite_state_and_passes_an_overflowing_sum(device):
    if device.type == "xla":
        pytest.skip("XLA: solve(compile=True) is not supported (inductor does not take XLA tensors)")
    with pytest.raises(NonFiniteStateError, match=r"at t=4\.5, step 10"):
        y0 = torch.ones(1, 4, device=device)
        solve(Square().to(device), y0, [0.0, 10.0], method="euler", step_size=0.5, compile=True)
    y0 = torch.full((4,), 3e38, device=device)  # finite entries whose sum overflows float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solution = solve(Decay().to(device), y0, [0.0, 1.0], method="euler", steps=1, compile=True)
    assert torch.isfinite(solution.y1).all()
