"""The position-wise feed-forward network as a residual branch."""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

__all__ = ["MLPBranch", "ACTIVATIONS"]

ACTIVATIONS: dict[str, type[nn.Module]] = {"gelu": nn.GELU, "relu": nn.ReLU}
"""The hidden activations of :class:`MLPBranch`, by name."""


class MLPBranch(nn.Module):
    """Pre-LayerNorm MLP: ``x -> W_2 · σ(W_1 · LN(x) + b_1) + b_2``, with no skip connection.

    The feed-forward sub-layer of Vaswani et al. (2017, eq. 2), applied to each token independently, with
    ``σ`` = GELU (Hendrycks & Gimpel 2016; ViT) or ReLU (Vaswani et al.; Sinkformers' IMDb encoder).

    Args:
        dim: Width ``d`` of the tokens.
        mlp_hidden: Width of the hidden layer (default ``4 * dim``).
        activation: ``"gelu"`` (default) or ``"relu"``.
        prenorm: Normalise ``x`` first (default). ``False`` gives the bare MLP for a post-norm block, whose
            LayerNorm comes after the skip (:class:`~neuralode_tf.fields.Sublayer`).
    """

    def __init__(
        self,
        dim: int,
        mlp_hidden: int | None = None,
        *,
        activation: Literal["gelu", "relu"] = "gelu",
        prenorm: bool = True,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        mlp_hidden = 4 * dim if mlp_hidden is None else mlp_hidden
        self.norm = nn.LayerNorm(dim) if prenorm else nn.Identity()
        self.fc1 = nn.Linear(dim, mlp_hidden)
        self.act = ACTIVATIONS[activation]()
        self.fc2 = nn.Linear(mlp_hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(self.norm(x))))
