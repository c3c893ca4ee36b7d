"""The position-wise feed-forward network as a residual branch."""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["MLPBranch"]


class MLPBranch(nn.Module):
    """Pre-LayerNorm MLP: ``x -> W_2 · GELU(W_1 · LN(x) + b_1) + b_2``, with no skip connection.

    The feed-forward sub-layer of Vaswani et al. (2017, eq. 2) with GELU (Hendrycks & Gimpel 2016),
    applied to each token independently.

    Args:
        dim: Width ``d`` of the tokens.
        hidden_dim: Width of the hidden layer (default ``4 * dim``).
    """

    def __init__(self, dim: int, hidden_dim: int | None = None):
        super().__init__()
        hidden_dim = 4 * dim if hidden_dim is None else hidden_dim
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(self.norm(x))))
