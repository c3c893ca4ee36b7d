"""Stability of depth dynamics: field Jacobians, their leading eigenvalues, and finite-time Lyapunov exponents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.dynamics.jacobian import (
    EigenvaluesNotConvergedError,
    field_jacobian,
    leading_eigenvalues,
)
from neuralode_tf.dynamics.lyapunov import lyapunov_spectrum
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import InvalidTimesError, SolverConfigError

RECORDED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "lyapunov_cpu.json"
LORENZ_LEADING = 0.9056  # sigma=10, rho=28, beta=8/3 (e.g. Sprott, "Chaos and Time-Series Analysis", 2003)


class Linear(nn.Module):
    """``dx/dt = A x``."""

    def __init__(self, matrix: torch.Tensor):
        super().__init__()
        self.register_buffer("matrix", matrix)

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return x @ self.matrix.T


class Lorenz(nn.Module):
    """Lorenz-63: ``(σ(y - x), x(ρ - z) - y, xy - βz)``, as a linear part plus ``(0, -xz, xy)``."""

    def __init__(self, sigma: float = 10.0, rho: float = 28.0, beta: float = 8 / 3):
        super().__init__()
        linear = [[-sigma, sigma, 0.0], [rho, -1.0, 0.0], [0.0, 0.0, -beta]]
        self.register_buffer("linear", torch.tensor(linear, dtype=torch.float64))
        self.register_buffer("sign", torch.tensor([0.0, -1.0, 1.0], dtype=torch.float64))

    def forward(self, t: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return u @ self.linear.T + u[..., :1] * u[..., [0, 2, 1]] * self.sign


class Counting(nn.Module):
    """A field that counts the calls of its ``forward`` (Python calls: a vmapped call counts once)."""

    def __init__(self, field: nn.Module):
        super().__init__()
        self.field, self.calls = field, 0

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.field(t, x)


def _transformer(device: torch.device, dim: int = 8) -> tuple[nn.Module, torch.Tensor]:
    field = SplitField(AttentionBranch(dim, 2), MLPBranch(dim)).double().to(device)
    return field, torch.randn(1, 4, dim, dtype=torch.float64, device=device)


def _seeded(*shape: int, seed: int, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(device)


# --- Jacobians and their leading eigenvalues ---------------------------------------------------------------------


def test_field_jacobian_is_the_reverse_mode_jacobian(device):
    field, x = _transformer(device)
    t = torch.tensor(0.0, dtype=torch.float64, device=device)
    reverse = torch.autograd.functional.jacobian(lambda y: field(t, y), x).reshape(32, 32)
    assert (field_jacobian(field, 0.0, x) - reverse).abs().max().item() < 1e-12


def test_field_jacobian_refuses_a_large_state_and_names_the_iterative_spectrum(device):
    field, x = _transformer(device)
    with pytest.raises(ValueError, match="leading_eigenvalues"):
        field_jacobian(field, 0.0, x, max_size=31)
    with pytest.raises(TypeError, match="one real floating tensor"):
        field_jacobian(field, 0.0, (x, x))  # type: ignore[arg-type]


@pytest.mark.parametrize("by", ["real", "magnitude"])
@pytest.mark.parametrize("krylov_dim", [12, None])
def test_leading_eigenvalues_are_those_of_the_dense_jacobian(device, by, krylov_dim):
    field, x = _transformer(device)
    exact = torch.linalg.eigvals(field_jacobian(field, 0.3, x))
    key = exact.real if by == "real" else exact.abs()
    found = leading_eigenvalues(field, 0.3, x, 5, by=by, krylov_dim=krylov_dim, tol=1e-10)
    found_key = found.values.real if by == "real" else found.values.abs()
    assert (found_key - key.sort(descending=True).values[:5]).abs().max().item() < 1e-8
    nearest = (found.values[:, None] - exact[None, :]).abs().min(dim=1).values
    assert nearest.max().item() < 1e-8  # each is an eigenvalue (the imaginary part too)
    assert found.residuals.max().item() < 1e-8
    if krylov_dim == 12:  # a space too small for 5 pairs at once: converged through restarts
        assert found.restarts > 0 and found.jvps < 2 * 32 * (found.restarts + 1)


def test_leading_eigenvalues_refuse_bad_arguments_and_report_non_convergence(device):
    field, x = _transformer(device)
    with pytest.raises(ValueError, match="k must satisfy"):
        leading_eigenvalues(field, 0.0, x, 32)
    with pytest.raises(ValueError, match="by must be"):
        leading_eigenvalues(field, 0.0, x, 2, by="imag")
    with pytest.raises(ValueError, match="krylov_dim"):
        leading_eigenvalues(field, 0.0, x, 4, krylov_dim=4)
    with pytest.raises(EigenvaluesNotConvergedError, match="restarts"):
        leading_eigenvalues(field, 0.0, x, 5, krylov_dim=8, tol=1e-14, max_restarts=0)


# --- Lyapunov exponents: exact references --------------------------------------------------------------------------


def _finite_time_reference(matrix: torch.Tensor, frame: torch.Tensor, span: float, chunks: int) -> torch.Tensor:
    """``(1/T) log |R_ii|`` of the QR decomposition of ``expm(A T) V0``, in ``chunks`` exact propagators
    ``expm(A T / chunks)`` each followed by QR (one QR of ``expm(A T) V0`` would lose the small ``R_ii`` to rounding:
    ``expm(A T)`` has condition number ``e^{30}`` here)."""
    propagator = torch.linalg.matrix_exp(matrix * (span / chunks))
    q, logs = torch.linalg.qr(frame.T)[0], torch.zeros(frame.shape[0], dtype=matrix.dtype, device=matrix.device)
    for _ in range(chunks):
        q, r = torch.linalg.qr(propagator @ q)
        logs = logs + r.diagonal().abs().log()
    return logs / span


def test_linear_field_exponents_are_the_exact_finite_time_ones(device):
    matrix = _seeded(6, 6, seed=1, device=device)
    frame, x0 = _seeded(6, 6, seed=2, device=device), _seeded(6, seed=3, device=device)
    found = lyapunov_spectrum(Linear(matrix), x0, 0.0, 10.0, k=6, steps=400, reorthonormalize_every=10, frame=frame)
    reference = _finite_time_reference(matrix, frame, 10.0, 40)
    assert (found.exponents - reference).abs().max().item() < 1e-6
    assert found.running.shape == (40, 6) and (found.running[-1] == found.exponents).all()
    assert found.times[0].item() == 0.0 and found.times[-1].item() == 10.0


def test_exponents_from_the_eigenvector_frame_are_the_eigenvalues(device):
    """For symmetric ``A`` and a frame of its eigenvectors in descending order, ``Φ(T) V0 = V0 e^{DT}``: the exponents
    are the eigenvalues for any ``T``, sorted as the real parts of ``A``'s eigenvalues."""
    eigenvalues = torch.tensor([0.9, 0.4, 0.0, -0.3, -1.1, -1.7], dtype=torch.float64, device=device)
    basis = torch.linalg.qr(_seeded(6, 6, seed=4, device=device))[0]
    matrix = basis @ torch.diag(eigenvalues) @ basis.T
    found = lyapunov_spectrum(
        Linear(matrix), _seeded(6, seed=5, device=device), 0.0, 5.0, k=6, steps=200, frame=basis.T
    )
    expected = torch.linalg.eigvals(matrix).real.sort(descending=True).values
    assert (found.exponents - expected).abs().max().item() < 1e-6


