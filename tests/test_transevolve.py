"""TransEvolve: evaluation modes against eq. 6 as written, the official code's formulas, the random
feed-forward's buffers, and the discrete block as one Lie-Trotter Euler step per layer."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import transevolve
from neuralode_tf.fields.transevolve import (
    RandomFeedForward,
    TransEvolveAttention,
    TransEvolveField,
    depth_signal,
)
from neuralode_tf.fields.transevolve import _paths as paths
from tests._reference import evaluate, max_abs, official_attention, randn

B, N, D, H, L = 2, 12, 32, 4, 3
TOL = 1e-5


def padding(device: torch.device) -> torch.Tensor:
    """Right padding in sample 0, left padding in sample 1 (under a causal mask its first queries see no key)."""
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[0, 9:] = True
    pad[1, :3] = True
    return pad.to(device)


def test_depth_signal_at_integer_depth_is_the_codes_time_signal(device):
    coeffs = randn(D, device=device)
    p = np.arange(D // 2, dtype=np.float32)
    for step in range(6):
        rate = np.float32(step) * np.float32(math.pi / 64.0)
        ref = np.concatenate([np.sin(rate * p), np.cos(rate * p)]) * coeffs.cpu().numpy()
        got = depth_signal(torch.tensor(float(step), dtype=torch.float64, device=device), coeffs, H)
        assert got.shape == (H, D // H) and got.device == coeffs.device
        assert np.abs(got.cpu().numpy() - ref.reshape(H, D // H)).max() <= 1e-6
    # Continuous in t, with a configurable time scale.
    half = depth_signal(2.5, coeffs, H, time_scale=32.0).flatten()
    angles = 2.5 * math.pi / 32.0 * torch.arange(D // 2, device=device)
    assert max_abs(half, torch.cat([angles.sin(), angles.cos()]) * coeffs) <= 1e-6


@pytest.mark.parametrize("masks", ["none", "padding", "causal", "causal+padding"])
def test_fidelity_is_the_official_codes_attention(masks, device):
    causal, pad = "causal" in masks, padding(device) if "padding" in masks else None
    attn = TransEvolveAttention(D, H, L, causal=causal, mode="fidelity").to(device)
    x0 = randn(B, N, D, device=device)
    x = x0 + 0.3 * randn(B, N, D, device=device)
    allowed = torch.ones(B, 1, N, N, dtype=torch.bool, device=device)
    if pad is not None:
        allowed = allowed & ~pad[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(N, N, dtype=torch.bool, device=device).tril()
    allowed = allowed | ~allowed.any(-1, keepdim=True)
    mask = torch.zeros(allowed.shape, device=device).masked_fill(~allowed, -math.inf)
    for layer in range(L):
        ref = official_attention(attn, x0, x0, x, layer, mask)
        if pad is not None:
            ref = ref.masked_fill(pad[..., None], 0.0)
        assert max_abs(attn(float(layer), x, attn.prepare(x0, pad)), ref) <= TOL


@pytest.mark.parametrize("mode", ["factored", "fused", "auto"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "causal+padding"])
def test_modes_match_fidelity_in_outputs_and_gradients(mode, masks, device):
    causal, pad = "causal" in masks, padding(device) if "padding" in masks else None
    attn = TransEvolveAttention(D, H, L, causal=causal).to(device)
    x0 = randn(B, N, D, device=device)
    x = x0 + 0.3 * randn(B, N, D, device=device)
    for t in (0.0, 1.5, 2.0):
        ref, ref_grads = evaluate(attn, "fidelity", x0, x, t, pad)
        out, grads = evaluate(attn, mode, x0, x, t, pad)
        assert max_abs(out, ref) <= TOL
        assert max(max_abs(g, r) for g, r in zip(grads, ref_grads)) <= TOL
        assert max(g.abs().max().item() for g in grads) > 1e-3  # gradients do reach the inputs


def test_auto_picks_factored_for_short_and_fused_for_long_sequences(monkeypatch, device):
    assert transevolve.AUTO_FACTORED_MAX_TOKENS["cpu"] == 4096  # the CPU crossover of benchmarks/transevolve.py
    monkeypatch.setitem(transevolve.AUTO_FACTORED_MAX_TOKENS, device.type, 16)  # the limit of the input's device
    attn = TransEvolveAttention(D, H, L).to(device)
    assert attn.prepare(randn(1, 16, D, device=device)).mode == "factored"
    assert attn.prepare(randn(1, 17, D, device=device)).mode == "fused"


@pytest.mark.parametrize("causal", [False, True])
def test_query_side_and_time_time_terms_cancel(causal, device):
    attn = TransEvolveAttention(D, H, L, causal=causal, mode="fidelity").to(device)
    x0 = randn(B, N, D, device=device).requires_grad_()
    pad = padding(device)
    full = attn.prepare(x0, pad)
    key_side_only = dataclasses.replace(
        full, query_time=torch.zeros_like(full.query_time), time_time=torch.zeros_like(full.time_time)
    )
    assert full.query_time.abs().max() > 0.1 and full.time_time.abs().max() > 0.01
    out_full = attn(1.5, x0, full)
    out_key = attn(1.5, x0, key_side_only)
    assert max_abs(out_full, out_key) <= 1e-6
    (grad_wk,) = torch.autograd.grad(out_full.square().sum(), [attn.w_k])
    assert grad_wk[:, D:].abs().max().item() <= TOL  # the time columns of W_K only get rounding noise
    assert grad_wk[:, :D].abs().max().item() > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_large_key_bias_neither_overflows_nor_underflows(causal, monkeypatch, device):
    """Scaled coefficients give key biases spanning thousands: e^b would overflow without the shift, and
    under a causal mask the early rows' e^b underflow (the exact fallback of the factored and fused modes)."""
    fallbacks = []
    softmax_apply = paths._softmax_apply
    monkeypatch.setattr(paths, "_softmax_apply", lambda *args: fallbacks.append(1) or softmax_apply(*args))
    attn = TransEvolveAttention(D, H, L, causal=causal).to(device)
    with torch.no_grad():
        attn.coeffs.mul_(1e3)
    x0 = randn(B, N, D, device=device)
    state = attn.prepare(x0)
    signal = depth_signal(1.0, attn.coeffs[1], H)
    bias = paths._key_bias(state, signal)
    assert (bias.amax(-1) - bias.amin(-1)).min().item() > 200
    attn.double()  # eq. 6 as written adds A3 (T ⊙ T) ~ 1e6 to O(1) scores: float32 fidelity would lose them
    reference = evaluate(attn, "fidelity", x0.double(), x0.double(), 1.0, padding(device))[0]
    attn.float()
    fallbacks.clear()
    for mode in ("factored", "fused"):
        out, grads = evaluate(attn, mode, x0, x0, 1.0, padding(device))
        assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
        assert max_abs(out.double(), reference) <= 1e-4
    assert len(fallbacks) == (2 if causal else 0)  # both modes' fallback, only under the causal mask


