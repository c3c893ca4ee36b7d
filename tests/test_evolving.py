"""Evolving attention (Wang et al. 2021, eq. 4 and §3.5) and its reading as a field on ``(x, A)``."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields.evolving import EvolvingAttentionField, EvolvingAttentionStack
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.nn.evolving import EvolvingAttentionBranch

B, N, M, D, H, CTX = 2, 7, 5, 16, 2, 12  # batch, tokens, memory tokens, width, heads, memory width


def _layer(kind: str, *, causal: bool, k: int = 3, alpha: float = 0.5, beta: float = 0.5) -> list[nn.Module]:
    """The branches of one block: ``kind`` is ``"self"``, ``"cross"`` or ``"decoder"`` (self, cross, MLP)."""
    branches: list[nn.Module] = []
    if kind in ("self", "decoder"):
        branches.append(EvolvingAttentionBranch(D, H, alpha=alpha, beta=beta, kernel_size=k, causal=causal))
    if kind in ("cross", "decoder"):
        branches.append(
            EvolvingAttentionBranch(
                D, H, alpha=alpha, beta=beta, kernel_size=k, causal=causal, cross_attention=True, context_dim=CTX
            )
        )
    return [*branches, MLPBranch(D, 2 * D)]


def _stack(kind: str, *, causal: bool, device: torch.device, k: int = 3, depth: int = 3) -> EvolvingAttentionStack:
    layers = [EvolvingAttentionField(*_layer(kind, causal=causal, k=k)) for _ in range(depth)]
    return EvolvingAttentionStack(layers).double().to(device)


def _randn(*shape: int, device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """Drawn on the CPU, then moved: the same values on every device under test."""
    return torch.randn(*shape, dtype=dtype).to(device)


def _sync(device: torch.device) -> None:
    """Under XLA, run the lazy graph recorded so far, so that loops build one small graph per pass (compiled
    once, then reused) instead of one graph of every pass, which takes XLA tens of minutes to compile."""
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()


def _bind(module: nn.Module, **conditioning: Tensor | None) -> None:
    for m in module.modules():
        if callable(getattr(m, "bind", None)):
            m.bind(**conditioning)


def _max_abs(a: Tensor, b: Tensor) -> float:
    return (a - b).abs().max().item()


def _by_hand(branch: EvolvingAttentionBranch, x: Tensor, context: Tensor | None, allowed: Tensor) -> Tensor:
    """Vanilla multi-head attention written out: ``W_o [softmax(Q_h K_hᵀ/√d_h + M) V_h]_h``."""
    h = branch.norm(x)
    if context is None:
        q, k, v = branch.qkv(h).chunk(3, -1)
    else:
        q, (k, v) = branch.q(h), branch.kv(context).chunk(2, -1)
    q, k, v = (z.unflatten(-1, (H, D // H)).transpose(1, 2) for z in (q, k, v))
    scores = (q @ k.transpose(-2, -1) / (D // H) ** 0.5).masked_fill(~allowed, -torch.inf)
    return branch.proj((scores.softmax(-1) @ v).transpose(1, 2).flatten(-2))


@pytest.mark.parametrize(("causal", "cross"), [(False, False), (True, False), (False, True), (True, True)])
def test_zero_alpha_beta_is_vanilla_attention(causal, cross, device):
    ea = EvolvingAttentionBranch(
        D, H, alpha=0.0, beta=0.0, causal=causal, cross_attention=cross, context_dim=CTX if cross else None
    ).to(device)
    vanilla = AttentionBranch(D, H, causal=causal and not cross, context_dim=CTX if cross else None).to(device)
    assert set(ea.load_state_dict(vanilla.state_dict(), strict=False).missing_keys) == {"conv.weight", "conv.bias"}
    x, memory = _randn(B, N, D, device=device), _randn(B, M, CTX, device=device)
    prev = 10 * _randn(B, H, N, M if cross else N, device=device)  # ignored when alpha = 0
    if cross:
        pad = torch.zeros(B, M, dtype=torch.bool, device=device)
        pad[1, -2:] = True
        increment, _ = ea(x, prev, context=memory, key_padding_mask=pad)
        expected = vanilla(x, context=memory, key_padding_mask=pad)
        by_hand = _by_hand(ea, x, memory, ~pad[:, None, None, :])
    else:
        pad = torch.zeros(B, N, dtype=torch.bool, device=device)
        pad[0, -2:] = True
        increment, _ = ea(x, prev, key_padding_mask=pad)
        expected = vanilla(x, key_padding_mask=pad)
        lower = torch.ones(N, N, dtype=torch.bool, device=device).tril()
        allowed = ~pad[:, None, None, :] & (lower if causal else True)
        by_hand = _by_hand(ea, x, None, allowed).masked_fill(pad[..., None], 0.0)
    assert _max_abs(increment, expected) <= 1e-6
    assert _max_abs(increment, by_hand) <= 1e-6


@pytest.mark.parametrize("cross", [False, True])
def test_padding_never_changes_real_outputs(cross, device):
    model = ContinuousDepth(
        _stack("cross" if cross else "self", causal=False, device=device), t1=3.0, method="lie_trotter"
    )
    x = _randn(B, N, D, dtype=torch.float64, device=device)
    memory = _randn(B, M, CTX, dtype=torch.float64, device=device)
    pad = torch.zeros(B, N, dtype=torch.bool, device=device)
    pad[0, -2:] = True
    memory_pad = torch.zeros(B, M, dtype=torch.bool, device=device)
    memory_pad[1, -3:] = True
    conditioning = dict(key_padding_mask=pad, memory=memory, memory_key_padding_mask=memory_pad)
    out = model(x, **conditioning)
    garbage_x, garbage_memory = x.clone(), memory.clone()
    garbage_x[pad] = 1e3 * _randn(int(pad.sum()), D, dtype=torch.float64, device=device)
    garbage_memory[memory_pad] = 1e3 * _randn(int(memory_pad.sum()), CTX, dtype=torch.float64, device=device)
    out_garbage = model(garbage_x, **{**conditioning, "memory": garbage_memory})
    assert _max_abs(out[~pad], out_garbage[~pad]) == 0.0


@pytest.mark.parametrize("cross", [False, True])
def test_masked_logits_do_not_reach_the_convolution(cross, device):
    branch = EvolvingAttentionBranch(
        D, H, alpha=0.5, beta=1.0, causal=not cross, cross_attention=cross, context_dim=CTX if cross else None
    ).to(device, torch.float64)
    x = _randn(B, N, D, dtype=torch.float64, device=device)
    memory = _randn(B, M, CTX, dtype=torch.float64, device=device)
    pad = torch.zeros(B, N, dtype=torch.bool, device=device)
    pad[0, -2:] = True
    if cross:
        memory_pad = torch.zeros(B, M, dtype=torch.bool, device=device)
        memory_pad[1, -2:] = True
        _bind(branch, key_padding_mask=pad, memory=memory, memory_key_padding_mask=memory_pad)
        dead = memory_pad[:, None, None, :] | pad[:, None, :, None]
    else:
        _bind(branch, key_padding_mask=pad)
        future = torch.ones(N, N, dtype=torch.bool, device=device).triu(1)
        dead = pad[:, None, None, :] | pad[:, None, :, None] | future
    dead = dead.expand(B, H, N, M if cross else N)
    prev = _randn(*dead.shape, dtype=torch.float64, device=device)
    garbage = prev.masked_scatter(dead, 1e6 * _randn(int(dead.sum()), dtype=torch.float64, device=device))
    garbage[dead.nonzero()[0].unbind()] = torch.inf
    increment, logits = branch(x, prev)
    increment_garbage, logits_garbage = branch(x, garbage)
    assert torch.equal(increment, increment_garbage) and torch.equal(logits, logits_garbage)
    assert torch.all(logits[dead] == 0.0) and torch.isfinite(logits).all()
    assert torch.all(increment[pad] == 0.0)  # padded queries do not move


def _centred(stack: EvolvingAttentionStack) -> EvolvingAttentionStack:
    """A copy whose convolutions are all the encoder's centred, unmasked ones (masks on the softmax unchanged)."""
    stack = copy.deepcopy(stack)
    for m in stack.modules():
        if isinstance(m, EvolvingAttentionBranch):
            r = (m.kernel_size - 1) // 2
            m._padding = (r, r, r, r)
            m.kernel_mask.fill_(1.0)
    return stack


