"""``solve(..., gradient="checkpoint", checkpoints=c)``: binomial checkpointing with a budget of stored states.

For every budget the gradients are backprop's (max-abs <= 1e-12 in float64; on the CPU they are bitwise
equal), backward recomputes ``r N - C(c + r, r - 1)`` steps (``numerics._checkpointing``), and the states
the checkpoints keep (counted by a test hook, ``count_stored_states``) never exceed ``c``.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.numerics import SolverConfigError
from neuralode_tf.numerics._checkpointing import count_stored_states, recomputed_steps
from tests._problems import backward_grads, tokens, transformer_field

METHODS = {
    "rk4": dict(method="rk4"),
    "strang": dict(method="strang", substep="midpoint"),
}
BUDGETS = [1, 2, 3, 8, "N"]  # "N": as many states as steps, which is backprop


def _skip_on_xla(device: torch.device) -> None:
    if device.type == "xla":
        pytest.skip("XLA: torch_xla's checkpoint does not nest, so solve refuses checkpoints= there")


def _solve_and_differentiate(field, x, times, **kwargs):
    """Gradients of a weighted sum of the solution at ``times`` with respect to ``x`` and the parameters,
    the solve's stats, and the most states checkpoints kept at once."""
    x = x.detach().requires_grad_()
    with count_stored_states() as stored:
        solution = solve(field, x, times, **kwargs)
        ys = solution.ys[1:]
        weights = torch.linspace(-1.0, 1.0, ys.numel(), dtype=ys.dtype, device=ys.device).reshape(ys.shape)
        grads = backward_grads((ys * weights).sum(), [x, *field.parameters()])
    return grads, solution.stats, stored.peak


def _max_abs(a: tuple, b: tuple) -> float:
    return max((u - v).abs().max().item() for u, v in zip(a, b))


@functools.cache
def _backprop(device: torch.device, method: str, steps: int) -> tuple:
    torch.manual_seed(0)
    field, x = transformer_field(device=device), tokens(device=device)
    return field, x, _solve_and_differentiate(field, x, [0.0, 1.0], steps=steps, **METHODS[method])[0]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("steps", [1, 2, 7, 64])
@pytest.mark.parametrize("method", list(METHODS))
def test_budget_gives_backprop_gradients_with_the_documented_recomputations_and_states(method, steps, budget, device):
    _skip_on_xla(device)
    field, x, reference = _backprop(device, method, steps)
    c = steps if budget == "N" else budget
    grads, stats, stored = _solve_and_differentiate(
        field, x, [0.0, 1.0], steps=steps, gradient="checkpoint", checkpoints=c, **METHODS[method]
    )
    assert _max_abs(grads, reference) <= 1e-12
    evaluations_per_step = stats.nfe // steps
    assert stats.nfe_backward == recomputed_steps(steps, c) * evaluations_per_step
    assert stored <= c
    assert stored == (c if c < steps else 0), "the budget is used in full (and the hook sees the stored states)"


@pytest.mark.parametrize("budget", [1, 2, 5])
def test_budget_with_states_at_requested_times(budget, device):
    """Requested times inside the march: their states are outputs of checkpointed segments."""
    _skip_on_xla(device)
    field, x = transformer_field(device=device), tokens(device=device)
    times, settings = [0.0, 0.3, 0.5, 1.0], dict(method="lie_trotter", substep="heun", step_size=1 / 7)
    reference, plain, _ = _solve_and_differentiate(field, x, times, **settings)
    grads, stats, _ = _solve_and_differentiate(field, x, times, gradient="checkpoint", checkpoints=budget, **settings)
    assert _max_abs(grads, reference) <= 1e-12
    steps = plain.n_accepted  # 3 + 2 + 4: each interval in steps of at most 1/7
    assert steps == 9 and stats.nfe_backward == recomputed_steps(steps, budget) * stats.nfe // steps