def test_a_rotation_has_zero_exponents(device):
    skew = _seeded(6, 6, seed=6, device=device)
    found = lyapunov_spectrum(Linear(skew - skew.T), _seeded(6, seed=7, device=device), 0.0, 5.0, k=6, steps=250)
    assert found.exponents.abs().max().item() <= 1e-6


def _hand_written_benettin(field: Lorenz, u: torch.Tensor, frame: torch.Tensor, h: float, steps: int) -> torch.Tensor:
    """Benettin with the analytic Lorenz Jacobian and a plain rk4 loop: an independent reference."""

    def joint(u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, y, z = u
        jacobian = field.linear + torch.stack(
            [torch.zeros_like(u), torch.stack([-z, 0 * z, -x]), torch.stack([y, x, 0 * x])]
        )
        return field(None, u), v @ jacobian.T

    v, logs = torch.linalg.qr(frame.T)[0].T, torch.zeros(frame.shape[0], dtype=torch.float64)
    for _ in range(steps):
        k1 = joint(u, v)
        k2 = joint(u + h / 2 * k1[0], v + h / 2 * k1[1])
        k3 = joint(u + h / 2 * k2[0], v + h / 2 * k2[1])
        k4 = joint(u + h * k3[0], v + h * k3[1])
        u = u + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        q, r = torch.linalg.qr((v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])).T)
        v, logs = q.T, logs + r.diagonal().abs().log()
    return logs / (h * steps)


