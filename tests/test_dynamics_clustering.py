"""Token clustering over depth (dynamics.clustering) and the self-attention dynamics on the sphere of Geshkovski,
Letrouit, Polyanskiy & Rigollet (dynamics.sphere_attention): the measures on hand-built states, the field against a
written-out loop, its drift off the sphere under rk4, and the papers' clustering claims measured in the run."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from neuralode_tf.dynamics.clustering import (
    DEFAULT_CLUSTER_TOLERANCE,
    cluster_count,
    mean_pairwise_cosine,
    min_pairwise_cosine,
    time_to_one_cluster,
)
from neuralode_tf.dynamics.sphere_attention import SphereAttentionField, interaction_energy, uniform_sphere_tokens
from neuralode_tf.numerics import solve

F64 = torch.float64


def _seeded_tokens(n: int, d: int, seeds: range, device: torch.device) -> torch.Tensor:
    """``(len(seeds), n, d)``: one independent uniform draw per seed."""
    return torch.stack([uniform_sphere_tokens(n, d, seed=s, dtype=F64, device=device) for s in seeds])


def _trajectory(beta: float, x0: torch.Tensor, horizon: float, outputs: int, steps: int, normalization: str = "sa"):
    field = SphereAttentionField(beta, normalization)
    times = torch.linspace(0, horizon, outputs + 1, dtype=F64)
    return solve(field, x0, times, method="rk4", steps=steps)


def _two_standard_errors(larger: list[float], smaller: list[float]) -> tuple[str, float, float]:
    """The rule: "agree" if mean(larger) - mean(smaller) > 2 se, se = sqrt(s_a²/n_a + s_b²/n_b)."""
    difference = statistics.mean(larger) - statistics.mean(smaller)
    se = math.sqrt(statistics.variance(larger) / len(larger) + statistics.variance(smaller) / len(smaller))
    verdict = "agree" if difference > 2 * se else ("disagree" if difference < -2 * se else "inconclusive")
    return verdict, difference, se


# ---------------------------------------------------------------- measures on hand-built states


def test_identical_tokens_are_one_cluster(device):
    direction = torch.randn(4, dtype=F64, device=device)
    scales = torch.tensor([0.5, 1.0, 2.0, 3.0, 7.0], dtype=F64, device=device)  # cosines ignore the norms
    states = (scales[:, None] * direction).expand(3, 2, 5, 4)  # (T, batch, n, d)
    assert torch.allclose(mean_pairwise_cosine(states), torch.ones(3, 2, dtype=F64, device=device), atol=1e-12)
    assert torch.allclose(min_pairwise_cosine(states), torch.ones(3, 2, dtype=F64, device=device), atol=1e-12)
    assert cluster_count(states).tolist() == [[1, 1]] * 3
    assert time_to_one_cluster(states).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("group", [1, 3, 5])
def test_antipodal_groups_are_two_clusters(device, group):
    u = torch.nn.functional.normalize(torch.randn(6, dtype=F64, device=device), dim=0)
    states = torch.cat([u.expand(group, 6), -u.expand(group, 6)])[None]  # (T=1, n=2 group, d=6)
    # within a group cosine 1 (2 group (group - 1) ordered pairs), across -1 (2 group² pairs)
    expected_mean = (2 * group * (group - 1) - 2 * group**2) / (2 * group * (2 * group - 1))
    assert mean_pairwise_cosine(states).item() == pytest.approx(expected_mean, abs=1e-12)
    assert min_pairwise_cosine(states).item() == pytest.approx(-1.0, abs=1e-12)
    assert cluster_count(states).tolist() == [2]
    assert time_to_one_cluster(states).item() == math.inf


def test_orthonormal_tokens_are_n_clusters(device):
    n = 7
    q, _ = torch.linalg.qr(torch.randn(n, n, dtype=F64))
    states = q.to(device)[None, None]  # rows orthonormal; (T=1, batch=1, n, d=n)
    assert cluster_count(states).tolist() == [[n]]
    assert mean_pairwise_cosine(states).abs().item() < 1e-14
    assert min_pairwise_cosine(states).abs().item() < 1e-14
    # linked only once eps passes 1 (cosine 0 >= 1 - eps)
    assert cluster_count(states, eps=0.999).tolist() == [[n]]
    assert cluster_count(states, eps=1.001).tolist() == [[1]]


def test_a_chain_of_close_tokens_is_one_cluster(device):
    """Connected components, not cliques: 12 tokens 2° apart on a great circle are linked neighbour to neighbour
    (cos 2° = 0.99939 >= 1 - 1e-3) though the ends are 22° apart; with eps below 1 - cos 2° none is linked."""
    angles = torch.deg2rad(torch.arange(12, dtype=F64) * 2.0)
    chain = torch.stack([angles.cos(), angles.sin(), torch.zeros(12, dtype=F64)], -1)
    halves = torch.cat([chain[:6], -chain[6:]])  # two chains, 180° apart
    order = torch.randperm(12)  # the closure cannot rely on a chain being in index order
    states = torch.stack([chain[order], halves[order]]).to(device)[None]  # (T=1, batch=2, n=12, d=3)
    assert 1 - math.cos(math.radians(2)) < DEFAULT_CLUSTER_TOLERANCE < 1 - math.cos(math.radians(4))
    assert cluster_count(states).tolist() == [[1, 2]]
    assert cluster_count(states, eps=5e-4).tolist() == [[12, 12]]
    assert min_pairwise_cosine(states)[0, 0].item() == pytest.approx(math.cos(math.radians(22)), abs=1e-12)


def test_padding_mask_leaves_padded_tokens_out(device):
    u = torch.nn.functional.normalize(torch.randn(5, dtype=F64, device=device), dim=0)
    states = u.expand(2, 3, 6, 5).clone()  # (T=2, batch=3, n=6, d=5), all tokens u
    states[:, :, 4:] = -u  # the last two tokens point away ...
    mask = torch.zeros(3, 6, dtype=torch.bool, device=device)
    mask[:, 4:] = True  # ... and are padding
    mask[1, 1:] = True  # sample 1 has one real token, sample 2 none
    mask[2, :] = True
    assert cluster_count(states).tolist() == [[2, 2, 2]] * 2
    assert mean_pairwise_cosine(states)[0, 0].item() < 0.5
    mean = mean_pairwise_cosine(states, mask)
    assert mean[:, 0].tolist() == pytest.approx([1.0, 1.0], abs=1e-12)
    assert mean[:, 1:].isnan().all()  # no pair of real tokens
    assert min_pairwise_cosine(states, mask)[:, 0].tolist() == pytest.approx([1.0, 1.0], abs=1e-12)
    assert cluster_count(states, mask).tolist() == [[1, 1, 0]] * 2
    assert time_to_one_cluster(states, torch.tensor([0.0, 2.0]), mask).tolist() == [0.0, 0.0, math.inf]


def test_time_to_one_cluster_is_the_first_depth_with_one_cluster(device):
    """Two groups at an angle that closes over depth: one cluster from the 4th state (index 3) on."""
    half_angles = torch.tensor([40.0, 20.0, 5.0, 1.0, 0.5], dtype=F64)  # degrees; 2° apart < 2.56° from index 3
    rad = torch.deg2rad(half_angles)[:, None]
    up = torch.stack([rad.cos(), rad.sin(), torch.zeros_like(rad)], -1)  # (T, 1, 3)
    down = up * torch.tensor([1.0, -1.0, 1.0], dtype=F64)
    states = torch.cat([up.expand(5, 4, 3), down.expand(5, 3, 3)], 1).to(device)  # (T=5, n=7, d=3)
    times = torch.tensor([0.0, 0.5, 1.5, 2.5, 4.0], dtype=F64)
    assert cluster_count(states).tolist() == [2, 2, 2, 1, 1]
    assert time_to_one_cluster(states, times).item() == 2.5
    assert time_to_one_cluster(states).item() == 3.0  # indices when no times are given


def test_measures_reject_bad_arguments(device):
    states = torch.randn(2, 3, 4, 5, device=device)
    with pytest.raises(ValueError, match=r"\(T, \*batch, n, d\)"):
        mean_pairwise_cosine(states[0, 0])
    with pytest.raises(ValueError, match="floating"):
        cluster_count(states.long())
    with pytest.raises(TypeError, match="floating tensor"):
        min_pairwise_cosine(states.tolist())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="padding_mask"):
        cluster_count(states, torch.zeros(3, 5, dtype=torch.bool, device=device))
    with pytest.raises(TypeError, match="padding_mask"):
        cluster_count(states, torch.zeros(3, 4, device=device))
    with pytest.raises(ValueError, match="eps"):
        cluster_count(states, eps=-0.1)
    with pytest.raises(ValueError, match=r"times must be a tensor \(T,\) = \(2,\)"):
        time_to_one_cluster(states, torch.zeros(3))
    with pytest.raises(ValueError, match="at least one token"):
        cluster_count(states[..., :0, :])


# ---------------------------------------------------------------- the field


def _loop_field(x: torch.Tensor, beta: float, normalization: str) -> torch.Tensor:
    """Geshkovski et al.'s (SA) / (USA) written out token by token, in Python floats."""
    n, d = x.shape
    rows = x.tolist()
    out = []
    for i in range(n):
        weights = [math.exp(beta * sum(a * b for a, b in zip(rows[i], rows[j]))) for j in range(n)]
        z = sum(weights) if normalization == "sa" else n
        average = [sum(weights[j] * rows[j][k] for j in range(n)) / z for k in range(d)]
        radial = sum(a * b for a, b in zip(rows[i], average))
        out.append([average[k] - radial * rows[i][k] for k in range(d)])
    return torch.tensor(out, dtype=F64)


