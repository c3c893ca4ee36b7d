"""ContinuousDepth refuses a bad field, times or solve settings when built, and bad conditioning when called:
each error names the argument and says what is valid (shape and dtype for masks)."""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import ParallelField, SplitField, as_field
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.numerics import InvalidFieldError, InvalidTimesError, SolverConfigError
from tests import _conditioned


def _x(device, batch: int = 2, n: int = 5) -> torch.Tensor:
    return torch.randn(batch, n, 8).to(device)


def _right_padding(lengths: list[int], n: int, device) -> torch.Tensor:
    """(B, n) bool, True after the first lengths[b] positions."""
    return (torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]).to(device)


def _model(kind: str, device, **settings) -> ContinuousDepth:
    field = _conditioned.build(kind).to(device)
    return ContinuousDepth(field, **{**_conditioned.unit_steps(kind, field), **settings})


def _call(model: ContinuousDepth, kind: str, x: torch.Tensor, pad, memory_pad=None, memory=None) -> torch.Tensor:
    memory = torch.randn(x.shape[0], 7, 8).to(x.device) if memory is None else memory
    return model(x, **_conditioned.conditioning(kind, x, pad, memory, memory_pad))


def test_continuous_depth_refuses_a_callable_field(device):
    with pytest.raises(
        InvalidFieldError, match=r"field must be an nn.Module with forward\(t, x\) -> dx/dt, got function"
    ):
        ContinuousDepth(lambda t, x: -x)


@pytest.mark.parametrize("branch", [MLPBranch(8), AttentionBranch(8, 2)], ids=["mlp", "attention"])
def test_continuous_depth_refuses_a_residual_branch_and_points_to_as_field(branch, device):
    branch = branch.to(device)
    name = type(branch).__name__
    with pytest.raises(
        InvalidFieldError,
        match=rf"^field must be callable as field\(t, y\) -> dy/dt, but {name} takes \(x\b.*A residual branch "
        r".*fields\.as_field\(branch\), the autonomous field dy/dt = branch\(y\), or a SplitField of branches$",
    ):
        ContinuousDepth(branch)
    x = _x(device)
    assert torch.equal(ContinuousDepth(as_field(branch))(x), x + branch(x))  # one Euler step of size 1


@pytest.mark.parametrize(
    "times, error, match",
    [
        (dict(t1=0.0), InvalidTimesError, r"t1 must be greater than t0 .*t0=0\.0, t1=0\.0"),
        (dict(t1=-1.0), InvalidTimesError, "t1 must be greater than t0"),
        (dict(t0=2.0, t1=1.0), InvalidTimesError, r"t0=2\.0, t1=1\.0"),
        (dict(t1=math.nan), InvalidTimesError, "t1 must be finite, got nan"),
        (dict(t0=-math.inf), InvalidTimesError, "t0 must be finite"),
        (dict(t1="2"), TypeError, "t1 must be a real number .*got '2' of type str"),
        (dict(t1=True), TypeError, "t1 must be a real number .*of type bool"),
        (dict(t1=torch.tensor(2.0)), TypeError, "t1 must be a real number .*of type Tensor"),
    ],
)
def test_continuous_depth_refuses_bad_times_when_built(times, error, match, device):
    with pytest.raises(error, match=match):
        ContinuousDepth(SplitField(MLPBranch(8)).to(device), **times)


@pytest.mark.parametrize(
    "settings, error, match",
    [
        (
            dict(gradeint="checkpoint"),
            TypeError,
            r"unknown solve setting 'gradeint' \(did you mean 'gradient'\?\); valid: ",
        ),
        (dict(rtool=1e-3), TypeError, r"unknown solve setting 'rtool' \(did you mean 'rtol'\?\)"),
        (dict(t=[0.0, 1.0]), TypeError, "'t' is not a solve setting"),
        (dict(method="rk5"), SolverConfigError, "unknown method 'rk5'"),
        (dict(backend="jax"), SolverConfigError, "unknown backend 'jax'"),
        (dict(gradient="reverse"), SolverConfigError, "unknown gradient='reverse'"),
        (dict(method="lie_trotter", gradient="adjoint"), SolverConfigError, "no backend supports"),
        (dict(method="euler", substep="rk4"), SolverConfigError, "substep applies to the splitting methods"),
    ],
)
def test_continuous_depth_refuses_bad_solve_settings_when_built(settings, error, match, device):
    with pytest.raises(error, match=match):
        ContinuousDepth(SplitField(MLPBranch(8)).to(device), **settings)