def test_random_feed_forward_keeps_its_frequencies_in_the_state_dict(device):
    ff = RandomFeedForward(16).to(device)
    params = {name for name, _ in ff.named_parameters()}
    assert params == {"norm.weight", "norm.bias", "expand.svals", "expand.bias", "contract.svals", "contract.bias"}
    buffers = {name for name, _ in ff.named_buffers()}
    assert buffers == {"expand.u_freqs", "expand.v_freqs", "contract.u_freqs", "contract.v_freqs"}
    assert buffers <= set(ff.state_dict())
    assert sum(p.numel() for p in ff.parameters()) == 2 * 16 + (16 + 64) + (16 + 16)
    x = randn(B, N, 16, device=device)
    torch.manual_seed(1)
    other = RandomFeedForward(16).to(device)
    assert max_abs(other(1.0, x), ff(1.0, x)) > 1e-3
    other.load_state_dict(ff.state_dict())
    assert max_abs(other(1.0, x), ff(1.0, x)) == 0.0


def test_random_feed_forward_at_depth_zero_is_its_bias(device):
    """With the code's indexing, the 4d -> d projection reaches only sine columns, all zero at t = 0."""
    ff = RandomFeedForward(16)
    with torch.no_grad():
        ff.contract.bias.normal_()
    ff = ff.to(device)
    out = ff(0.0, randn(B, N, 16, device=device))
    assert max_abs(out, ff.contract.bias.expand_as(out)) <= 1e-6
    assert max_abs(ff(1.0, randn(B, N, 16, device=device)), ff.contract.bias.expand_as(out)) > 1e-3


