"""Small transformer fields shared by the tests."""

from __future__ import annotations

import torch

from neuralode_tf.fields import SplitField
from neuralode_tf.nn import AttentionBranch, MLPBranch


def transformer_field(dim: int = 16, heads: int = 2, dtype: torch.dtype = torch.float64, device="cpu") -> SplitField:
    """A random pre-norm block read as a split field: SplitField(attention, MLP)."""
    return SplitField(AttentionBranch(dim, heads), MLPBranch(dim)).to(device=device, dtype=dtype)


def tokens(batch: int = 2, n: int = 8, dim: int = 16, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """Random tokens drawn on the CPU, then moved: the same values on every device under test (each
    device's generator draws its own numbers), so tolerances tuned on the CPU hold everywhere."""
    return torch.randn(batch, n, dim, dtype=dtype).to(device)
