"""Small transformer fields shared by the tests."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch


def transformer_field(
    dim: int = 16, num_heads: int = 2, dtype: torch.dtype = torch.float64, device="cpu"
) -> SplitField:
    """A random pre-norm block read as a split field: SplitField(attention, MLP)."""
    return SplitField(AttentionBranch(dim, num_heads), MLPBranch(dim)).to(device=device, dtype=dtype)


class Decay(torch.nn.Module):
    """``dy/dt = -a y`` with a learnable rate ``a``: ``y(t) = y0 exp(-a (t - t0))``, for analytic gradients."""

    def __init__(self, rate: float, device: torch.device | str = "cpu"):
        super().__init__()
        self.rate = torch.nn.Parameter(torch.tensor(rate, dtype=torch.float64, device=device))

    def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -self.rate * y


def tokens(batch: int = 2, n: int = 8, dim: int = 16, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """Random tokens drawn on the CPU, then moved: the same values on every device under test (each
    device's generator draws its own numbers), so tolerances tuned on the CPU hold everywhere."""
    return torch.randn(batch, n, dim, dtype=dtype).to(device)


def backward_grads(loss: torch.Tensor, leaves: list[torch.Tensor]) -> tuple[torch.Tensor | None, ...]:
    """``torch.autograd.grad(loss, leaves)``, computed by ``loss.backward()``.

    On XLA, ``gradient="checkpoint"`` runs torch_xla's reentrant checkpoint, which refuses
    ``torch.autograd.grad``; ``backward()`` works on every device. The leaves' ``.grad`` are reset.
    """
    for leaf in leaves:
        leaf.grad = None
    loss.backward()
    grads = tuple(leaf.grad for leaf in leaves)
    for leaf in leaves:
        leaf.grad = None
    return grads


def torchode_backprop_on_xla(device: torch.device, settings: dict) -> bool:
    """Whether ``solve(**settings)`` on ``device`` differentiates through torchode's steps on XLA, which fails.

    torchode's Runge-Kutta step writes each stage into one tensor, ``k[i] = f(..., einsum(a, k[:i]))``;
    torch_xla's einsum saves the slice ``k[:i]`` for backward, so the next write fails autograd's version
    check (on the CPU and CUDA einsum saves a reshaped copy).
    """
    from neuralode_tf.numerics import methods, resolve_backend

    if device.type != "xla" or settings.get("gradient", "backprop") != "backprop":
        return False
    if settings["method"] not in methods("torchode"):
        return False
    options = {k: settings[k] for k in ("substep", "per_sample") if settings.get(k) is not None}
    return resolve_backend(None, settings["method"], settings.get("backend", "auto"), **options) == "torchode"


def skip_torchode_backprop_on_xla(device: torch.device, settings: dict) -> None:
    """Skip when :func:`torchode_backprop_on_xla`."""
    if torchode_backprop_on_xla(device, settings):
        pytest.skip(
            "XLA: backprop through torchode's Runge-Kutta step is not supported (torch_xla's einsum saves the "
            "stage slice k[:i] that torchode then overwrites in place: 'modified by an inplace operation')"
        )
