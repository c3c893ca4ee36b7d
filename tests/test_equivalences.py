"""Exact equivalences between discrete transformer stacks and one step of an integrator.

Max-abs differences in float32 must be <= 1e-6.
"""

from __future__ import annotations

import pytest
import torch
import torchdiffeq

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import ParallelField, SplitField, WeightSharedField
from neuralode_tf.nn import AttentionBranch, MLPBranch, timm_block_branches
from neuralode_tf.numerics import SolverConfigError

TOL = 1e-6


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def test_lie_trotter_euler_step_is_the_prenorm_block(device):
    attn, mlp = AttentionBranch(32, 4).to(device), MLPBranch(32).to(device)
    x = torch.randn(3, 10, 32, device=device)
    h = x + attn(x)
    block = h + mlp(h)
    y = solve(SplitField(attn, mlp), x, [0.0, 1.0], method="lie_trotter", steps=1).y1
    assert max_abs(y, block) <= TOL


def test_lie_trotter_euler_steps_are_a_stack_of_shared_blocks(device):
    attn, mlp = AttentionBranch(16, 2).to(device), MLPBranch(16).to(device)
    x = torch.randn(2, 5, 16, device=device)
    ref = x
    for _ in range(4):
        ref = ref + 0.25 * attn(ref)
        ref = ref + 0.25 * mlp(ref)
    y = solve(SplitField(attn, mlp), x, [0.0, 1.0], method="lie_trotter", steps=4).y1
    assert max_abs(y, ref) <= TOL


def test_strang_euler_step_is_the_macaron_block(device):
    attn, mlp = AttentionBranch(32, 4).to(device), MLPBranch(32).to(device)
    x = torch.randn(3, 10, 32, device=device)
    h = x + 0.5 * mlp(x)
    h = h + attn(h)
    macaron = h + 0.5 * mlp(h)
    y = solve(SplitField(mlp, attn), x, [0.0, 1.0], method="strang", steps=1).y1
    assert max_abs(y, macaron) <= TOL


def test_parallel_field_euler_step_is_the_parallel_block(device):
    attn, mlp = AttentionBranch(32, 4).to(device), MLPBranch(32).to(device)
    x = torch.randn(3, 10, 32, device=device)
    y = solve(ParallelField(attn, mlp), x, [0.0, 1.0], method="euler", steps=1).y1
    assert max_abs(y, x + attn(x) + mlp(x)) <= TOL


def test_split_field_as_a_plain_field_is_the_sum_of_its_parts(device):
    attn, mlp = AttentionBranch(16, 2).to(device), MLPBranch(16).to(device)
    x = torch.randn(2, 4, 16, device=device)
    assert max_abs(SplitField(attn, mlp)(torch.tensor(0.0), x), attn(x) + mlp(x)) == 0.0


def test_parallel_field_split_by_lie_trotter_is_the_sequential_block(device):
    """A ParallelField is the ODE G + F of a SplitField: its parts are G and F, and one Lie-Trotter Euler step of
    size 1 is the sequential block x + G(x), then + F(.)."""
    attn, mlp = AttentionBranch(8, 2).to(device), MLPBranch(8).to(device)
    x = torch.randn(1, 3, 8, device=device)
    y = solve(ParallelField(attn, mlp), x, [0.0, 1.0], method="lie_trotter", steps=1).y1
    h = x + attn(x)
    assert max_abs(y, h + mlp(h)) <= TOL
    assert max_abs(y, solve(SplitField(attn, mlp), x, [0.0, 1.0], method="lie_trotter", steps=1).y1) == 0.0


