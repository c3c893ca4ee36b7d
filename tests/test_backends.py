"""The backends agree with each other on the same problem, for tensor and tuple states."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, solve
from tests._problems import backward_grads, skip_torchode_backprop_on_xla, tokens, transformer_field

TIMES = [0.0, 0.3, 1.0]


def max_abs(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.fixture
def problem(device):
    torch.manual_seed(1)
    return transformer_field(device=device), tokens(batch=3, device=device)


@pytest.mark.parametrize("method", ["euler", "midpoint", "heun", "rk4_38"])
def test_fixed_grid_builtin_equals_torchdiffeq(problem, method):
    field, x = problem
    ours = solve(field, x, TIMES, method=method, step_size=0.1).ys
    theirs = solve(field, x, TIMES, method=method, step_size=0.1, backend="torchdiffeq").ys
    assert max_abs(ours, theirs) <= 1e-12


@pytest.mark.parametrize("method", ["euler", "heun"])
def test_fixed_step_builtin_equals_torchode(problem, method):
    field, x = problem
    ours = solve(field, x, [0.0, 1.0], method=method, steps=8)
    for per_sample in (True, False):
        theirs = solve(field, x, [0.0, 1.0], method=method, steps=8, backend="torchode", per_sample=per_sample)
        assert max_abs(ours.ys, theirs.ys) <= 1e-12
        assert theirs.stats.n_accepted == 8 and theirs.stats.nfe == ours.stats.nfe


def test_adaptive_backends_agree_with_the_reference(problem):
    field, x = problem
    reference = solve(field, x, TIMES, method="rk4", steps=100).ys
    runs = {
        "torchdiffeq dopri5": dict(method="dopri5"),
        "torchdiffeq dopri8": dict(method="dopri8"),
        "torchdiffeq bosh3": dict(method="bosh3"),
        "torchode dopri5": dict(method="dopri5", backend="torchode"),
        "torchode tsit5 per-sample": dict(method="tsit5"),
        "torchode tsit5 joint": dict(method="tsit5", per_sample=False),
    }
    for name, kwargs in runs.items():
        ys = solve(field, x, TIMES, rtol=1e-9, atol=1e-9, **kwargs).ys
        assert max_abs(ys, reference) <= 1e-7, name


def test_per_sample_solving_is_independent_of_the_rest_of_the_batch(device):
    """torchode's per-sample steps: a sample's solution does not depend on the batch it is in."""

    class Rates(nn.Module):
        def __init__(self):
            super().__init__()
            self.rates = nn.Parameter(torch.tensor([[1.0], [30.0]], dtype=torch.float64))

        def forward(self, t, y):
            rates = self.rates if y.shape[0] == 2 else self.rates.reshape(-1)[: y.shape[0]]
            return -rates * torch.sin(y)

    rates = Rates().to(device)
    y0 = torch.ones(2, 4, dtype=torch.float64, device=device)
    per = solve(rates, y0, [0.0, 2.0], method="dopri5", backend="torchode", per_sample=True, rtol=1e-6, atol=1e-9)
    joint = solve(rates, y0, [0.0, 2.0], method="dopri5", backend="torchode", rtol=1e-6, atol=1e-9)
    alone = solve(rates, y0[:1], [0.0, 2.0], method="dopri5", backend="torchode", per_sample=True, rtol=1e-6, atol=1e-9)
    assert max_abs(per.ys, joint.ys) <= 1e-6
    assert max_abs(per.ys[:, :1], alone.ys) == 0.0
    assert max_abs(joint.ys[:, :1], alone.ys) > 0.0


class _Augmented(nn.Module):
    """An augmented state (x, e): dx/dt = f(x), de/dt = mean(f(x)²) per sample."""

    def __init__(self, field):
        super().__init__()
        self.field = field

    def forward(self, t, state):
        x, _ = state
        dx = self.field(t, x)
        # Written for any leading dims: torchode's backsolve calls it one sample at a time.
        return dx, dx.square().flatten(-2).mean(-1)


def _tuple_solve(field, x, **kwargs):
    """States and d(x(1).sum() + e(1).sum())/dx(0) of the augmented solve."""
    x = x.detach().requires_grad_()
    e0 = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    xs, es = solve(_Augmented(field), (x, e0), TIMES, **kwargs).ys
    return xs.detach(), es.detach(), backward_grads(es[-1].sum() + xs[-1].sum(), [x])[0]


@pytest.fixture(scope="module")
def _references() -> dict:
    return {}


@pytest.fixture
def tuple_reference(problem, _references):
    """Computed once per module: ``problem`` is rebuilt from the same seed for every test."""
    if "tuple" not in _references:
        _references["tuple"] = _tuple_solve(*problem, method="rk4", steps=100)
    return _references["tuple"]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(method="rk4", steps=50),
        dict(method="rk4", steps=50, gradient="checkpoint"),
        dict(method="dopri5", rtol=1e-9, atol=1e-9),
        dict(method="dopri5", rtol=1e-9, atol=1e-9, gradient="adjoint"),
        dict(method="dopri5", rtol=1e-9, atol=1e-9, backend="torchode"),
        dict(method="dopri5", rtol=1e-9, atol=1e-9, backend="torchode", gradient="adjoint"),
        dict(method="tsit5", rtol=1e-9, atol=1e-9, per_sample=False),
    ],
    ids=lambda k: "-".join(str(v) for v in k.values()),
)
def test_tuple_state_on_every_backend(problem, tuple_reference, kwargs):
    field, x = problem
    skip_torchode_backprop_on_xla(x.device, kwargs)
    xs, es, grad = _tuple_solve(field, x, **kwargs)
    xr, er, grad_ref = tuple_reference
    assert xs.shape == (3, *x.shape) and es.shape == (3, x.shape[0])
    assert max_abs(xs, xr) <= 1e-6 and max_abs(es, er) <= 1e-6
    assert ((grad - grad_ref).norm() / grad_ref.norm()).item() <= 1e-5


def test_continuous_depth_keeps_the_last_stats(problem):
    field, x = problem
    model = ContinuousDepth(field, method="dopri5", rtol=1e-5, atol=1e-5)
    assert model.stats is None
    y = model(x)
    assert y.shape == x.shape and model.stats.nfe > 0 and model.stats.backend == "torchdiffeq"
    assert "method='dopri5'" in repr(model)


def test_solution_records_times_and_final_state(problem):
    field, x = problem
    solution = solve(field, x, torch.tensor(TIMES), method="euler", step_size=0.25)
    assert solution.ts.tolist() == pytest.approx(TIMES)
    assert torch.equal(solution.y1, solution.ys[-1])
    # 0->0.3 takes two steps (no step longer than 0.25), 0.3->1 takes three.
    assert solution.stats.n_accepted == 5 and solution.stats.nfe == 5


def test_torchode_backsolve_with_a_float32_state(device):
    field = transformer_field(dtype=torch.float32, device=device)
    x = tokens(dtype=torch.float32, device=device).requires_grad_()
    solve(
        field, x, [0.0, 1.0], method="dopri5", backend="torchode", gradient="adjoint", rtol=1e-5, atol=1e-5
    ).y1.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("per_sample", [False, True])
def test_torchode_solves_piecewise_between_the_jumps_of_a_weight_shared_field(per_sample, device):
    """Layer boundaries are discontinuities: stepping over them costs torchode 30x in accuracy
    (6e-6 at rtol 1e-8); solving piece by piece, as torchdiffeq's jump_t does, keeps it under 1e-6."""
    from neuralode_tf.models import transformer_field as stack_field

    torch.manual_seed(0)
    field = stack_field(16, 4, 2, field="parallel").double().to(device)
    x = torch.randn(3, 5, 16, dtype=torch.float64).to(device)
    reference = solve(field, x, [0.0, 1.5, 4.0], method="rk4", steps=4000).ys
    solution = solve(
        field, x, [0.0, 1.5, 4.0], method="dopri5", backend="torchode", per_sample=per_sample, rtol=1e-8, atol=1e-8
    )
    assert solution.ys.shape == reference.shape
    assert (solution.ys - reference).abs().max().item() <= 1e-6


