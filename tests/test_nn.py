"""Residual branches: attention against a written-out softmax, masks, cross-attention, shapes."""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf.nn import AttentionBranch, MLPBranch
from tests import _conditioned


def reference_attention(branch: AttentionBranch, x, context=None, allowed=None):
    """softmax(q kᵀ / sqrt(d_h) + mask) v, head by head, written out."""
    h = branch.norm(x)
    if context is None:
        q, k, v = branch.qkv(h).chunk(3, dim=-1)
    else:
        q = branch.q(h)
        k, v = branch.kv(context).chunk(2, dim=-1)
    heads = branch.num_heads
    d_h = q.shape[-1] // heads
    outs = []
    for i in range(heads):
        s = slice(i * d_h, (i + 1) * d_h)
        scores = q[..., s] @ k[..., s].transpose(-1, -2) / math.sqrt(d_h)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, -math.inf)
        outs.append(scores.softmax(-1) @ v[..., s])
    return branch.proj(torch.cat(outs, dim=-1))


def test_self_attention_matches_written_out_softmax(device):
    branch = AttentionBranch(24, 3).to(device)
    x = torch.randn(2, 7, 24, device=device)
    assert (branch(x) - reference_attention(branch, x)).abs().max().item() <= 1e-5


def test_causal_attention_matches_lower_triangular_mask(device):
    branch = AttentionBranch(16, 2, causal=True).to(device)
    x = torch.randn(2, 6, 16, device=device)
    allowed = torch.ones(6, 6, dtype=torch.bool, device=device).tril()
    assert (branch(x) - reference_attention(branch, x, allowed=allowed)).abs().max().item() <= 1e-5


def test_causal_output_ignores_the_future(device):
    branch = AttentionBranch(16, 2, causal=True).to(device)
    x = torch.randn(1, 6, 16, device=device, requires_grad=True)
    branch(x)[0, 2].sum().backward()
    assert x.grad[0, 3:].abs().max().item() == 0.0 and x.grad[0, :3].abs().max().item() > 0.0


def test_cross_attention_matches_written_out_softmax(device):
    branch = AttentionBranch(16, 4, context_dim=12).to(device)
    x, memory = torch.randn(3, 5, 16, device=device), torch.randn(3, 9, 12, device=device)
    pad = torch.zeros(3, 9, dtype=torch.bool, device=device)
    pad[1, 6:] = True
    ref = reference_attention(branch, x, memory, allowed=~pad[:, None, :])
    assert (branch(x, context=memory, key_padding_mask=pad) - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_padding_never_changes_real_tokens(causal, device):
    branch = AttentionBranch(16, 2, causal=causal).to(device)
    x = torch.randn(2, 5, 16, device=device)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]], device=device)
    out = branch(x, key_padding_mask=pad)
    garbage = x.clone()
    garbage[1, 3:] = 1e3 * torch.randn(2, 16, device=device)
    out_garbage = branch(garbage, key_padding_mask=pad)
    real = ~pad
    assert (out[real] - out_garbage[real]).abs().max().item() <= 1e-5
    assert out[pad].abs().max().item() == 0.0  # padded tokens do not move
    # The real tokens equal attention over the unpadded sequence alone.
    alone = branch(x[1:, :3])
    assert (out[1, :3] - alone[0]).abs().max().item() <= 1e-5


def test_fully_padded_causal_query_is_finite(device):
    branch = AttentionBranch(8, 2, causal=True).to(device)
    pad = torch.tensor([[True, False, False]], device=device)  # left padding: query 0 may see no key
    out = branch(torch.randn(1, 3, 8, device=device), key_padding_mask=pad)
    assert torch.isfinite(out).all() and out[0, 0].abs().max().item() == 0.0


def test_branches_accept_any_leading_dims(device):
    attn, mlp = AttentionBranch(8, 2).to(device), MLPBranch(8, mlp_hidden=16).to(device)
    x = torch.randn(2, 3, 5, 8, device=device)
    for branch in (attn, mlp):
        batched = branch(x)
        assert batched.shape == x.shape
        assert (branch(x[1, 2]) - batched[1, 2]).abs().max().item() <= 1e-5


def test_bad_construction_and_calls(device):
    with pytest.raises(ValueError, match="num_heads=3 must divide dim=8"):
        AttentionBranch(8, 3)
    x = torch.randn(1, 2, 8, device=device)
    with pytest.raises(ValueError, match="pass context="):
        AttentionBranch(8, 2, context_dim=4).to(device)(x)
    with pytest.raises(ValueError, match="build it with context_dim="):
        AttentionBranch(8, 2).to(device)(x, context=x)


def test_mlp_branch_is_prenorm_linear_gelu_linear(device):
    mlp = MLPBranch(8).to(device)
    x = torch.randn(4, 8, device=device)
    ref = mlp.fc2(
        torch.nn.functional.gelu(mlp.fc1(torch.nn.functional.layer_norm(x, (8,), mlp.norm.weight, mlp.norm.bias)))
    )
    assert mlp.fc1.out_features == 32 and (mlp(x) - ref).abs().max().item() == 0.0