def test_continuous_depth_refuses_splitting_a_field_without_parts_when_built(device):
    with pytest.raises(SolverConfigError, match="Autonomous has no non-empty `parts`"):
        ContinuousDepth(as_field(MLPBranch(8)).to(device), method="lie_trotter")


def test_a_misspelt_conditioning_keyword_is_refused_before_anything_is_bound(device):
    model = _model("split", device)
    x, pad = _x(device), _right_padding([5, 3], 5, device)
    bound = model(x, key_padding_mask=pad)
    with pytest.raises(
        TypeError,
        match=r"conditioning keyword 'key_padding_mak' is taken by no bind\(\) of the field WeightSharedField "
        r"\(did you mean 'key_padding_mask'\?\); its submodules take: key_padding_mask, kv_cache, memory, "
        r"memory_key_padding_mask",
    ):
        model(x, key_padding_mak=pad)
    assert torch.equal(solve(model.field, x, [0.0, 2.0], method="lie_trotter", steps=2).y1, bound)  # still bound
    assert model(x, key_padding_mak=None).shape == x.shape  # None conditions nothing: no error
    with pytest.raises(TypeError, match=r"'key_padding_mask' is taken by no bind\(\) .*take: none"):
        ContinuousDepth(ParallelField(MLPBranch(8)).to(device))(x, key_padding_mask=pad)


@pytest.mark.parametrize("kind", _conditioned.KINDS)
@pytest.mark.parametrize(
    "mask, error, match",
    [
        (lambda pad: pad.float(), TypeError, r"key_padding_mask must be a bool tensor .*got dtype torch.float32"),
        (lambda pad: pad.tolist(), TypeError, "key_padding_mask must be a bool tensor .*got list"),
        (
            lambda pad: pad[:, :4],
            ValueError,
            r"key_padding_mask must be a bool tensor of shape \(\*batch, n\) = \(2, 5\)",
        ),
        (lambda pad: pad[:1], ValueError, r"key_padding_mask has batch shape \(1,\), but .* has batch shape \(2,\)"),
    ],
    ids=["float", "list", "short", "batch"],
)
def test_a_bad_padding_mask_is_named_with_the_shape_and_dtype_expected(kind, mask, error, match, device):
    model = _model(kind, device)
    x, pad = _x(device), _right_padding([5, 3], 5, device)
    with pytest.raises(error, match=match):
        _call(model, kind, x, mask(pad))


@pytest.mark.parametrize("kind", _conditioned.DECODERS)
@pytest.mark.parametrize(
    "memory_pad, memory, error, match",
    [
        (
            torch.zeros(2, 7),
            None,
            TypeError,
            r"memory_key_padding_mask must be a bool tensor of shape \(\*batch, n\) = \(2, 7\)",
        ),
        (
            torch.zeros(2, 6, dtype=torch.bool),
            None,
            ValueError,
            r"memory_key_padding_mask must be a bool tensor .*\(2, 7\)",
        ),
        (None, torch.randn(3, 7, 8), ValueError, r"memory has batch shape \(3,\), but .* has batch shape \(2,\)"),
    ],
    ids=["float", "short", "memory-batch"],
)
def test_a_bad_memory_or_memory_key_padding_mask_is_named(kind, memory_pad, memory, error, match, device):
    model = _model(kind, device)
    x = _x(device)
    memory = None if memory is None else memory.to(device)
    with pytest.raises(error, match=match):
        _call(model, kind, x, None, None if memory_pad is None else memory_pad.to(device), memory)


@pytest.mark.parametrize("kind", _conditioned.KINDS)
def test_conditioning_bound_for_another_batch_is_reported_as_such(kind, device):
    """ContinuousDepth binds a batch of 2; the field then solved on a batch of 3 names the batch shapes."""
    model = _model(kind, device)
    x, pad = _x(device), _right_padding([5, 3], 5, device)
    _call(model, kind, x, pad, _right_padding([7, 4], 7, device))
    other = _x(device, batch=3)
    field = model.field
    with pytest.raises(ValueError, match=r"batch shape \(\d,\), but .+ batch shape \(\d,\): bind\(\) was called"):
        y0 = field.initial_state(other) if hasattr(field, "initial_state") else other
        solve(field, y0, [0.0, model.t1], **model.solve_options)