@pytest.mark.cpu_only("a hand-written reference loop on CPU tensors")
def test_lorenz_spectrum_is_the_hand_written_one_and_contracts_volume_at_the_trace():
    """Over a short span: equal to an independent rk4 + analytic-Jacobian Benettin loop; and ``λ1 + λ2 + λ3`` is
    ``tr J = -(σ + 1 + β)`` over any span (Liouville), up to rk4's error, which falls as ``h^4`` (``|λ3| ≈ 14.5``
    makes it 1e-4 at ``h = 0.01``)."""
    field = Lorenz()
    u = solve(field, torch.tensor([1.0, 1.0, 20.0], dtype=torch.float64), [0.0, 10.0], method="rk4", steps=1000).y1
    frame = _seeded(3, 3, seed=8, device=torch.device("cpu"))
    found = lyapunov_spectrum(field, u, 0.0, 4.0, k=3, step_size=0.01, frame=frame)
    assert (found.exponents - _hand_written_benettin(field, u, frame, 0.01, 400)).abs().max().item() < 1e-9
    errors = [
        abs(lyapunov_spectrum(field, u, 0.0, 1.0, k=3, step_size=h).exponents.sum().item() + 10.0 + 1.0 + 8 / 3)
        for h in (0.02, 0.01)
    ]
    assert errors[1] < 2e-4 and 10 < errors[0] / errors[1] < 22, errors  # fourth order: 16


@pytest.mark.slow
@pytest.mark.cpu_only("a long chaotic run, timed for one CPU thread")
def test_lorenz_leading_exponent_is_the_known_value():
    """``λ1 = 0.9056`` within 2% over ``T = 400`` after a transient of 20 (rk4, step 0.04, about 40 s on one
    thread). Finite-time exponents of Lorenz-63 scatter by about 0.9% (one standard deviation) around it at this
    ``T`` over initial conditions, so 2% is more than two standard deviations; at ``T = 100`` the scatter is 2.3%."""
    field = Lorenz()
    start = torch.tensor([1.0, 1.0, 20.0], dtype=torch.float64) + _seeded(3, seed=9, device=torch.device("cpu"))
    u = solve(field, start, [0.0, 20.0], method="rk4", step_size=0.01).y1
    found = lyapunov_spectrum(field, u, 0.0, 400.0, k=1, step_size=0.04, reorthonormalize_every=25)
    assert abs(found.exponents[0].item() / LORENZ_LEADING - 1) < 0.02


# --- Lyapunov exponents of a transformer field ---------------------------------------------------------------------


def _flow_derivative_growth(field: nn.Module, x: torch.Tensor, v: torch.Tensor, method: str, steps: int) -> float:
    """``(1/T) log |Φ v|`` over ``[0, 2]`` with ``Φ v`` by central differences of the library's own solve."""
    eps = 1e-5
    plus = solve(field, x + eps * v, [0.0, 2.0], method=method, steps=steps).y1
    minus = solve(field, x - eps * v, [0.0, 2.0], method=method, steps=steps).y1
    return ((plus - minus) / (2 * eps)).norm().log().item() / 2.0


@pytest.mark.parametrize("method", ["rk4", "lie_trotter"])
def test_transformer_leading_exponent_is_the_growth_of_the_discrete_flow_derivative(device, method):
    """The tangent solve is the derivative of the same solve of ``x`` (for splitting too: parts' tangents)."""
    field, x = _transformer(device)
    frame = _seeded(1, 1, 4, 8, seed=10, device=device)
    with torch.no_grad():
        found = lyapunov_spectrum(
            field, x, 0.0, 2.0, k=1, method=method, steps=4, frame=frame, reorthonormalize_every=4
        )
        expected = _flow_derivative_growth(field, x, frame[0] / frame.norm(), method, 4)
    assert abs(found.exponents[0].item() - expected) < 1e-7


def test_transformer_exponents_are_finite_and_nested(device):
    """The first ``j`` exponents do not depend on ``k`` (Gram-Schmidt order, prefix-stable default frame). They need
    not be sorted over a finite depth: from a random frame, this field's measure ``0.039, 0.106, 0.099`` on ``[0, 4]``
    (a pre-norm field is bounded, so its exponents tend to 0 and their order is decided by the frame)."""
    field, x = _transformer(device)
    three = lyapunov_spectrum(field, x, 0.0, 4.0, k=3, steps=16)
    assert torch.isfinite(three.exponents).all() and three.exponents.abs().max().item() < 1.0
    for k in (1, 2):
        fewer = lyapunov_spectrum(field, x, 0.0, 4.0, k=k, steps=16)
        assert (fewer.exponents - three.exponents[:k]).abs().max().item() < 1e-10
    assert (three.x1 - solve(field, x, [0.0, 4.0], method="rk4", steps=16).y1).abs().max().item() < 1e-12


def test_well_separated_exponents_come_out_sorted(device):
    """Where the spectrum has gaps (here ``A``'s real parts), Benettin's order is the descending one."""
    eigenvalues = torch.tensor([0.8, 0.3, -0.2, -0.9], dtype=torch.float64, device=device)
    mixing = torch.eye(4, dtype=torch.float64, device=device) + 0.3 * _seeded(4, 4, seed=11, device=device)
    matrix = mixing @ torch.diag(eigenvalues) @ torch.linalg.inv(mixing)
    found = lyapunov_spectrum(Linear(matrix), _seeded(4, seed=12, device=device), 0.0, 20.0, k=4, steps=200)
    assert (found.exponents[:-1] > found.exponents[1:]).all(), found.exponents
    assert (found.exponents - eigenvalues).abs().max().item() < 0.1  # the finite-time bias is O(1/T)