@pytest.mark.parametrize("beta", [0.0, 1.0, 4.5])
def test_field_matches_a_written_out_loop_and_usa_differs_by_the_normaliser(device, beta):
    x = uniform_sphere_tokens(9, 4, batch=(2,), seed=3, dtype=F64, device=device)
    sa = SphereAttentionField(beta, "sa")(torch.tensor(0.0), x)
    usa = SphereAttentionField(beta, "usa")(torch.tensor(0.0), x)
    for b in range(2):
        assert torch.allclose(sa[b].cpu(), _loop_field(x[b].cpu(), beta, "sa"), rtol=0, atol=1e-13)
        assert torch.allclose(usa[b].cpu(), _loop_field(x[b].cpu(), beta, "usa"), rtol=0, atol=1e-12)
    z = torch.exp(beta * (x @ x.mT)).sum(-1, keepdim=True)  # the softmax normaliser Z_i
    assert (usa - sa * z / 9).abs().max().item() < 1e-14 * max(1.0, usa.abs().max().item())
    assert sa.abs().max() > 0.05  # not trivially zero


def test_field_output_is_tangent(device):
    x = uniform_sphere_tokens(16, 5, batch=(3, 2), seed=1, dtype=F64, device=device)
    for normalization in ("sa", "usa"):
        field = SphereAttentionField(2.0, normalization)
        for state in (x, 1.3 * x):  # off the sphere too: the projection divides by |x|²
            f = field(torch.tensor(0.0), state)
            assert f.shape == state.shape
            radial = (state * f).sum(-1) / state.norm(dim=-1)
            assert radial.abs().max().item() < 1e-14, normalization
            assert f.norm(dim=-1).max().item() > 0.1
    unbatched = SphereAttentionField(2.0)(torch.tensor(0.0), x[0, 0])
    assert torch.equal(unbatched, SphereAttentionField(2.0)(torch.tensor(0.0), x)[0, 0])


