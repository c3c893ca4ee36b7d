"""One name for how ``solve`` computes gradients: ``gradient=``, the gradient method.

``adjoint=``, its old name, still works for one release: a ``DeprecationWarning`` naming ``gradient=``, the same
result; giving both is a ``TypeError``. The same holds for ``resolve_backend``, ``ContinuousDepth`` and
``set_solve_options``; ``GRADIENT_MODES`` and ``Settings.adjoint`` are deprecated names of ``GRADIENTS`` and
``Settings.gradient``.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import neuralode_tf.numerics as numerics
from neuralode_tf import ContinuousDepth, set_solve_options, solve
from neuralode_tf.fields import SplitField
from neuralode_tf.nn import MLPBranch
from neuralode_tf.numerics import GRADIENTS, Settings, get_backend, resolve_backend

OLD_NAME = r"adjoint= is deprecated .*pass gradient='checkpoint' instead"


def _field(device) -> SplitField:
    return SplitField(MLPBranch(4), MLPBranch(4)).to(device).double()


def _loss_and_grads(field, x, **options):
    solution = solve(field, x, [0.0, 1.0], method="rk4", steps=4, **options)
    loss = solution.y1.square().sum()
    return loss.detach(), torch.autograd.grad(loss, [x, *field.parameters()]), solution.stats


def test_adjoint_is_the_deprecated_name_of_gradient(device):
    field, x = _field(device), torch.randn(2, 3, 4, dtype=torch.float64, device=device, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns nothing
        new = _loss_and_grads(field, x, gradient="checkpoint")
    with pytest.warns(DeprecationWarning, match=OLD_NAME) as record:
        old = _loss_and_grads(field, x, adjoint="checkpoint")
    assert record[0].filename == __file__  # the warning points at the caller of solve
    assert torch.equal(old[0], new[0]) and all(torch.equal(a, b) for a, b in zip(old[1], new[1]))
    assert old[2] == new[2] and new[2].nfe_backward > 0  # checkpointing did recompute, under either name


@pytest.mark.cpu_only("argument checks; nothing is solved")
def test_giving_both_names_is_a_type_error():
    field, x = _field("cpu"), torch.ones(2, 3, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match="adjoint is the deprecated old name of gradient; pass gradient alone"):
        solve(field, x, [0.0, 1.0], method="rk4", steps=1, gradient="backprop", adjoint="checkpoint")
    with pytest.raises(TypeError, match="both given"):
        resolve_backend(field, "dopri5", gradient="adjoint", adjoint="adjoint")
    with pytest.raises(TypeError, match="both given"):
        ContinuousDepth(field, method="rk4", gradient="checkpoint", adjoint="checkpoint")


@pytest.mark.cpu_only("argument checks; nothing is solved")
def test_resolve_backend_takes_the_old_name_with_a_warning():
    field = _field("cpu")
    with pytest.warns(DeprecationWarning, match=r"pass gradient='adjoint' instead"):
        old = resolve_backend(field, "dopri5", adjoint="adjoint")
    assert old == resolve_backend(field, "dopri5", gradient="adjoint") == "torchdiffeq"
    assert resolve_backend(field, "dopri5") == resolve_backend(field, "dopri5", gradient="backprop")


@pytest.mark.cpu_only("argument checks; nothing is solved")
def test_unknown_gradient_names_the_valid_ones():
    with pytest.raises(numerics.SolverConfigError, match=r"unknown gradient='x'; valid: 'backprop', 'checkpoint', "):
        resolve_backend(_field("cpu"), "rk4", gradient="x")


def test_continuous_depth_keeps_the_new_name(device):
    field, x = _field(device), torch.randn(2, 3, 4, dtype=torch.float64, device=device)
    with pytest.warns(DeprecationWarning, match=OLD_NAME) as record:
        old = ContinuousDepth(field, method="rk4", steps=2, adjoint="checkpoint")
    assert record[0].filename == __file__
    new = ContinuousDepth(field, method="rk4", steps=2, gradient="checkpoint")
    assert dict(old.solve_options) == dict(new.solve_options) and "adjoint" not in old.solve_options
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once renamed, a forward warns nothing
        assert torch.equal(old(x), new(x))
    with pytest.warns(DeprecationWarning, match=r"pass gradient='backprop' instead"):
        old.set_solve_options(adjoint="backprop")
    assert old.solve_options["gradient"] == "backprop"
    with pytest.warns(DeprecationWarning, match=OLD_NAME):
        set_solve_options(torch.nn.Sequential(old, new), adjoint="checkpoint")
    assert old.solve_options["gradient"] == new.solve_options["gradient"] == "checkpoint"


@pytest.mark.cpu_only("reads the registry; no tensors")
def test_gradients_is_the_tuple_of_gradient_methods_and_gradient_modes_its_old_name():
    assert GRADIENTS == ("backprop", "checkpoint", "adjoint")
    assert all(set(get_backend(name).gradients) <= set(GRADIENTS) for name in numerics.BACKENDS)
    assert "GRADIENT_MODES" not in numerics.__all__ and "GRADIENT_MODES" not in dir(numerics)
    with pytest.warns(DeprecationWarning, match="name 'GRADIENT_MODES' is now called 'GRADIENTS'"):
        assert numerics.GRADIENT_MODES == GRADIENTS
    with pytest.raises(AttributeError, match="has no attribute 'GRADIENT_MODE'"):
        numerics.GRADIENT_MODE  # noqa: B018
    assert all(hasattr(numerics, name) for name in numerics.__all__)


@pytest.mark.cpu_only("a dataclass field; no tensors")
def test_settings_adjoint_is_the_deprecated_name_of_gradient():
    values = {f.name: None for f in dataclasses.fields(Settings)}
    settings = Settings(**{**values, "method": "euler", "gradient": "checkpoint"})
    with pytest.warns(DeprecationWarning, match="Settings attribute .adjoint. is now called .gradient."):
        assert settings.adjoint == "checkpoint"
