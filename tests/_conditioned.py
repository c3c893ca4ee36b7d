"""Small fields that take per-batch conditioning (padding masks, encoder memory, block input), by kind, and padding
masks of given lengths, shared by the validation, padding, property and front-end tests."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from neuralode_tf.fields import KineticEnergy, TransEvolveDecoderField, TransEvolveField
from neuralode_tf.models import decoder_field, isab_field, transformer_field

KINDS = (
    "split",
    "parallel",
    "composed",
    "evolving",
    "kinetic",
    "isab",
    "decoder",
    "evolving_decoder",
    "transevolve",
    "transevolve_decoder",
)
"""Every kind of field :func:`build` makes: the encoder readings of a transformer stack, the kinetic augmentation,
the Set Transformer's ISAB stack, vanilla and evolving decoders, and TransEvolve encoder and decoder blocks."""

DECODERS = ("decoder", "evolving_decoder", "transevolve_decoder")
"""The kinds that attend to an encoder memory."""


def build(kind: str, dim: int = 8, num_heads: int = 2, depth: int = 2) -> nn.Module:
    """A new field of ``kind`` on ``[0, depth]`` (``[0, 1]`` for ``"composed"``), hidden widths ``2 * dim``."""
    hidden = 2 * dim
    if kind in ("split", "parallel", "composed", "evolving"):
        return transformer_field(dim, depth, num_heads, mlp_hidden=hidden, field=kind)
    builders = {
        "kinetic": lambda: KineticEnergy(transformer_field(dim, depth, num_heads, mlp_hidden=hidden), 0.1),
        "isab": lambda: isab_field(dim, num_heads, num_inducing=2, depth=depth, mlp_hidden=hidden),
        "decoder": lambda: decoder_field(dim, num_heads, depth, mlp_hidden=hidden),
        "evolving_decoder": lambda: decoder_field(dim, num_heads, depth, mlp_hidden=hidden, evolving={}),
        "transevolve": lambda: TransEvolveField(dim, num_heads, depth, mlp_hidden=hidden),
        "transevolve_decoder": lambda: TransEvolveDecoderField(dim, num_heads, depth, mlp_hidden=hidden),
    }
    return builders[kind]()


def unit_steps(kind: str, field: nn.Module) -> dict[str, object]:
    """``ContinuousDepth`` settings computing the discrete stack: one Euler step per unit of depth, the parts
    stepped in turn where the field has them, except for the parallel blocks (one Euler step of the sum)."""
    t1 = 1.0 if kind == "composed" else 2.0
    return dict(t1=t1, method="lie_trotter" if getattr(field, "parts", None) and kind != "parallel" else "euler")


def conditioning(
    kind: str, x: Tensor, pad: Tensor | None, memory: Tensor | None = None, memory_pad: Tensor | None = None
) -> dict[str, Tensor | None]:
    """The keywords of ``ContinuousDepth.forward`` for a field of ``kind`` on tokens ``x`` with padding ``pad``."""
    keywords: dict[str, Tensor | None] = {"key_padding_mask": pad}
    if kind.startswith("transevolve"):
        keywords["block_input"] = x
    if kind in DECODERS:
        keywords.update(memory=memory, memory_key_padding_mask=memory_pad)
    return keywords


def padding_mask(lengths: list[int], width: int, device: torch.device | str = "cpu") -> Tensor:
    """``(B, width)`` bool, True at padding: row ``b`` has ``lengths[b]`` real positions, then padding."""
    return torch.arange(width, device=device)[None, :] >= torch.tensor(lengths, device=device)[:, None]