def test_field_and_tokens_reject_bad_arguments(device):
    with pytest.raises(ValueError, match="beta"):
        SphereAttentionField(math.inf)
    with pytest.raises(ValueError, match="normalization"):
        SphereAttentionField(1.0, "softmax")
    with pytest.raises(ValueError, match=r"\(\*batch, n, d\)"):
        SphereAttentionField(1.0)(torch.tensor(0.0), torch.ones(3, device=device))
    with pytest.raises(ValueError, match="beta"):
        interaction_energy(torch.ones(2, 3, device=device), 0.0)
    tokens = uniform_sphere_tokens(8, 3, batch=(2,), seed=5, device=device)
    assert tokens.shape == (2, 8, 3) and tokens.device.type == device.type
    assert (tokens.norm(dim=-1) - 1).abs().max().item() < 1e-6
    assert torch.equal(tokens, uniform_sphere_tokens(8, 3, batch=(2,), seed=5, device=device))
    assert not torch.equal(tokens, uniform_sphere_tokens(8, 3, batch=(2,), seed=6, device=device))


def test_rk4_drift_off_the_sphere_is_bounded_and_fourth_order(device):
    """The exact flow keeps |x_i| = 1; rk4 drifts by its global error: below 2e-6 at T = 40, h = 0.1 (measured
    < 8e-7), about 16 times less per halving of h."""
    x0 = uniform_sphere_tokens(32, 3, batch=(4,), seed=1, dtype=F64, device=device)
    for beta in (1.0, 4.0):
        drift = []
        for steps in (200, 400):
            ys = _trajectory(beta, x0, 40.0, 10, steps).ys
            drift.append((ys.norm(dim=-1) - 1).abs().max().item())
        assert drift[1] < 2e-6, (beta, drift)
        assert drift[0] / drift[1] > 12, (beta, drift)  # order 4: 16


