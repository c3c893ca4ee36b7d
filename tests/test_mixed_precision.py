"""Mixed precision (issue 37): ``solve``, ``ContinuousDepth`` and a model under ``torch.autocast(..., bfloat16)``, and
bfloat16 states outside it (what is computed in which dtype: ``neuralode_tf/numerics/_precision.py``).

The tolerances are multiples of bfloat16's unit roundoff ``U = 2**-8`` (8 significant bits), each with its reason:

* under autocast the state stays float32 and only the field's evaluations are rounded: the state and the weights
  going into each matmul and its output, three roundings of ``U`` each, on the increment ``y1 - y0`` (a fixed
  grid's error is at most ``3 U |y1 - y0|``; 0.6 ``U`` measured);
* an adaptive solve's tolerance is raised to ``U`` (the floor), so its steps may err by ``U`` of the state on top of
  the rounding: ``2 U |y1|`` (0.25 to 0.7 ``U`` measured);
* a bfloat16 state is rounded to bfloat16 when the field gets it and at the end (``U`` of the state each): ``2 U |y1|``
  against the float32 solve of the same weights and state (0.4 to 0.8 ``U`` measured). Summed in bfloat16 instead, as
  before, rk4 missed it by 6.8 ``U`` over 8 steps and 34 ``U`` over 32;
* gradients go through the backward pass's matmuls, in bfloat16 too, which doubles the forward's roundings: ``4 U``
  of the gradient (2 to 2.5 ``U`` measured).

Norms are root-mean-square over all entries (of ``y0``'s gradient, and of all parameters' gradients together).
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import Tensor, nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import ParallelField, SplitField, WeightSharedField
from neuralode_tf.models import CausalLM
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import InvalidStateError, Stats

U = 2.0**-8
"""bfloat16's unit roundoff: half the distance from 1 to the next bfloat16."""

FIXED = {
    "euler": dict(method="euler", steps=32),
    "rk4": dict(method="rk4", steps=32),
    "lie_trotter": dict(method="lie_trotter", steps=32),
    "strang": dict(method="strang", steps=32, substep="midpoint"),
    "torchdiffeq-rk4_38": dict(method="rk4_38", steps=32, backend="torchdiffeq"),
    "torchode-heun": dict(method="heun", steps=32, backend="torchode"),
}
ADAPTIVE = {
    "torchdiffeq-dopri5": dict(method="dopri5", backend="torchdiffeq"),
    "torchdiffeq-bosh3": dict(method="bosh3", backend="torchdiffeq"),
    "torchode-dopri5": dict(method="dopri5", backend="torchode"),
    "torchode-tsit5": dict(method="tsit5", backend="torchode"),
}
GRADIENTS = {
    "backprop": dict(method="rk4", steps=8),
    "checkpoint": dict(method="rk4", steps=8, gradient="checkpoint"),
    "checkpoint-binomial": dict(method="rk4", steps=8, gradient="checkpoint", checkpoints=2),
    "torchdiffeq-adjoint": dict(method="dopri5", backend="torchdiffeq", gradient="adjoint"),
    "torchode-adjoint": dict(method="dopri5", backend="torchode", gradient="adjoint"),
    "torchode-backprop": dict(method="dopri5", backend="torchode"),
}


class Recorder(nn.Module):
    """The field, noting ``(t, t.dtype, y.dtype)`` at every evaluation (its parts' too)."""

    def __init__(self, field: nn.Module, seen: list | None = None):
        super().__init__()
        self.field = field
        self.seen: list = [] if seen is None else seen

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.seen.append((float(t), t.dtype, y.dtype))
        return self.field(t, y)

    @property
    def parts(self) -> list[Recorder]:
        return [Recorder(part, self.seen) for part in self.field.parts]


def _field(device, options: dict, record: bool = True) -> nn.Module:
    """A transformer layer's field (attention and MLP, split for the splitting methods), recorded unless ``record``
    is False (torchode's adjoint evaluates it under vmap, where ``float(t)`` cannot run)."""
    attention, mlp = AttentionBranch(8, num_heads=2), MLPBranch(8, 16)
    split = options["method"] in ("lie_trotter", "strang")
    field = (SplitField if split else ParallelField)(attention, mlp)
    return (Recorder(field) if record else field).to(device)


