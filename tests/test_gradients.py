"""Every gradient method against backprop through a fine float64 rk4, and gradcheck.

Gradients of a scalar loss of x(1) with respect to x(0) and every parameter must agree with the
reference to within 1e-5 relative (in the 2-norm, per tensor).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.func import functional_call

from neuralode_tf import solve
from tests._problems import backward_grads, skip_torchode_backprop_on_xla, tokens, transformer_field

REFERENCE = dict(method="rk4", steps=64)
TIGHT = dict(rtol=1e-10, atol=1e-10)

CASES = {
    "builtin-checkpoint-rk4": dict(method="rk4", steps=64, gradient="checkpoint"),
    "torchdiffeq-backprop-dopri5": dict(method="dopri5", backend="torchdiffeq", **TIGHT),
    "torchdiffeq-adjoint-dopri5": dict(method="dopri5", gradient="adjoint", **TIGHT),
    "torchdiffeq-adjoint-seminorm-dopri5": dict(method="dopri5", gradient="adjoint", seminorm=True, **TIGHT),
    "torchdiffeq-adjoint-rk4_38": dict(method="rk4_38", steps=64, gradient="adjoint", backend="torchdiffeq"),
    "torchode-backprop-dopri5": dict(method="dopri5", backend="torchode", **TIGHT),
    "torchode-backprop-tsit5-joint": dict(method="tsit5", per_sample=False, **TIGHT),
    "torchode-backsolve-dopri5": dict(method="dopri5", backend="torchode", gradient="adjoint", **TIGHT),
}


def gradients(field, x, **kwargs):
    x = x.detach().requires_grad_()
    weights = torch.linspace(-1.0, 1.0, x.numel(), dtype=x.dtype, device=x.device).reshape(x.shape)
    loss = (solve(field, x, [0.0, 0.5, 1.0], **kwargs).ys[1:] * weights).sum()
    params = list(field.parameters())
    return backward_grads(loss, [x, *params])


@pytest.fixture(scope="module")
def _references() -> dict:
    return {}


@pytest.fixture
def problem(device, _references):
    """The field, tokens and reference gradients on ``device``; the reference is computed once per module."""
    torch.manual_seed(0)
    field, x = transformer_field(device=device), tokens(device=device)
    if "grads" not in _references:
        _references["grads"] = gradients(field, x, **REFERENCE)
    return field, x, _references["grads"]


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_method_matches_backprop_through_fine_rk4(problem, name):
    field, x, reference = problem
    skip_torchode_backprop_on_xla(x.device, CASES[name])
    for got, ref in zip(gradients(field, x, **CASES[name]), reference):
        rel = ((got - ref).norm() / ref.norm()).item()
        assert rel <= 1e-5, f"{name}: relative gradient error {rel:.2e}"


def test_checkpointing_gives_backprop_gradients_exactly_for_splitting(device):
    field, x = transformer_field(device=device), tokens(device=device)
    kwargs = dict(method="strang", substep="midpoint", steps=5)
    plain = gradients(field, x, **kwargs)
    checkpointed = gradients(field, x, gradient="checkpoint", **kwargs)
    for a, b in zip(plain, checkpointed):
        assert (a - b).abs().max().item() <= 1e-12


def test_seminorm_needs_no_more_backward_evaluations(device):
    field, x = transformer_field(device=device), tokens(device=device)
    counts = {}
    for seminorm in (False, True):
        x_ = x.detach().requires_grad_()
        solution = solve(
            field, x_, [0.0, 1.0], method="dopri5", gradient="adjoint", seminorm=seminorm, rtol=1e-7, atol=1e-7
        )
        solution.y1.square().sum().backward()
        counts[seminorm] = solution.stats.nfe_backward
    assert 0 < counts[True] <= counts[False]


@pytest.mark.parametrize("steps", [1, 3, 10, 64])
def test_checkpoint_counts_its_recomputations(steps, device):
    """Recursive halving: backward recomputes each step on its own, and in the recomputation of each
    enclosing first half, at most ``1 + ceil(log2 N) / 2`` times in all."""
    field, x = transformer_field(device=device), tokens(device=device).requires_grad_()
    calls = []
    counted = lambda t, y: calls.append(1) or field(t, y)  # noqa: E731
    solution = solve(counted, x, [0.0, 1.0], method="rk4", steps=steps, gradient="checkpoint")
    forward_calls = len(calls)
    solution.y1.square().sum().backward()
    assert solution.stats.nfe == forward_calls == 4 * steps
    assert solution.stats.nfe_backward == len(calls) - forward_calls
    assert 4 * steps <= solution.stats.nfe_backward <= 4 * steps * (1 + math.ceil(math.log2(steps)) / 2)


GRADCHECK = {
    "builtin-rk4": dict(method="rk4", steps=2),
    "builtin-checkpoint-strang": dict(method="strang", substep="rk4", steps=2, gradient="checkpoint"),
    "torchdiffeq-dopri5": dict(method="dopri5", rtol=1e-8, atol=1e-8),
    "torchode-dopri5": dict(method="dopri5", backend="torchode", rtol=1e-8, atol=1e-8),
}


@pytest.mark.parametrize("name", list(GRADCHECK))
def test_gradcheck_on_a_tiny_field(name, device):
    skip_torchode_backprop_on_xla(device, GRADCHECK[name])
    if device.type == "xla" and GRADCHECK[name].get("gradient") == "checkpoint":
        pytest.skip(
            "XLA: torch.autograd.grad (which gradcheck calls) is not supported through torch_xla's reentrant "
            "checkpoint, which gradient='checkpoint' runs there"
        )
    field = transformer_field(dim=4, num_heads=2, device=device)
    names = [n for n, _ in field.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in field.parameters())
    x = tokens(batch=1, n=3, dim=4, device=device).requires_grad_()

    def f(x, *params):
        module = _Functional(field, dict(zip(names, params)))
        return solve(module, x, [0.0, 1.0], **GRADCHECK[name]).y1

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=True)


class _Functional(torch.nn.Module):
    """``field`` evaluated with the given parameter tensors (so gradcheck can perturb them)."""

    def __init__(self, field, params):
        super().__init__()
        self.field, self.params = field, params
        self.parts = [_FunctionalPart(part, self, f"parts.{i}.") for i, part in enumerate(field.parts)]

    def forward(self, t, y):
        return functional_call(self.field, self.params, (t, y))


class _FunctionalPart(torch.nn.Module):
    def __init__(self, part, owner, prefix):
        super().__init__()
        self.part, self.prefix = part, prefix
        self.owner = [owner]

    def forward(self, t, y):
        params = {k[len(self.prefix) :]: v for k, v in self.owner[0].params.items() if k.startswith(self.prefix)}
        return functional_call(self.part, params, (t, y))
