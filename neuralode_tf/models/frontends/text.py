"""Token embeddings with sinusoidal positions, the pre-norm encoder field, and a continuous-depth text classifier."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ...nn._conditioning import check_padding_mask
from .._inputs import check_token_ids
from ..readings.blocks import _evolving_settings, _transformer_sets
from ..readings.stack import _named_field, stack_encoder

__all__ = ["PAD", "sinusoidal_positions", "TokenEmbedding", "TextClassifier"]

PAD = 0
"""Id of the padding token in every model here (``padding_idx`` of the embeddings)."""


def sinusoidal_positions(
    length: int, dim: int, *, device: torch.device | None = None, dtype: torch.dtype | None = None
) -> Tensor:
    """The ``(length, dim)`` sinusoidal position encodings of Vaswani et al. (2017, §3.5).

    .. math:: PE_{p, 2i} = \\sin\\big(p / 10000^{2i/d}\\big), \\qquad PE_{p, 2i+1} = \\cos\\big(p / 10000^{2i/d}\\big)

    They are computed for the length at hand, so no maximum length is fixed in advance.
    """
    if dim % 2:
        raise ValueError(f"sinusoidal positions need an even width, got dim={dim}")
    position = torch.arange(length, device=device, dtype=torch.float64)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float64) * (-math.log(10000.0) / dim))
    angle = position * frequency
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2).to(dtype or torch.get_default_dtype())


class TokenEmbedding(nn.Module):
    """``x_p = \\sqrt{d}\\, E[\\mathrm{token}_p] + PE_p``: scaled token embedding plus sinusoidal positions.

    Vaswani et al. (2017, §3.4-3.5). ``E`` is initialised with standard deviation ``d^{-1/2}``, so
    ``\\sqrt{d}\\, E`` has unit-variance entries and ``E`` itself suits a tied output projection.
    Row :data:`PAD` of ``E`` is zero and gets no gradient.

    Args:
        vocab_size: Number of token ids (``PAD`` included).
        dim: Width ``d`` (even).
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.dim = dim
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, std=dim**-0.5)
        with torch.no_grad():
            self.embedding.weight[PAD].zero_()

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, tokens: Tensor, key_padding_mask: Tensor | None = None, *, name: str = "tokens") -> Tensor:
        """Embed ``tokens`` ``(B, L)``, integer ids; ids at ``key_padding_mask`` (bool, True at padding) are read
        as ``PAD``, so whatever a padded position holds never reaches the model. Every other id must lie in
        ``[0, vocab_size)``, else ``ValueError`` names it, its position and ``name`` (the caller's argument)."""
        check_token_ids(tokens, name)
        check_padding_mask(key_padding_mask, "key_padding_mask", tokens.shape, name)
        if key_padding_mask is not None:
            tokens = tokens.masked_fill(key_padding_mask, PAD)
        check_token_ids(tokens, name, self.embedding.num_embeddings)
        x = self.embedding(tokens) * math.sqrt(self.dim)
        return x + sinusoidal_positions(tokens.shape[-1], self.dim, device=x.device, dtype=x.dtype)