def _x(device) -> Tensor:
    return torch.randn(2, 4, 8, device=device)


def _rms(x: Tensor) -> float:
    return float(x.detach().double().pow(2).mean().sqrt())


def _autocast(device, enabled: bool = True) -> torch.autocast:
    return torch.autocast(device.type, torch.bfloat16, enabled=enabled)


@pytest.mark.parametrize("name", FIXED)
def test_a_fixed_grid_under_autocast_is_the_float32_grid_within_bfloat16_precision(device, name):
    options = FIXED[name]
    field, x = _field(device, options), _x(device)
    reference = solve(field, x, [0.0, 1.0], **options)
    float32_times, field.seen[:] = list(field.seen), []
    with _autocast(device):
        sol = solve(field, x, [0.0, 1.0], **options)
    assert sol.y1.dtype == torch.float32  # the state keeps y0's dtype
    assert field.seen == float32_times  # the same times, in float32, on float32 states
    assert {(t_dtype, y_dtype) for _, t_dtype, y_dtype in field.seen} == {(torch.float32, torch.float32)}
    assert sol.stats == reference.stats and sol.stats.n_accepted == 32
    assert _rms(sol.y1 - reference.y1) <= 3 * U * _rms(reference.y1 - x)


@pytest.mark.parametrize("name", ADAPTIVE)
def test_an_adaptive_solve_under_autocast_does_not_chase_rounding_noise(device, name):
    """At the default ``rtol = 1e-6``, far below what bfloat16 evaluations resolve, the error control works to ``U``
    (the floor): no more steps than the float32 solve (one rejection more for rounding noise at most), where without
    the floor it took ten times as many (41 to 54 for 4 to 5), none the more accurate. The solve reaches ``t1``."""
    options = ADAPTIVE[name]
    field, x = _field(device, options), _x(device)
    reference = solve(field, x, [0.0, 1.0], **options)
    field.seen[:] = []
    with _autocast(device):
        sol = solve(field, x, [0.0, 1.0], **options)
    steps = sol.stats.n_accepted + sol.stats.n_rejected
    assert steps <= reference.stats.n_accepted + reference.stats.n_rejected + 1
    left_limit = float(torch.tensor(1.0).nextafter(torch.tensor(0.0)))  # bosh3 steps onto t1, whose left limit it sees
    assert max(t for t, _, _ in field.seen) >= left_limit
    assert {t_dtype for _, t_dtype, _ in field.seen} == {torch.float32}
    assert sol.y1.dtype == torch.float32
    assert _rms(sol.y1 - reference.y1) <= 2 * U * _rms(reference.y1)


@pytest.mark.parametrize("backend", ["torchdiffeq", "torchode"])
def test_under_autocast_rtol_is_raised_to_the_unit_roundoff_of_bfloat16(device, backend):
    """Finer tolerances give the solve at ``rtol = U``, with a warning that names both; outside autocast a float32
    solve keeps its own."""
    field, x = _field(device, {"method": "dopri5"}), _x(device)
    for autocast in (True, False):
        with _autocast(device, autocast), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fine, floor = (solve(field, x, [0.0, 1.0], method="dopri5", rtol=r, backend=backend) for r in (1e-7, U))
        raised = [w for w in caught if "rtol=1e-07 is below" in str(w.message)]
        assert len(raised) == autocast
        assert torch.equal(fine.y1, floor.y1) == autocast
        assert (fine.stats == floor.stats) == autocast


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradients_under_autocast_are_finite_and_close_to_float32(device, name):
    """The adjoints' backward solves leave the parameters' adjoints out of their error norm (the seminorm), whose
    rounding noise they chased before (2612 backward evaluations instead of 62 on torchdiffeq, 524 for 50 on
    torchode): no more backward evaluations than float32's."""
    options = GRADIENTS[name]
    field, x = _field(device, options, record=False), _x(device)
    float32, float32_stats = _gradients(field, x, options, autocast=False)
    autocast, stats = _gradients(field, x, options, autocast=True)
    for got, want in zip(autocast, float32):
        assert torch.isfinite(got).all() and got.dtype == torch.float32
        assert _rms(got - want) <= 4 * U * _rms(want)
    assert stats.nfe_backward <= float32_stats.nfe_backward
    if options.get("gradient") == "checkpoint":  # the recomputation runs under the forward's autocast state
        backprop, _ = _gradients(field, x, GRADIENTS["backprop"], autocast=True)
        assert all(torch.equal(a, b) for a, b in zip(autocast, backprop))


