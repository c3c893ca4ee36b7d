"""The position-wise feed-forward network as a residual branch."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
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
            LayerNorm comes after the skip (:class:`~neuralode_tf.fields.Sublayer`), or a block without norms.
        bias: Whether ``W_1`` and ``W_2`` have biases ``b_1``, ``b_2``.
        norm_bias: Whether the LayerNorm has a bias (nanoGPT's ``bias=False`` drops it with the others).
        dropout: Dropout on the output, in training mode (nanoGPT's MLP dropout); inside a field it is drawn
            afresh at every evaluation.
    """

    def __init__(
        self,
        dim: int,
        mlp_hidden: int | None = None,
        *,
        activation: Literal["gelu", "relu"] = "gelu",
        prenorm: bool = True,
        bias: bool = True,
        norm_bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        mlp_hidden = 4 * dim if mlp_hidden is None else mlp_hidden
        if not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        self.norm = nn.LayerNorm(dim, bias=norm_bias) if prenorm else nn.Identity()
        self.fc1 = nn.Linear(dim, mlp_hidden, bias=bias)
        self.act = ACTIVATIONS[activation]()
        self.fc2 = nn.Linear(mlp_hidden, dim, bias=bias)
        self.dropout = float(dropout)

    def forward(self, x: Tensor) -> Tensor:
        out = self.fc2(self.act(self.fc1(self.norm(x))))
        return F.dropout(out, self.dropout) if self.dropout and self.training else out