def _influence(stack: EvolvingAttentionStack, x: Tensor, memory: Tensor) -> Tensor:
    """``Σ_{b,c} |∂ x_l[b, i, c] / ∂ x_0[b, j, :]|`` after every layer ``l``, shaped ``(layers, i, j)``."""
    _bind(stack, memory=memory)
    depth = len(stack.layers)
    states = solve(
        stack, stack.initial_state(x), list(map(float, range(depth + 1))), method="lie_trotter", step_size=1.0
    ).ys[0]
    _sync(x.device)
    rows = []
    for layer in range(depth):
        for i in range(N):
            # The gradient of states[layer + 1][:, i].sum(), with the token picked by data, not by the graph.
            picked = torch.zeros(states[layer + 1].shape, dtype=x.dtype)
            picked[:, i] = 1.0
            (grad,) = torch.autograd.grad(states[layer + 1], x, picked.to(x.device), retain_graph=True)
            rows.append(grad.abs().sum((0, 2)))
            _sync(x.device)
    return torch.stack(rows).unflatten(0, (depth, N))


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("kind", ["self", "cross", "decoder"])
def test_decoder_outputs_never_see_later_tokens_in_any_layer(kind, k, device):
    stack = _stack(kind, causal=True, k=k, device=device)
    x = _randn(B, N, D, dtype=torch.float64, device=device).requires_grad_()
    memory = _randn(B, M, CTX, dtype=torch.float64, device=device).requires_grad_()
    influence = _influence(stack, x, memory)
    assert torch.all(influence.triu(1) == 0.0)  # exactly: no path from token j > i to output i
    assert torch.all(influence.diagonal(dim1=1, dim2=2) > 0)
    if kind != "self":
        (grad,) = torch.autograd.grad(
            solve(stack, stack.initial_state(x), [0.0, 3.0], method="euler", step_size=1.0).y1[0].sum(), memory
        )
        assert torch.all(grad.abs().sum(-1) > 0)  # every memory position is visible
    # Control: the encoder's centred convolution, with the same causal softmax masks, leaks the future.
    assert _influence(_centred(stack), x, memory).triu(1).max() > 0