@pytest.mark.parametrize("steps", [1, 2, 7, 64])
def test_default_halving_keeps_about_log2_states(steps, device):
    """``checkpoints=None``: at most ``ceil(log2 N) + 1`` states, each step recomputed at most
    ``1 + log2(N) / 2`` times."""
    _skip_on_xla(device)
    field, x = transformer_field(device=device), tokens(device=device)
    _, stats, stored = _solve_and_differentiate(
        field, x, [0.0, 1.0], method="euler", steps=steps, gradient="checkpoint"
    )
    assert 1 <= stored <= math.ceil(math.log2(steps)) + 1
    assert steps <= stats.nfe_backward <= steps * (1 + math.log2(steps) / 2)


@pytest.mark.cpu_only("arithmetic on integers: no tensors")
def test_documented_count_is_the_least_any_schedule_with_the_budget_reaches():
    """``recomputed_steps`` against the recursion over all first-part lengths ``m`` (Griewank 1992):
    ``T(n, c) = min_m m + T(m, c) + T(n - m, c - 1)``, ``T(1, c) = 0``, no state left for more than one step."""

    @functools.cache
    def least(n: int, c: int) -> float:
        if n == 1:
            return 0
        if c == 0:
            return math.inf
        return min(m + least(m, c) + least(n - m, c - 1) for m in range(1, n))

    for n in range(1, 61):
        for c in range(1, n):
            assert recomputed_steps(n, c) == least(n, c), (n, c)
    assert recomputed_steps(64, 8) == 137 and recomputed_steps(64, 1) == 64 * 63 // 2
    assert recomputed_steps(64, 63) == 63 and recomputed_steps(64, 64) == 0


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4"])
def test_checkpoints_must_be_a_positive_integer(bad, device):
    field, x = transformer_field(device=device), tokens(device=device)
    with pytest.raises(SolverConfigError, match=r"checkpoints must be a positive integer .* got"):
        solve(field, x, [0.0, 1.0], method="euler", steps=4, gradient="checkpoint", checkpoints=bad)


@pytest.mark.parametrize("settings", [dict(method="euler", steps=4), dict(method="dopri5", gradient="adjoint")])
def test_checkpoints_needs_adjoint_checkpoint(settings, device):
    field, x = transformer_field(device=device), tokens(device=device)
    with pytest.raises(SolverConfigError, match=r"checkpoints=3 is the budget of gradient='checkpoint'"):
        solve(field, x, [0.0, 1.0], checkpoints=3, **settings)
    with pytest.raises(SolverConfigError, match=r"checkpoints=3 is the budget of gradient='checkpoint'"):
        ContinuousDepth(field, checkpoints=3, **settings)


def test_a_budget_that_nests_too_deep_is_refused(device):
    """One state for 66 steps recomputes the first step 65 times, inside 65 nested checkpoints."""
    _skip_on_xla(device)
    field, x = transformer_field(device=device), tokens(device=device)
    settings = dict(method="euler", gradient="checkpoint", checkpoints=1)
    solve(field, x, [0.0, 1.0], steps=65, **settings)  # 64 times: allowed
    with pytest.raises(SolverConfigError, match=r"checkpoints=1 for 66 steps would recompute .* checkpoints >= 2"):
        solve(field, x, [0.0, 1.0], steps=66, **settings)


def test_checkpoints_on_xla_is_refused(device):
    if device.type != "xla":
        pytest.skip("XLA only: elsewhere checkpoints nest")
    field, x = transformer_field(device=device), tokens(device=device)
    with pytest.raises(SolverConfigError, match=r"checkpoints=2 nests checkpoints"):
        solve(field, x, [0.0, 1.0], method="euler", steps=4, gradient="checkpoint", checkpoints=2)


def test_continuous_depth_forwards_checkpoints(device):
    _skip_on_xla(device)
    field, x = transformer_field(device=device), tokens(device=device)
    grads = {}
    for name, settings in {"backprop": {}, "budget": dict(gradient="checkpoint", checkpoints=2)}.items():
        model = ContinuousDepth(field, method="midpoint", steps=7, **settings)
        x_ = x.detach().requires_grad_()
        grads[name] = backward_grads(model(x_).square().sum(), [x_, *field.parameters()])
        assert model.stats.nfe_backward == (recomputed_steps(7, 2) * 2 if settings else 0)
    assert _max_abs(grads["backprop"], grads["budget"]) <= 1e-12