@pytest.mark.parametrize("normalization, steps", [("sa", 150), ("usa", 300)])
def test_dynamics_ascend_the_interaction_energy(device, normalization, steps):
    """dE/dt = sum_i c_i |P grad_i E|² >= 0 for both models: E never decreases along the solve (up to rk4 error)."""
    x0 = uniform_sphere_tokens(24, 3, batch=(3,), seed=2, dtype=F64, device=device)
    ys = _trajectory(1.5, x0, 15.0, 30, steps, normalization).ys
    energy = interaction_energy(ys, 1.5)  # (T, batch)
    assert energy.diff(dim=0).min().item() > -1e-10
    assert (energy[-1] - energy[0]).min().item() > 0.5
    on_sphere = interaction_energy(torch.nn.functional.normalize(ys[-1], dim=-1), 1.5)  # rk4 drifts |x| by ~1e-6
    assert on_sphere.max().item() <= math.exp(1.5) / 3 * (1 + 1e-12)  # at most e^beta / (2 beta), all coinciding
    assert on_sphere.min().item() > 0.99 * math.exp(1.5) / 3  # and nearly there: one cluster


# ---------------------------------------------------------------- the papers' claims, measured


@pytest.mark.parametrize("d", [3, 8])
def test_tokens_end_in_one_cluster_at_beta_1(device, d):
    """d >= 3, beta = 1: from uniform tokens (mean cosine near 0), every seed ends in one cluster by T = 40."""
    x0 = _seeded_tokens(32, d, range(4), device)
    ys = _trajectory(1.0, x0, 40.0, 80, 400).ys
    assert mean_pairwise_cosine(ys[:1]).abs().max().item() < 0.1
    assert cluster_count(ys[:1]).min().item() >= 28  # almost no pair linked at the start
    assert cluster_count(ys[-1:]).tolist() == [[1, 1, 1, 1]]
    assert (1 - min_pairwise_cosine(ys[-1:])).max().item() < 1e-9  # converged, not merely within eps


@pytest.mark.parametrize("d, betas", [(8, (1.0, 4.0)), (3, (1.0, 3.0))])
def test_time_to_one_cluster_grows_with_beta(device, d, betas):
    """Metastability: the time to one cluster is longer at the larger beta, by the two-standard-error rule over 12
    seeds (the same initial tokens for both betas). Every seed must reach one cluster within T = 250."""
    x0 = _seeded_tokens(32, d, range(12), device)
    times = {}
    for beta in betas:
        solution = _trajectory(beta, x0, 250.0, 500, 1000)  # states every 0.5, rk4 steps of 0.25
        times[beta] = time_to_one_cluster(solution.ys, solution.ts).tolist()
        assert all(math.isfinite(t) for t in times[beta]), (beta, times[beta])
    small, large = betas
    verdict, difference, se = _two_standard_errors(times[large], times[small])
    assert verdict == "agree", (times, difference, se)
    assert statistics.mean(times[small]) < 10.0, times[small]