@pytest.mark.parametrize("kind", ["self", "decoder"])
def test_lie_trotter_unit_euler_steps_are_the_discrete_blocks(kind, device):
    torch.manual_seed(1)
    layers = [_layer(kind, causal=kind == "decoder") for _ in range(3)]
    stack = EvolvingAttentionStack([EvolvingAttentionField(*branches) for branches in layers]).to(device)
    x, memory = _randn(B, N, D, device=device), _randn(B, M, CTX, device=device)
    pad = torch.zeros(B, N, dtype=torch.bool, device=device)
    pad[1, -3:] = True
    _bind(stack, key_padding_mask=pad, memory=memory)
    y = solve(stack, stack.initial_state(x), [0.0, 3.0], method="lie_trotter", steps=3).y1
    attentions = [b for b in layers[0] if isinstance(b, EvolvingAttentionBranch)]
    maps, z = [a.initial_logits(x) for a in attentions], x
    for branches in layers:  # x += attn(x, A_prev); (x += cross(x, A'_prev);) x += mlp(x); A_prev = L
        slot = 0
        for branch in branches:
            if isinstance(branch, EvolvingAttentionBranch):
                increment, maps[slot] = branch(z, maps[slot])
                z, slot = z + increment, slot + 1
            else:
                z = z + branch(z)
    assert len(y) == 1 + len(maps)
    assert _max_abs(y[0], z) <= 1e-6
    assert max(_max_abs(a, b) for a, b in zip(y[1:], maps)) <= 1e-6
    model = ContinuousDepth(stack, t1=3.0, method="lie_trotter")
    assert _max_abs(model(x, key_padding_mask=pad, memory=memory), z) <= 1e-6