def _gradients(field: nn.Module, x: Tensor, options: dict, *, autocast: bool) -> tuple[list[Tensor], Stats]:
    """The gradients of a fixed linear readout of ``y1`` with respect to ``x`` and to all parameters (concatenated),
    and the solve's stats."""
    field.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    with _autocast(x.device, autocast):
        sol = solve(field, x, [0.0, 1.0], **options)
    readout = torch.linspace(-1.0, 1.0, sol.y1.numel(), device=x.device).reshape(sol.y1.shape)
    (sol.y1.float() * readout).sum().backward()
    return [x.grad.float(), torch.cat([p.grad.float().reshape(-1) for p in field.parameters()])], sol.stats


STATE_16 = {
    "torchdiffeq-dopri5": dict(method="dopri5", backend="torchdiffeq"),
    "torchdiffeq-adjoint": dict(method="dopri5", backend="torchdiffeq", gradient="adjoint"),
    "torchode-dopri5": dict(method="dopri5", backend="torchode"),
}


@pytest.mark.parametrize("method", ["euler", "lie_trotter"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_fixed_grid_is_the_discrete_stack_in_that_dtype(device, method, dtype):
    """The built-in fixed grids march in a 16-bit ``y0``'s own dtype, with times in float32: one unit step per layer
    is the discrete residual stack in that dtype, exactly (max |Δ| = 0), so a Hugging Face model in bfloat16 read as
    an ODE gives its own logits. (Summed in bfloat16, many small steps lose accuracy: rk4's 8 steps here miss the
    float32 solve by 6.8 ``U``; the external backends integrate in float32, below.)"""
    field = _field(device, dict(method=method)).to(dtype)
    x = _x(device).to(dtype)
    sol = solve(field, x, [0.0, 3.0], method=method, steps=3)
    assert sol.y1.dtype == dtype
    assert {(t_dtype, y_dtype) for _, t_dtype, y_dtype in field.seen} == {(torch.float32, dtype)}
    y = x
    for layer in range(3):
        t = torch.tensor(float(layer))
        if method == "euler":
            y = torch.add(y, field.field(t, y), alpha=1.0)
        else:
            for part in field.field.parts:
                y = torch.add(y, part(t, y), alpha=1.0)
    assert (sol.y1 - y).abs().max().item() == 0.0


@pytest.mark.parametrize("name, dtype", [(name, torch.bfloat16) for name in STATE_16])
def test_a_16_bit_state_is_integrated_in_float32_by_the_external_backends(device, name, dtype):
    """The field gets the state in its dtype and the time in float32; the solution is in the state's dtype, within
    ``2 U`` of the float32 solve of the same weights and state, gradients within ``4 U``.

    A parameter's gradient is summed over the field's evaluations by autograd, in the parameter's dtype: 32 evaluations
    here (8 rk4 steps, or 32 Lie-Trotter steps, each part once a step) give 2 ``U``, 128 give 11 ``U``. The adjoint
    integrates it in float32, and under autocast the parameters are float32: to train over many steps, keep them there
    (the docs' mixed-precision section)."""
    options = STATE_16[name]
    field = _field(device, options).to(dtype)
    x = _x(device).to(dtype)
    sol = solve(field, x.requires_grad_(), [0.0, 1.0], **options)
    assert sol.y1.dtype == dtype
    assert {(t_dtype, y_dtype) for _, t_dtype, y_dtype in field.seen} == {(torch.float32, dtype)}
    wide = copy.deepcopy(field).float()
    reference = solve(wide, x.detach().float(), [0.0, 1.0], **options)
    assert _rms(sol.y1.float() - reference.y1) <= 2 * U * _rms(reference.y1)
    grads, _ = _gradients(field, x, options, autocast=False)
    for got, want in zip(grads, _gradients(wide, x.detach().float(), options, autocast=False)[0]):
        assert torch.isfinite(got).all()
        assert _rms(got - want) <= 4 * U * _rms(want)


@pytest.mark.parametrize("backend", ["torchode", "torchdiffeq", "builtin"])
def test_a_bfloat16_state_far_from_time_zero_keeps_its_grid(device, backend):
    """On ``[100, 101]``, where bfloat16 holds three times (100, 100.5, 101), torchode's Euler stalled (10000 steps,
    then ``MaxStepsExceededError``) and its dopri5 returned ``y1`` 41% off. In float32 times, the grid is the float32
    one (torchode's summed steps take eleven steps for ten there, in float32 as before) and ``y1`` is right."""
    decay = _Decay().to(device)
    y0 = torch.ones(4, device=device)
    runs = {}
    for dtype in (torch.float32, torch.bfloat16):
        decay.seen[:] = []
        sol = solve(decay.to(dtype), y0.to(dtype), [100.0, 101.0], method="euler", steps=10, backend=backend)
        runs[dtype] = (list(decay.seen), sol.stats.n_accepted, sol.y1)
        assert sol.y1.dtype == dtype
    assert runs[torch.bfloat16][:2] == runs[torch.float32][:2]
    assert _rms(runs[torch.bfloat16][2].float() - runs[torch.float32][2]) <= 2 * U * _rms(runs[torch.float32][2])
    if backend != "builtin":
        exact = torch.tensor(-0.5).exp().item()
        adaptive = solve(decay, y0.bfloat16(), [100.0, 101.0], method="dopri5", rtol=1e-3, atol=1e-3, backend=backend)
        assert abs(float(adaptive.y1[0]) - exact) <= 2 * U * exact


class _Decay(nn.Module):
    """``dy/dt = -y / 2``, noting the times it sees."""

    def __init__(self):
        super().__init__()
        self.rate = nn.Parameter(torch.tensor(-0.5))
        self.seen: list[float] = []

    def forward(self, t: Tensor, y: Tensor) -> Tensor:
        self.seen.append(float(t))
        return self.rate * y


@pytest.mark.parametrize("backend", ["builtin", "torchdiffeq"])
def test_a_bfloat16_state_evaluates_each_stage_in_its_layer(device, backend):
    """A weight-shared stack of 12 layers, midpoint with 40 steps a layer: in bfloat16 the stage at 4.9875 read 5.0,
    the next layer (10 of 960 evaluations on the built-in backend, 20 on torchdiffeq); in float32 times none does."""
    layers = []

    class Layer(nn.Module):
        def __init__(self, k: int):
            super().__init__()
            self.k, self.zero = k, nn.Parameter(torch.zeros(()))

        def forward(self, t: Tensor, y: Tensor) -> Tensor:
            layers.append(self.k)
            return y * self.zero

    stack = WeightSharedField([Layer(k) for k in range(12)], depth=12.0).to(device)
    runs = {}
    for dtype in (torch.float64, torch.bfloat16):
        layers.clear()
        y0 = torch.zeros(3, dtype=dtype, device=device)
        solve(stack.to(dtype), y0, [0.0, 12.0], method="midpoint", steps=480, backend=backend)
        runs[dtype] = list(layers)
    assert runs[torch.bfloat16] == runs[torch.float64]


def test_no_solver_calls_nextafter_on_a_16_bit_time(device, monkeypatch):
    """torchdiffeq's users meet ``nextafter`` not implemented for half types on some devices: the left limits of the
    built-in backend, torchdiffeq's ``perturb`` and torchode's pieces all take it of float32 times here."""
    nextafter = torch.nextafter

    def refuse_16_bits(x: Tensor, other: Tensor) -> Tensor:
        assert x.dtype.itemsize > 2, f"nextafter on {x.dtype}"
        return nextafter(x, other)

    monkeypatch.setattr(torch, "nextafter", refuse_16_bits)
    stack = WeightSharedField([MLPBranch(8, 16), MLPBranch(8, 16)], depth=2.0).to(device)
    for options in (
        dict(method="rk4", steps=4),
        dict(method="heun", steps=4, backend="torchdiffeq"),
        dict(method="dopri5", rtol=1e-2, backend="torchdiffeq"),
        dict(method="dopri5", rtol=1e-2, backend="torchode"),
        dict(method="heun", steps=4, backend="torchode"),
    ):
        with _autocast(device):
            assert solve(stack, _x(device), [0.0, 2.0], **options).y1.dtype == torch.float32
        bfloat16 = copy.deepcopy(stack).bfloat16()
        assert solve(bfloat16, _x(device).bfloat16(), [0.0, 2.0], **options).y1.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_dense_output_keeps_the_state_dtype(device, dtype):
    """Dense output between steps (cubic Hermite on the nodes, a slope evaluated at each end) under autocast for a
    float32 state, or of a bfloat16 state: in the state's dtype, within ``2 U`` of float32's."""
    field, x = _field(device, {"method": "rk4"}).bfloat16().float(), _x(device)  # weights that bfloat16 holds
    reference = solve(field, x, [0.0, 1.0], method="rk4", steps=4, dense=True).evaluate([0.3, 0.7])
    with _autocast(device, enabled=dtype == torch.float32):
        solved = solve(field.to(dtype), x.to(dtype), [0.0, 1.0], method="rk4", steps=4, dense=True)
        states = solved.evaluate([0.3, 0.7])
    assert states.dtype == dtype
    field.float()
    assert _rms(states.float() - reference) <= 2 * U * _rms(reference)


def test_continuous_depth_and_a_language_model_train_under_autocast(device):
    """A ContinuousDepth's output stays float32 (the solve's state), a CausalLM's logits are bfloat16 (its head is a
    matmul); both within bfloat16's precision of float32 (``3 U`` of the increment, and of the logits, which the head
    rounds to bfloat16 once more), with finite gradients for every parameter."""
    depth = ContinuousDepth(_field(device, {"method": "rk4"}), t1=1.0, method="rk4", steps=4, gradient="checkpoint")
    x = _x(device)
    reference = depth(x)
    with _autocast(device):
        out = depth(x)
    assert out.dtype == torch.float32 and _rms(out - reference) <= 3 * U * _rms(reference - x)
    model = CausalLM(32, 16, depth=2, num_heads=2, block_size=8, method="rk4", steps=4, gradient="checkpoint")
    model = model.to(device)
    tokens = torch.randint(0, 32, (2, 8), device=device)
    reference = model(tokens)
    with _autocast(device):
        logits = model(tokens)
    assert logits.dtype == torch.bfloat16
    assert _rms(logits.float() - reference) <= 4 * U * _rms(reference)
    logits.float().logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_a_float32_field_on_a_bfloat16_state_outside_autocast_is_refused(device):
    field = _field(device, {"method": "rk4"})
    with pytest.raises(InvalidStateError, match=r"^y0 has dtype torch.bfloat16 but the field's parameters have dtype"):
        solve(field, _x(device).bfloat16(), [0.0, 1.0], method="rk4", steps=4)


def test_a_bfloat16_hugging_face_model_read_as_an_ode_gives_its_own_logits(device):
    """A GPT-2 in bfloat16, converted: one Lie-Trotter step per block in bfloat16 is Hugging Face's forward, to the
    last bit (max |Δ| = 0), padded or not."""
    transformers = pytest.importorskip("transformers")
    from neuralode_tf.models import from_transformers

    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=16)
    hf = transformers.GPT2LMHeadModel(config).eval().to(device=device, dtype=torch.bfloat16)
    converted = from_transformers(hf)
    ids = torch.randint(0, 64, (2, 12), device=device)
    mask = torch.ones_like(ids).index_fill_(1, torch.arange(9, 12, device=device), 0)
    with torch.no_grad():
        for attention_mask in (None, mask):
            want = hf(ids, attention_mask=attention_mask).logits
            got = converted(ids, attention_mask=attention_mask)
            assert got.dtype == torch.bfloat16
            assert (got.float() - want.float()).abs().max().item() == 0.0