def test_continuous_depth_binds_masks_and_memory(device):
    """Padding never changes real tokens through a whole rk4 solve; memory reaches cross-attention."""
    from neuralode_tf import ContinuousDepth
    from neuralode_tf.fields import SplitField

    field = SplitField(AttentionBranch(16, 2), AttentionBranch(16, 2, context_dim=8), MLPBranch(16)).to(device)
    model = ContinuousDepth(field, method="rk4", steps=3)
    x, memory = torch.randn(2, 5, 16, device=device), torch.randn(2, 7, 8, device=device)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]], device=device)
    memory_pad = torch.zeros(2, 7, dtype=torch.bool, device=device)
    memory_pad[1, 4:] = True
    out = model(x, key_padding_mask=pad, memory=memory, memory_key_padding_mask=memory_pad)
    garbage, garbage_memory = x.clone(), memory.clone()
    garbage[1, 3:] = 100.0
    garbage_memory[1, 4:] = -100.0
    out_garbage = model(garbage, key_padding_mask=pad, memory=garbage_memory, memory_key_padding_mask=memory_pad)
    assert (out[~pad] - out_garbage[~pad]).abs().max().item() <= 1e-5
    alone = model(x[1:, :3], memory=memory[1:, :4])
    assert (out[1, :3] - alone[0]).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="pass context="):
        model(x)  # binding nothing clears the memory


def test_conditioning_with_torchode_backsolve_is_refused(device):
    from neuralode_tf import ContinuousDepth
    from neuralode_tf.fields import SplitField
    from neuralode_tf.numerics import SolverConfigError

    model = ContinuousDepth(SplitField(AttentionBranch(8, 2)), method="tsit5", gradient="adjoint").to(device)
    pad = torch.zeros(1, 3, dtype=torch.bool, device=device)
    x = torch.randn(1, 3, 8, device=device)
    with pytest.raises(SolverConfigError, match="one sample at a time"):
        model(x, key_padding_mask=pad)
    assert model(x).shape == (1, 3, 8)  # without conditioning it runs


def test_attention_alone_leaves_padded_tokens_where_they_are(device):
    """What holds for the branch itself: a field of masked self-attention alone never moves padded tokens."""
    from neuralode_tf import ContinuousDepth
    from neuralode_tf.fields import SplitField

    model = ContinuousDepth(
        SplitField(AttentionBranch(8, 2), AttentionBranch(8, 2, causal=True)).to(device), t1=3.0, method="rk4", steps=3
    )
    x = torch.randn(2, 5, 8, device=device)
    pad = torch.tensor([[False] * 5, [False, True, False, True, True]], device=device)
    out = model(x, key_padding_mask=pad)
    assert (out - x)[pad].abs().max().item() == 0.0 and (out - x)[~pad].abs().max().item() > 0.1


@pytest.mark.parametrize("kind", _conditioned.KINDS)
def test_padded_tokens_move_but_real_tokens_never_see_them(kind, device):
    """The padding claim of the docstrings, for whole fields on a fixed grid (one step per unit of depth).

    Padded tokens move (the MLP or feed-forward acts on every position; by 0.02 to 2.9 here), the real tokens
    are exactly independent of them (max-abs 0 with huge values at the padded target and memory positions) and
    equal those of the unpadded sequence up to rounding (lengths change the reduction sizes).
    """
    from neuralode_tf import ContinuousDepth

    field = _conditioned.build(kind).to(device)
    model = ContinuousDepth(field, **_conditioned.unit_steps(kind, field))
    x, memory = torch.randn(2, 5, 8).to(device), torch.randn(2, 7, 8).to(device)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    memory_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3], device=device)

    def run(x: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor | None, memory_pad: torch.Tensor | None):
        return model(x, **_conditioned.conditioning(kind, x, pad, memory, memory_pad))

    out = run(x, memory, pad, memory_pad)
    assert torch.isfinite(out).all() and (out - x)[pad].abs().max().item() > 1e-3
    garbage, garbage_memory = x.clone(), memory.clone()
    garbage[pad] = 1e3 * torch.randn(int(pad.sum()), 8).to(device)
    garbage_memory[memory_pad] = -1e3 * torch.randn(int(memory_pad.sum()), 8).to(device)
    assert (run(garbage, garbage_memory, pad, memory_pad) - out)[~pad].abs().max().item() == 0.0
    alone = run(x[1:, :3], memory[1:, :4], None, None)
    assert (out[1, :3] - alone[0]).abs().max().item() <= 1e-5


@pytest.mark.parametrize("kind", ["evolving", "evolving_decoder"])
def test_evolving_maps_stay_zero_at_padding(kind, device):
    """EvolvingAttentionField: the logit maps' entries at padded rows and columns start at 0 and stay 0."""
    from neuralode_tf import ContinuousDepth, solve

    field = _conditioned.build(kind).to(device)
    x, memory = torch.randn(2, 5, 8).to(device), torch.randn(2, 7, 8).to(device)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device=device)
    memory_pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3], device=device)
    ContinuousDepth(field, t1=2.0, method="lie_trotter")(
        x, **_conditioned.conditioning(kind, x, pad, memory, memory_pad)
    )
    _, *maps = solve(field, field.initial_state(x), [0.0, 2.0], method="rk4", steps=4).y1
    for logits, keys in zip(maps, (pad, memory_pad)):
        assert logits[1, :, 3:].abs().max().item() == 0.0  # padded query rows
        assert logits[1, :, :, keys[1]].abs().max().item() == 0.0  # padded key columns
        assert logits[0].abs().max().item() > 0.0