def _rk4(stack: EvolvingAttentionStack, y0: tuple[Tensor, ...], steps: int, t1: float = 2.0) -> tuple[Tensor, ...]:
    """``steps`` RK4 steps on ``[0, t1]``, solved 4 at a time (see :func:`_sync`)."""
    y = y0
    for start in range(0, steps, 4):
        stop = min(start + 4, steps)
        y = solve(stack, y, [t1 * start / steps, t1 * stop / steps], method="rk4", steps=stop - start).y1
        _sync(y0[0].device)
    return y


def test_rk4_converges_on_the_augmented_field(device):
    stack = _stack("decoder", causal=True, depth=2, device=device)
    x = _randn(B, N, D, dtype=torch.float64, device=device)
    memory = _randn(B, M, CTX, dtype=torch.float64, device=device)
    _bind(stack, memory=memory)
    y0 = stack.initial_state(x)
    reference = _rk4(stack, y0, 256)
    errors = [max(_max_abs(a, b) for a, b in zip(_rk4(stack, y0, s), reference)) for s in (2, 4, 8, 16)]
    assert all(e1 < e0 for e0, e1 in zip(errors, errors[1:]))
    assert errors[-1] < errors[0] / 30  # the ReLU kinks of the convolution cost RK4 its fourth order
    assert ContinuousDepth(stack, t1=2.0, method="rk4", steps=4)(x, memory=memory).shape == x.shape


@pytest.mark.parametrize("k", [1, 3, 5])
def test_kernel_sizes_and_extra_parameters(k, device):
    for causal, cross in [(False, False), (True, False), (True, True)]:
        ea = EvolvingAttentionBranch(D, H, kernel_size=k, causal=causal, cross_attention=cross).to(device)
        vanilla = AttentionBranch(D, H, context_dim=D if cross else None).to(device)
        conv = sum(p.numel() for p in ea.conv.parameters())
        assert conv == H * H * k * k + H
        assert sum(p.numel() for p in ea.parameters()) == sum(p.numel() for p in vanilla.parameters()) + conv
        x = _randn(B, N, D, device=device)
        increment, logits = ea(x, _randn(B, H, N, N, device=device), context=x if cross else None)
        assert increment.shape == x.shape and logits.shape == (B, H, N, N) and torch.isfinite(logits).all()
    assert EvolvingAttentionBranch(D, H, kernel_size=k, causal=True).kernel_mask.sum() == k * (k + 1) // 2
    with pytest.raises(ValueError, match="odd"):
        EvolvingAttentionBranch(D, H, kernel_size=k + 1)


@pytest.mark.parametrize(
    ("causal", "cross", "entry", "rows", "cols"),
    [
        (False, False, (3, 2), range(2, 5), range(1, 4)),  # centred 3x3 window
        (True, False, (5, 3), None, None),  # Fig. 3(b): the 6 entries listed in the docstring
        (False, True, (3, 2), range(2, 5), range(1, 4)),
        (True, True, (3, 2), range(1, 4), range(1, 4)),  # Fig. 3(c): queries i-2..i, memory j-1..j+1
    ],
)
def test_convolution_reads_the_documented_window(causal, cross, entry, rows, cols, device):
    ea = EvolvingAttentionBranch(D, H, alpha=1.0, beta=1.0, causal=causal, cross_attention=cross)
    nn.init.constant_(ea.conv.weight, 1.0)
    nn.init.constant_(ea.conv.bias, 1.0)  # with positive logits every ReLU is active
    ea = ea.to(device, torch.float64)
    x = _randn(1, N, D, dtype=torch.float64, device=device)
    prev = torch.rand(1, H, N, N, dtype=torch.float64).to(device).requires_grad_()
    _, logits = ea(x, prev, context=x if cross else None)
    (grad,) = torch.autograd.grad(logits[0, 0][entry], prev)
    read = {tuple(ij) for ij in (grad[0].abs().sum(0) > 0).cpu().nonzero().tolist()}
    i, j = entry
    if rows is None:
        expected = {(i - 2, j - 2), (i - 1, j - 2), (i - 1, j - 1), (i, j - 2), (i, j - 1), (i, j)}
    else:
        expected = {(r, c) for r in rows for c in cols}
    assert read == expected