@pytest.mark.parametrize("feed_forward", ["random", "full"])
@pytest.mark.parametrize("mode", ["fidelity", "factored", "fused"])
def test_lie_trotter_euler_steps_are_the_discrete_block(feed_forward, mode, device):
    field = TransEvolveField(D, H, L, feed_forward=feed_forward, causal=True, mode=mode).to(device)
    x0, pad = randn(B, N, D, device=device), padding(device)
    field.attention.bind(block_input=x0, key_padding_mask=pad)
    ref = x0
    for layer in range(L):
        ref = ref + field.attention(float(layer), ref)
        ref = ref + field.feed_forward.layers[layer](torch.tensor(float(layer)), ref)
    y = solve(field, x0, [0.0, float(L)], method="lie_trotter", steps=L).y1
    assert max_abs(y, ref) <= 1e-6
    block = ContinuousDepth(field, t1=L, method="lie_trotter")
    assert max_abs(block(x0, block_input=x0, key_padding_mask=pad), ref) <= 1e-6


def test_checkpointed_solve_gives_the_block_input_and_projections_their_gradients(device):
    if device.type == "xla":
        pytest.skip(
            "XLA: non-reentrant activation checkpointing is not supported (torch_xla's reentrant checkpoint refuses "
            "autograd.grad, and with backward() each step's recomputation frees the graph of the block state that "
            "all steps share)"
        )
    field = TransEvolveField(D, H, L, mode="factored").to(device)
    x0 = randn(B, N, D, device=device).requires_grad_()
    grads = {}
    for adjoint in ("backprop", "checkpoint"):
        block = ContinuousDepth(field, t1=L, method="lie_trotter", gradient=adjoint)
        loss = block(x0, block_input=x0).square().sum()
        grads[adjoint] = torch.autograd.grad(loss, [x0, field.attention.w_q])
    assert grads["backprop"][1].abs().max().item() > 1e-3
    assert max(max_abs(a, b) for a, b in zip(grads["backprop"], grads["checkpoint"])) <= 1e-6


def test_unbound_state_and_bad_arguments_raise(device):
    field = TransEvolveField(D, H, L).to(device)
    with pytest.raises(RuntimeError, match="block_input"):
        solve(field, randn(B, N, D, device=device), [0.0, 1.0], method="lie_trotter", steps=1)
    with pytest.raises(ValueError, match="mode"):
        TransEvolveAttention(D, H, L, mode="fast")
    with pytest.raises(ValueError, match="mode"):
        field.attention.mode = "fast"
    with pytest.raises(ValueError, match="feed_forward"):
        TransEvolveField(D, H, L, feed_forward="dense")
    with pytest.raises(ValueError, match="divisible"):
        TransEvolveAttention(30, 4, L)


def test_attention_weights_are_the_fidelity_softmax_and_rows_sum_to_one(device):
    from neuralode_tf.fields import TransEvolveAttention

    torch.manual_seed(0)
    attention = TransEvolveAttention(32, 4, 3, mode="fidelity").to(device)
    x0 = randn(2, 12, 32, device=device)
    pad = torch.zeros(2, 12, dtype=torch.bool, device=device)
    pad[1, 9:] = True
    state = attention.prepare(x0, pad)
    weights = attention.attention_weights(1.5, state)
    assert weights.shape == (2, 4, 12, 12)
    assert (weights.sum(-1) - 1).abs().max().item() <= 1e-6 and weights[1, :, :, 9:].abs().max().item() == 0.0
    values = randn(2, 4, 12, 8, device=device)
    by_hand = weights @ values
    _, signal = attention._depth(1.5)
    assert (by_hand - paths._fidelity(state, signal, values)).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="mode='fidelity'"):
        fused = TransEvolveAttention(32, 4, 3, mode="fused").to(device)
        fused.attention_weights(0.0, fused.prepare(x0))


def test_a_sample_whose_key_weights_underflow_leaves_the_others_bit_for_bit(device):
    """The plain-softmax fallback for rows whose ``e^b`` underflowed is taken for those rows only: another
    sample's output does not change by a single bit (found by ``nox -s fuzz``: 4.8e-7 when the whole batch
    fell back)."""
    from tests import _conditioned

    field = _conditioned.build("transevolve", 8, 2).to(device)
    model = ContinuousDepth(field, 2.0, method="euler")
    x = torch.randn(2, 2, 8).to(device)
    huge = x.clone()
    huge[0] = 1e3 * torch.randn(2, 8).to(device)  # its biases span far more than ~80: e^b underflows
    with torch.no_grad():
        alone = model(x, **_conditioned.conditioning("transevolve", x, None, None, None))[1]
        beside_huge = model(huge, **_conditioned.conditioning("transevolve", huge, None, None, None))[1]
    assert (alone - beside_huge).abs().max().item() == 0.0