@pytest.mark.parametrize("num_sets", [12, 6, 4, 3, 2, 1])
def test_weight_shared_stack_is_the_discrete_stack(num_sets, device):
    """Zhong et al. Table 1: 12 parallel layers from `num_sets` independent parameter sets."""
    depth = 12
    layers = [ParallelField(AttentionBranch(16, 2), MLPBranch(16)).to(device) for _ in range(num_sets)]
    field = WeightSharedField(layers, depth=depth)
    x = torch.randn(2, 6, 16, device=device)
    ref = x
    for m in range(depth):
        layer = layers[m // (depth // num_sets)]
        ref = ref + layer(torch.tensor(float(m)), ref)
    y = ContinuousDepth(field, t1=depth, method="euler")(x)
    assert max_abs(y, ref) <= 1e-5
    per_layer = sum(p.numel() for p in layers[0].parameters())
    assert sum(p.numel() for p in field.parameters()) == num_sets * per_layer


def test_weight_shared_split_stack_with_rk4_stays_in_each_set(device):
    """RK4 evaluates its last stage at the step's end, which is the next set's start: the left
    limit keeps it in the current set, so a step of the stack equals a step of its own layer."""
    layers = [SplitField(AttentionBranch(8, 2), MLPBranch(8)).to(device) for _ in range(2)]
    field = WeightSharedField(layers, depth=2)
    x = torch.randn(1, 4, 8, device=device)
    y = solve(field, x, [0.0, 1.0, 2.0], method="rk4", steps=2).ys
    first = solve(layers[0], x, [0.0, 1.0], method="rk4", steps=1).y1
    second = solve(layers[1], first, [1.0, 2.0], method="rk4", steps=1).y1
    assert max_abs(y[1], first) <= TOL and max_abs(y[2], second) <= TOL
    # Its parts are weight-shared too, so splitting works on the whole stack.
    z = solve(field, x, [0.0, 2.0], method="lie_trotter", steps=2).y1
    h = x
    for layer in layers:
        h = h + layer.parts[0](None, h)
        h = h + layer.parts[1](None, h)
    assert max_abs(z, h) <= TOL


def test_continuous_depth_defaults_to_one_euler_step_per_unit_time(device):
    attn, mlp = AttentionBranch(16, 2).to(device), MLPBranch(16).to(device)
    model = ContinuousDepth(SplitField(attn, mlp), method="lie_trotter")
    x = torch.randn(2, 5, 16, device=device)
    h = x + attn(x)
    assert max_abs(model(x), h + mlp(h)) <= TOL
    assert model.stats.nfe == 2 and model.stats.n_accepted == 1


def test_timm_block_lie_trotter_step_equals_the_block(device):
    vit = pytest.importorskip("timm.models.vision_transformer")
    block = vit.Block(dim=48, num_heads=3, init_values=0.1).eval().to(device)
    x = torch.randn(2, 17, 48, device=device)
    field = SplitField(*timm_block_branches(block))
    with torch.no_grad():
        y = solve(field, x, [0.0, 1.0], method="lie_trotter", steps=1).y1
        assert max_abs(y, block(x)) <= TOL


def test_timm_adapter_rejects_other_blocks(device):
    with pytest.raises(TypeError, match="not a timm Block"):
        timm_block_branches(torch.nn.Linear(3, 3, device=device))


def test_rk4_38_is_torchdiffeqs_rk4_and_rk4_is_classical_everywhere(device):
    """One name, one method: ``rk4_38`` is torchdiffeq's ``rk4`` (Kutta's 3/8 rule) on both backends that have it,
    and ``rk4`` (classical) is refused on torchdiffeq, pointing to ``rk4_38``, rather than meaning another method."""
    field = SplitField(AttentionBranch(16, 2), MLPBranch(16)).double().to(device)
    x = torch.randn(2, 6, 16, dtype=torch.float64, device=device)
    ours = solve(field, x, [0.0, 0.5, 1.0], method="rk4_38", steps=6).ys
    on_torchdiffeq = solve(field, x, [0.0, 0.5, 1.0], method="rk4_38", steps=6, backend="torchdiffeq").ys
    raw = torchdiffeq.odeint(
        lambda t, y: field(t, y),
        x,
        torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64, device=device),
        method="rk4",
        options={"step_size": 1 / 6},
    )
    assert max_abs(ours, on_torchdiffeq) <= 1e-12
    assert max_abs(ours, raw) <= 1e-12
    classical = solve(field, x, [0.0, 0.5, 1.0], method="rk4", steps=6).ys
    assert max_abs(classical, ours) > 1e-9  # a different method, of the same order
    with pytest.raises(SolverConfigError, match=r"'rk4' is Kutta's 3/8 rule, which is method='rk4_38'"):
        solve(field, x, [0.0, 1.0], method="rk4", steps=6, backend="torchdiffeq")


def test_weight_shared_stack_adaptive_solve_steps_onto_the_jumps(device):
    layers = [SplitField(AttentionBranch(8, 2), MLPBranch(8)).double().to(device) for _ in range(3)]
    field = WeightSharedField(layers, depth=3)
    assert field.jump_times == [1.0, 2.0]
    x = torch.randn(1, 4, 8, dtype=torch.float64, device=device)
    tight = dict(method="dopri5", rtol=1e-10, atol=1e-10)
    piecewise = x
    for j, layer in enumerate(layers):
        piecewise = solve(layer, piecewise, [float(j), float(j + 1)], **tight).y1
    assert max_abs(solve(field, x, [0.0, 3.0], **tight).y1, piecewise) <= 1e-8


def test_weight_shared_stack_with_per_sample_times(device):
    """torchode passes one time per sample; each parameter set runs on the samples in its piece."""
    layers = [SplitField(AttentionBranch(8, 2), MLPBranch(8)).double().to(device) for _ in range(2)]
    field = WeightSharedField(layers, depth=2)
    x = torch.randn(3, 4, 8, dtype=torch.float64, device=device)
    t = torch.tensor([0.5, 1.5, 0.2], dtype=torch.float64, device=device)
    out = field(t, x)
    assert torch.equal(out[0], layers[0](None, x[:1])[0]) and torch.equal(out[1], layers[1](None, x[1:2])[0])
    per_sample = solve(field, x, [0.0, 2.0], method="dopri5", backend="torchode", rtol=1e-9, atol=1e-9).y1
    joint = solve(field, x, [0.0, 2.0], method="dopri5", rtol=1e-9, atol=1e-9).y1
    assert max_abs(per_sample, joint) <= 1e-6