class _Constant(torch.nn.Module):
    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, self.value)


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("method", ["dopri5", "tsit5"])
def test_torchode_pieces_see_their_own_parameters_up_to_the_jump(method, per_sample, device):
    """dy/dt = c_k on [k, k+1): Runge-Kutta is exact on each piece, provided a stage at the end of a
    step that lands on a jump takes the left limit (torchdiffeq's perturb). Taking the next piece's
    value there made torchode reject and shrink steps at every jump (182 vs 86 evaluations on a
    trained ViT field, benchmarks/suite.py)."""
    from neuralode_tf.fields import WeightSharedField

    field = WeightSharedField([_Constant(c) for c in (1.0, 10.0, 100.0)], depth=3.0)
    x = torch.zeros(2, 3, dtype=torch.float64, device=device)
    solution = solve(field, x, [0.0, 3.0], method=method, backend="torchode", per_sample=per_sample)
    assert (solution.y1 - 111.0).abs().max().item() <= 1e-12
    assert solution.stats.n_rejected == 0


@pytest.mark.parametrize("backend", ["torchdiffeq", "torchode"])
def test_adjoint_counts_the_forward_of_every_piece_as_forward(backend, device):
    """A field with jumps is solved piece by piece (torchode) or stepping onto the jumps (torchdiffeq); every
    forward evaluation counts in ``nfe``, as under backprop, and none in ``nfe_backward`` before backward."""
    from neuralode_tf.fields import WeightSharedField

    field = WeightSharedField([transformer_field(device=device) for _ in range(2)], depth=2)
    y0 = tokens(device=device)
    settings = dict(method="dopri5", backend=backend, rtol=1e-5, atol=1e-5)
    backprop = solve(field, y0, [0.0, 2.0], **settings)
    adjoint = solve(field, y0, [0.0, 2.0], gradient="adjoint", **settings)
    assert adjoint.stats.nfe == backprop.stats.nfe and adjoint.stats.nfe_backward == 0
