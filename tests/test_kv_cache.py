"""The parts of incremental decoding: rotary positions, the KV cache of AttentionBranch, and the branch options
(dropout, biases) that a GPT's blocks need (neuralode_tf.nn.rotary, neuralode_tf.nn._kv_cache)."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf.models import transformer_field
from neuralode_tf.nn import AttentionBranch, KVCache, MLPBranch, apply_rotary

F64 = torch.float64


def test_rotary_scores_depend_on_the_relative_position_only(device):
    """``(R_p q)·(R_q k) = q·R_{q-p} k``: shifting both positions leaves every score unchanged; norms are kept."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, 7, 8, generator=g, dtype=F64).to(device) for _ in range(2))
    scores = apply_rotary(q) @ apply_rotary(k).transpose(-2, -1)
    shifted = apply_rotary(q, 13) @ apply_rotary(k, 13).transpose(-2, -1)
    assert (scores - shifted).abs().max().item() <= 1e-12
    assert (apply_rotary(q, 5).norm(dim=-1) - q.norm(dim=-1)).abs().max().item() <= 1e-12
    assert (scores - q @ k.transpose(-2, -1)).abs().max().item() > 1e-3  # the rotation is no identity
    # A token gets the same rotation with its prefix as after it: what a KV cache relies on.
    assert torch.equal(apply_rotary(q)[..., 4:, :], apply_rotary(q[..., 4:, :], 4))
    with pytest.raises(ValueError, match="even head width"):
        apply_rotary(q[..., :7])


@pytest.mark.parametrize("rotary", [False, True])
def test_a_cached_branch_computes_the_rows_of_the_whole_sequence(rotary, device):
    torch.manual_seed(0)
    branch = AttentionBranch(16, 2, causal=True, rotary=rotary).to(device, F64)
    x = torch.randn(3, 9, 16, dtype=F64, device=device)
    whole = branch(x)
    cache, rows = KVCache(), []
    for chunk in (x[:, :4], x[:, 4:5], x[:, 5:8], x[:, 8:]):  # a prefix, one token, several, one
        branch.bind(kv_cache=cache)
        with cache.extending(chunk.shape[1]):
            rows.append(branch(chunk))
    assert cache.length == 9 and cache.calls == 1
    assert (torch.cat(rows, dim=1) - whole).abs().max().item() <= 1e-12


def test_kv_cache_misuse_raises_clear_errors(device):
    torch.manual_seed(0)
    branch = AttentionBranch(8, 2, causal=True).to(device)
    x = torch.randn(1, 3, 8, device=device)
    cache = KVCache()
    branch.bind(kv_cache=cache)
    with pytest.raises(RuntimeError, match="outside one"):
        branch(x)
    with cache.extending(3):
        branch(x)
    with pytest.raises(ValueError, match="more attention calls"), cache.extending(1):
        branch(x[:, :1])
        branch(x[:, :1])
    assert cache.length == 0 and cache.calls == 0  # a failed pass leaves the cache empty
    with cache.extending(3):
        branch(x)
        branch(x)
    with pytest.raises(ValueError, match="made 1 attention calls, the one that filled the cache 2"), cache.extending(1):
        branch(x[:, :1])
    with cache.extending(3):
        branch(x)
    with pytest.raises(ValueError, match="got 3 new tokens"), cache.extending(1):
        branch(x)
    with cache.extending(3):
        branch(x)
    with pytest.raises(ValueError, match="another batch"), cache.extending(1):
        branch(torch.randn(2, 1, 8, device=device))
    with pytest.raises(ValueError, match="causal self-attention"):
        AttentionBranch(8, 2).bind(kv_cache=KVCache())
    with pytest.raises(ValueError, match="no key_padding_mask"):
        branch.bind(kv_cache=KVCache(), key_padding_mask=torch.zeros(1, 3, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match="rotary positions are for self-attention"):
        AttentionBranch(8, 2, context_dim=8, rotary=True)
    with pytest.raises(ValueError, match="dropout must be a probability"):
        AttentionBranch(8, 2, dropout=1.0)
    with pytest.raises(ValueError, match="dropout must be a probability"):
        MLPBranch(8, dropout=-0.1)


def test_branch_dropout_acts_in_training_mode_only(device):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8, device=device)
    for branch in (AttentionBranch(8, 2, causal=True, dropout=0.5), MLPBranch(8, dropout=0.5)):
        branch.to(device)
        assert not torch.equal(branch.train()(x), branch(x))  # drawn afresh at every call
        assert torch.equal(branch.eval()(x), branch(x))


def test_bias_free_branches_have_no_biases(device):
    """nanoGPT's ``bias=False``: no bias in the linear layers nor in the LayerNorms."""
    attention = AttentionBranch(8, 2, bias=False, norm_bias=False).to(device)
    mlp = MLPBranch(8, bias=False, norm_bias=False).to(device)
    assert [name for name, _ in attention.named_parameters()] == ["norm.weight", "qkv.weight", "proj.weight"]
    assert [name for name, _ in mlp.named_parameters()] == ["norm.weight", "fc1.weight", "fc2.weight"]
    x = torch.randn(2, 4, 8, device=device)
    assert attention(x).shape == mlp(x).shape == x.shape


@pytest.mark.parametrize("field", ["split", "parallel", "composed", "evolving"])
def test_a_causal_transformer_field_reads_no_later_position(field, device):
    torch.manual_seed(0)
    f = transformer_field(16, 2, 2, field=field, causal=True).to(device, F64)
    x = torch.randn(2, 6, 16, dtype=F64, device=device, requires_grad=True)
    state = f.initial_state(x) if hasattr(f, "initial_state") else x
    out = f(torch.tensor(0.5, dtype=F64), state)
    out = out[0] if isinstance(out, tuple) else out
    (grad,) = torch.autograd.grad(out[:, 2].sum(), x)
    assert grad[:, 3:].abs().max().item() == 0.0 and grad[:, 2].abs().max().item() > 0
    leaky = transformer_field(16, 2, 2, field=field).to(device, F64)
    out = leaky(torch.tensor(0.5, dtype=F64), leaky.initial_state(x) if hasattr(leaky, "initial_state") else x)
    out = out[0] if isinstance(out, tuple) else out
    (grad,) = torch.autograd.grad(out[:, 2].sum(), x)
    assert grad[:, 3:].abs().max().item() > 0  # without causal=True it does