def test_a_continuous_depth_supplies_its_field_span_and_grid(device):
    field, x = _transformer(device)
    depth = ContinuousDepth(field, 3.0, t0=1.0, method="rk4", steps=6)
    from_module = lyapunov_spectrum(depth, x, k=2)
    explicit = lyapunov_spectrum(field, x, 1.0, 3.0, k=2, method="rk4", steps=6)
    assert (from_module.exponents == explicit.exponents).all() and from_module.times[-1].item() == 3.0
    overridden = lyapunov_spectrum(depth, x, k=2, steps=3)
    assert overridden.running.shape == (3, 2) and (overridden.exponents != explicit.exponents).any()


@pytest.mark.slow
def test_compiled_evaluation_gives_the_eager_exponents(device):
    """``compile=True`` (about 10-20 s of compilation on a CPU per part and ``k``) computes the same numbers."""
    field, x = _transformer(device)
    for method in ("rk4", "lie_trotter"):
        eager = lyapunov_spectrum(field, x, 0.0, 2.0, k=2, method=method, steps=4)
        compiled = lyapunov_spectrum(field, x, 0.0, 2.0, k=2, method=method, steps=4, compile=True)
        assert (compiled.exponents - eager.exponents).abs().max().item() < 1e-12
        assert (compiled.frame - eager.frame).abs().max().item() < 1e-12


def test_one_forward_pass_per_evaluation_whatever_k(device):
    """The cost structure behind the ``(k + 1)x`` claim: the joint field calls the field's ``forward`` once per
    evaluation for any ``k`` (the ``k`` tangents ride along, vectorised), as often as the forward solve does. The
    time claim itself is measured by ``benchmarks/lyapunov.py`` (too noisy for a test on a shared machine)."""
    field, x = _transformer(device)
    counted = Counting(field)
    solve(counted, x, [0.0, 2.0], method="rk4", steps=4)
    forward_calls, counted.calls = counted.calls, 0
    for k in (1, 2, 5):
        found = lyapunov_spectrum(counted, x, 0.0, 2.0, k=k, steps=4)
        assert counted.calls == forward_calls == found.nfe, k
        counted.calls = 0


def test_clear_errors(device):
    field, x = _transformer(device)
    with pytest.raises(ValueError, match="state dimension"):
        lyapunov_spectrum(field, x, 0.0, 1.0, k=33, steps=2)
    with pytest.raises(InvalidTimesError, match="t1 must be greater than t0"):
        lyapunov_spectrum(field, x, 1.0, 1.0, k=1, steps=2)
    with pytest.raises(TypeError, match="tuple states"):
        lyapunov_spectrum(field, (x, x), 0.0, 1.0, k=1, steps=2)  # type: ignore[arg-type]
    with pytest.raises(SolverConfigError, match="fixed-grid"):
        lyapunov_spectrum(field, x, 0.0, 1.0, k=1, method="dopri5", steps=2)
    with pytest.raises(ValueError, match="needs one grid"):
        lyapunov_spectrum(field, x, 0.0, 1.0, k=1)
    with pytest.raises(ValueError, match="frame must be"):
        lyapunov_spectrum(field, x, 0.0, 1.0, k=2, steps=2, frame=torch.ones(2, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="linearly independent"):
        lyapunov_spectrum(field, x, 0.0, 1.0, k=2, steps=2, frame=x.expand(2, *x.shape))


@pytest.mark.cpu_only("reads the recorded CPU benchmark")
@pytest.mark.skipif(not RECORDED.is_file(), reason="no recorded Lyapunov benchmark beside this suite")
def test_the_recorded_benchmark_verdicts_follow_from_its_ratios():
    """``benchmarks/results/lyapunov_cpu.json`` (time over the eager forward solve): each ``met`` is
    ``ratio <= k + 1``; with ``compile=True`` the bound holds for every ``k >= 2`` at every recorded size (eager
    forward-mode AD misses it at these sizes, from per-operation overhead: the JSON has the ratios)."""
    record = json.loads(RECORDED.read_text())
    assert record["omp_num_threads"] == "1" and record["rows"]
    for row in record["rows"]:
        for mode, ratios in row["ratio"].items():
            for name, ratio in ratios.items():
                assert row["met"][mode][name] == (ratio <= int(name.removeprefix("k=")) + 1)
        assert all(met for name, met in row["met"]["compiled"].items() if name != "k=1"), row["size"]