class TextClassifier(nn.Module):
    """Sequence classification with a continuous-depth transformer encoder.

    .. math::

        x(0) = \\sqrt{d}\\, E[\\mathrm{tokens}] + PE, \\qquad \\frac{dx}{dt} = f(t, x) \\text{ on } [0, D],
        \\qquad \\mathrm{logits} = W\\, \\mathrm{pool}\\big(LN(x(D))\\big) + b

    where ``pool`` is the mean or the element-wise max over the real (unpadded) tokens. Padding
    tokens are keys no query may attend to, their ids are read as ``PAD`` and pooling skips them,
    so they never change the logits. With a fixed-grid method this holds exactly; an adaptive
    method chooses its steps from the whole padded state, so the padding length may change the
    logits within the solver's tolerance. A row with no real token (all padding) pools to zero features, so its
    logits are the head's bias ``b``; the encoder warns when it meets one (usually a mask of the opposite
    convention).

    Args:
        vocab_size: Number of token ids; id :data:`PAD` (0) is padding.
        num_classes: Number of output classes.
        dim, num_heads, depth: Width, heads and depth-time ``D`` (the number of blocks of the default field).
        field: The name of a reading of the model's own blocks as continuous depth
            (:data:`~neuralode_tf.models.FIELDS`, :func:`~neuralode_tf.models.stack_encoder`), or a ready-made
            field module ``(t, x) -> dx/dt`` on ``[0, depth]`` (then leave out the arguments that configure the
            own blocks): ``"split"`` (default), ``"parallel"``, ``"composed"``, ``"node"``, ``"evolving"`` or
            ``"discrete"``. Every module with ``bind`` (the :class:`~neuralode_tf.nn.AttentionBranch`\\ es)
            receives the padding mask.
        num_sets: Independent parameter sets of the default field (weight sharing, Zhong et al. 2022).
        mlp_hidden: Hidden width of the default field's MLPs (default ``4 * dim``).
        norm: ``"pre"`` (default) or ``"post"``: pre-norm blocks, or the post-norm blocks ``LN(u + b(u))`` of
            Vaswani et al. (2017) and Sinkformers' IMDb encoder, which only the ``"discrete"``, ``"composed"``
            and ``"node"`` readings take (:class:`~neuralode_tf.fields.Sublayer`).
        activation: The MLPs' ``"gelu"`` (default) or ``"relu"`` (Sinkformers' IMDb encoder).
        field_norm: For ``field="composed"``: a LayerNorm inside the field after the composition, as the
            released OT-Transformer code's ``ln_f`` (:class:`~neuralode_tf.fields.ComposedField`).
        evolving: For ``field="evolving"`` (Wang et al. 2021): settings of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (``alpha``, ``beta``, ``kernel_size``).
        pooling: ``"mean"`` or ``"max"``.
        dropout: Dropout on the pooled features, before the head (outside the ODE).
        **encoder: Settings of :func:`~neuralode_tf.models.stack_encoder`: ``method``, ``steps``,
            ``step_size``, any argument of :func:`~neuralode_tf.solve`, and ``t1``,
            ``transport_cost``, ``inner_residuals`` (the kinetic energy leaves padded tokens out). The
            default for ``"split"``, ``lie_trotter`` with one Euler step per unit of time, is the
            discrete pre-norm transformer.

    The model splits as timm's do: ``forward = forward_head(forward_features(...))``, the features being the
    pooled ``(B, dim)`` (pooling needs the padding mask, so it comes before the head). The parameter count is
    ``sum(p.numel() for p in model.parameters())``.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        dim: int = 64,
        num_heads: int = 4,
        depth: int = 2,
        *,
        field: str | nn.Module = "split",
        num_sets: int | None = None,
        mlp_hidden: int | None = None,
        norm: Literal["pre", "post"] = "pre",
        activation: Literal["gelu", "relu"] = "gelu",
        field_norm: bool = False,
        evolving: Mapping[str, Any] | None = None,
        pooling: Literal["mean", "max"] = "mean",
        dropout: float = 0.0,
        **encoder: Any,
    ):
        super().__init__()
        evolving = _evolving_settings(field, evolving)
        if pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
        self.pooling = pooling
        self.embed: nn.Module = TokenEmbedding(vocab_size, dim)  # (SignalClassifier replaces it)
        sets = _named_field(
            field,
            lambda _: _transformer_sets(
                dim, num_heads, depth, mlp_hidden, num_sets, False, evolving, norm=norm, activation=activation
            ),
            num_sets=num_sets,
            mlp_hidden=mlp_hidden,
        )
        final_norm = nn.LayerNorm(dim) if field_norm else None
        self.encoder = stack_encoder(field, depth, sets, final_norm=final_norm, **encoder)
        self.norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(dim, num_classes)

    def forward_features(self, tokens: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """The pooled features ``(B, dim)`` of ``tokens`` ``(B, L)``: embedding, encoder, final norm, masked pooling.

        ``key_padding_mask`` ``(B, L)`` is True at padding; by default it is ``tokens == PAD``.
        Every sequence needs at least one real token.
        """
        key_padding_mask = _padding(tokens, key_padding_mask, "tokens", "key_padding_mask")
        return self._pooled(self.embed(tokens, key_padding_mask), key_padding_mask)

    def forward_head(self, features: Tensor) -> Tensor:
        """Logits ``(B, num_classes)`` of the pooled features: dropout, then the linear head."""
        return self.head(self.dropout(features))

    def forward(self, tokens: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; ``tokens`` and ``key_padding_mask`` as in :meth:`forward_features`."""
        return self.forward_head(self.forward_features(tokens, key_padding_mask))

    def _pooled(self, x: Tensor, key_padding_mask: Tensor | None) -> Tensor:
        """Encoder, final norm and masked pooling of embedded tokens ``x`` ``(B, L, dim)``; ``key_padding_mask``
        ``(B, L)`` is True at padding, or ``None`` when nothing is padded."""
        x = self.encoder(x, key_padding_mask=key_padding_mask)
        return _masked_pool(self.norm(x), key_padding_mask, self.pooling)


def _padding(tokens: Tensor, padding_mask: Tensor | None, tokens_name: str, mask_name: str) -> Tensor:
    """The padding mask of a front-end's ``tokens`` (integer ids, checked): ``padding_mask`` (any 0/1 or bool tensor
    shaped like ``tokens``) as bool, by default ``tokens == PAD``. The names are the front-end's arguments."""
    check_token_ids(tokens, tokens_name)
    if padding_mask is None:
        return tokens.eq(PAD)
    if not isinstance(padding_mask, Tensor):
        raise TypeError(
            f"{mask_name} must be a tensor shaped like {tokens_name} {tuple(tokens.shape)}, True at padding"
        )
    padding_mask = padding_mask.bool()
    check_padding_mask(padding_mask, mask_name, tokens.shape, tokens_name)
    return padding_mask


def _masked_pool(x: Tensor, key_padding_mask: Tensor | None, pooling: str) -> Tensor:
    """Mean or max of ``x`` ``(B, L, d)`` over the positions where ``key_padding_mask`` is False; zero for a row
    with no such position (the pooling of an empty set, as attention over no key gives zero)."""
    if key_padding_mask is None:
        return x.amax(dim=-2) if pooling == "max" else x.mean(dim=-2)
    pad = key_padding_mask.unsqueeze(-1)
    if pooling == "max":
        return x.masked_fill(pad, -math.inf).amax(dim=-2).masked_fill(pad.all(dim=-2), 0.0)
    real = (~pad).sum(dim=-2).clamp(min=1)
    return x.masked_fill(pad, 0.0).sum(dim=-2) / real
