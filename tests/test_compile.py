"""``solve(..., compile=True)``: the built-in fixed-grid and splitting marches under torch.compile."""

import gc
import weakref

import pytest
import torch

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.models import transformer_field
from neuralode_tf.numerics import SolverConfigError

_SKIP_MODULE_GUARDS = torch.compiler.skip_guard_on_all_nn_modules_unsafe


def _skip_on_xla(device: torch.device) -> None:
    if device.type == "xla":
        pytest.skip(
            "XLA: solve(compile=True) is not supported (torch.compile's inductor backend does not take XLA "
            "tensors; torch_xla compiles its lazy graphs itself)"
        )


def _outputs_and_grads(field, x, **settings):
    x = x.detach().requires_grad_()
    y = solve(field, x, [0.0, 4.0], **settings).y1
    params = [p for p in field.parameters() if p.requires_grad]
    grads = torch.autograd.grad(y.square().mean(), [x, *params])
    return y.detach(), grads


@pytest.mark.parametrize(
    "field_kind, settings",
    [
        ("parallel", dict(method="rk4", steps=4)),
        ("split", dict(method="lie_trotter", step_size=1.0)),
        ("split", dict(method="strang", steps=2, substep="midpoint", gradient="checkpoint")),
        ("parallel", dict(method="euler", steps=4, compile={"guard_filter_fn": _SKIP_MODULE_GUARDS})),
    ],
)
def test_compiled_march_equals_eager(field_kind, settings, device):
    _skip_on_xla(device)
    torch.manual_seed(0)
    field = transformer_field(16, 4, 2, field=field_kind, num_sets=2).to(device)  # weight sharing: t picks the layer
    x = torch.randn(2, 5, 16).to(device)
    settings = dict(settings)
    compile_option = settings.pop("compile", True)
    eager, eager_grads = _outputs_and_grads(field, x, **settings)
    compiled, compiled_grads = _outputs_and_grads(field, x, compile=compile_option, **settings)
    assert (compiled - eager).abs().max().item() <= 1e-5
    assert max((a - b).abs().max().item() for a, b in zip(compiled_grads, eager_grads)) <= 1e-5


def test_continuous_depth_takes_compile(device):
    _skip_on_xla(device)
    torch.manual_seed(0)
    field = transformer_field(16, 2, 2).to(device)
    x = torch.randn(2, 5, 16).to(device)
    model = ContinuousDepth(field, t1=2.0, method="lie_trotter", compile=True)
    eager = ContinuousDepth(field, t1=2.0, method="lie_trotter")
    assert (model(x) - eager(x)).abs().max().item() <= 1e-5


def test_adaptive_methods_and_bad_options_refuse_compile(device):
    torch.manual_seed(0)
    field = transformer_field(16, 2, 2).to(device)
    x = torch.randn(2, 5, 16).to(device)
    with pytest.raises(SolverConfigError, match="compile=True applies to the built-in"):
        solve(field, x, [0.0, 1.0], method="dopri5", compile=True)
    with pytest.raises(SolverConfigError, match="compile must be True, False or a dict"):
        solve(field, x, [0.0, 1.0], method="euler", steps=1, compile="yes")
    with pytest.raises(SolverConfigError, match="compile options must be hashable"):
        solve(field, x, [0.0, 1.0], method="euler", steps=1, compile={"some_list": [1]})


def test_every_field_gets_its_own_compiled_code_and_is_freed_with_it(device):
    """Dynamo keeps at most ``recompile_limit`` variants per code object and runs eagerly beyond; each
    compiled march has a code object of its own, so the second field here still compiles. The cache
    of compiled marches does not keep a field alive."""
    from torch._dynamo.utils import counters

    _skip_on_xla(device)
    x = torch.randn(2, 3, 8).to(device)
    with torch._dynamo.config.patch(recompile_limit=1):
        for seed in (0, 1):
            torch.manual_seed(seed)
            field = transformer_field(8, 1, 2).to(device)
            graphs = counters["stats"]["unique_graphs"]
            solve(field, x, [0.0, 1.0], method="euler", steps=1, compile=True).y1.sum().backward()
            assert counters["stats"]["unique_graphs"] == graphs + 1
    alive = weakref.ref(field)
    del field
    gc.collect()
    assert alive() is None
