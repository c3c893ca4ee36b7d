"""Zhong et al. (2022), A Neural ODE Interpretation of Transformer Layers: the exact claims, recomputed.

Table 1's parameter counts are those of ``create_model("deit_tiny", num_classes=100, ...)`` (224x224 inputs,
i.e. CIFAR-100 resized to DeiT's size; see ``paper_repro/neural_ode_transformer``, §1). The layer identities
(Figure 1, eqs. 1-4, §2, §3.1) compare the library's encoder with the layers written out by hand, in float64,
on the notebook's untrained 12-layer digits model (d = 32, 4 heads, patch 4).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch

from neuralode_tf.models import create_model

SETS = (12, 6, 4, 3, 2, 1)
DEPTH = 12
FAMILY = dict(depth=DEPTH, dim=32, num_heads=4, patch_size=4)  # the notebook's 12-layer digits models


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f}M"


def table1_parameters() -> str:
    """DeiT-Ti (sequential, 12 sets), then the parallel model with 12, 6, 4, 3, 2, 1 sets, as Table 1 prints them."""
    counts = [sum(p.numel() for p in create_model("deit_tiny", num_classes=100, field="split").parameters())]
    for k in SETS:
        model = create_model("deit_tiny", num_classes=100, field="parallel", num_sets=k)
        counts.append(sum(p.numel() for p in model.parameters()))
    return " / ".join(_millions(n) for n in counts)


def _encoder_io(model: torch.nn.Module, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    captured = {}
    hook = model.encoder.register_forward_hook(lambda module, args, out: captured.update(x0=args[0], x1=out))
    with torch.no_grad():
        model(images)
    hook.remove()
    return captured["x0"], captured["x1"]


def _sequential(G: Callable, F: Callable, x: torch.Tensor) -> torch.Tensor:
    """Eqs. 1-2: the attention sub-layer, then the MLP sub-layer, each with its residual."""
    x_hat = x + G(x)
    return x_hat + F(x_hat)


def _parallel(G: Callable, F: Callable, x: torch.Tensor) -> torch.Tensor:
    """Eq. 4: both sub-layers read the same input."""
    return x + (F(x) + G(x))


def _rk4(G: Callable, F: Callable, x: torch.Tensor) -> torch.Tensor:
    """The classical RK4 step of size 1 of eq. 3, ``f = F + G``, written with ``torch.add(..., alpha=c)``
    (a fused multiply-add, as the library's Runge-Kutta steps)."""

    def f(y: torch.Tensor) -> torch.Tensor:
        return F(y) + G(y)

    k1 = f(x)
    k2 = f(torch.add(x, k1, alpha=0.5))
    k3 = f(torch.add(x, k2, alpha=0.5))
    k4 = f(torch.add(x, k3, alpha=1.0))
    return torch.add(x, k1, alpha=1 / 6).add(k2, alpha=1 / 3).add(k3, alpha=1 / 3).add(k4, alpha=1 / 6)


_LAYERS = {
    "sequential": ({"field": "split"}, _sequential),
    "parallel": ({}, _parallel),
    "rk4": ({"method": "rk4"}, _rk4),
}


@cache
def layer_gap(layer: str, num_sets: int) -> float:
    """max |Δ| over the encoder's output between the library's 12-layer digits model (float64, untrained) and
    the ``layer`` written out by hand, with layer ``m`` using parameter set ``m // (12 / num_sets)``."""
    options, step = _LAYERS[layer]
    torch.manual_seed(1)
    model = create_model("vit_digits", **FAMILY, num_sets=num_sets, **options).double().eval()
    images = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x, out = _encoder_io(model, images)
    sets = model.encoder.field.layers
    if len(sets) != num_sets:
        raise ValueError(f"{len(sets)} parameter sets, not {num_sets}")
    with torch.no_grad():
        for m in range(DEPTH):
            G, F = (part.branch for part in sets[m // (DEPTH // num_sets)].parts)
            x = step(G, F, x)
    return (x - out).abs().max().item()


def _identical(gap: float) -> str:
    return "identical" if gap == 0.0 else f"max |Δ| = {gap:.1g} (float64)"


def sequential_is_lie_trotter() -> str:
    return _identical(layer_gap("sequential", DEPTH))


def parallel_is_euler() -> str:
    return _identical(layer_gap("parallel", DEPTH))


def rk4_is_classical_rk4() -> str:
    return _identical(layer_gap("rk4", DEPTH))


def weight_sharing_is_stacked_layers() -> str:
    """Six sets: six 2-layer weight-sharing stacks, for each of the three layers."""
    return _identical(max(layer_gap(layer, 6) for layer in _LAYERS))
