"""What a family of Hugging Face models declares: where its modules are, how its blocks are read, and its heads."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ._attention import AttentionMasks, TransformersAttention

__all__ = ["Family", "Head", "causal_lm_head", "last_token_head"]

Head = Callable[[Any, Tensor, Tensor], Tensor]
"""``head(hf_model, last_hidden_state, input_ids) -> output``: a head's output, read from the model at each call."""


def causal_lm_head(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """``*ForCausalLM``: the logits of every position, ``lm_head(h)`` (tied to the input embedding or not)."""
    return hf_model.get_output_embeddings()(hidden)


def last_token_head(hf_model: Any, hidden: Tensor, input_ids: Tensor) -> Tensor:
    """A decoder's ``*ForSequenceClassification``: ``score(h)`` at the last token that is not ``pad_token_id`` (the
    last token if the config has none, which Hugging Face allows for a batch of one only)."""
    logits = hf_model.score(hidden)
    pad = hf_model.config.pad_token_id
    if pad is None:
        if input_ids.shape[0] != 1:
            raise ValueError(f"{type(hf_model).__name__} has no pad_token_id: it pools a batch of one only")
        return logits[:, -1]
    positions = torch.arange(input_ids.shape[-1], device=logits.device)
    last = (positions * (input_ids != pad).to(logits.device)).argmax(-1)
    return logits[torch.arange(input_ids.shape[0], device=logits.device), last]


class Family:
    """How one family of Hugging Face models is read: its blocks as the parts of a field, its embedding, its final
    norm and its heads.

    A family is declared by class attributes: where its modules are (dotted paths from the base model or the block)
    and which attention class reads a block's projections. The methods read the model from them; a family whose
    blocks need more (a branch built from several modules with a scale, a variant chosen by the config) overrides
    the method instead. A LLaMA-like family is thus, in full::

        class Llama(Family):
            base_classes = ("LlamaModel",)
            layer_classes = ("LlamaDecoderLayer",)
            layers_at = "layers"
            attention = _LlamaAttention  # built as _LlamaAttention(layer, config): pre-norm and projections
            mlp_at = ("post_attention_layernorm", "mlp")
            embedding_at = "embed_tokens"
            final_norm_at = "norm"

    Attributes:
        base_classes: Class names of the base models it reads (``"LlamaModel"``, ``"MistralModel"``, ...).
        layer_classes: Class names of the blocks it reads (``"LlamaDecoderLayer"``, ...).
        layers_at: The base model's list of blocks (``"layers"``, ``"h"``, ``"decoder.layers"``).
        attention: The attention branch of a block, ``attention(layer, config)`` (a
            :class:`~neuralode_tf.models.converters.huggingface.TransformersAttention`, the block's pre-norm inside).
        mlp_at: The block's modules that make the MLP branch, applied in this order (its norm, then its MLP).
        reading: ``"split"`` (one Lie-Trotter step per block: attention, then MLP) or ``"parallel"`` (one Euler step
            of both branches on the same state, a parallel residual).
        embedding_at: The base model's token embedding (``x(0) = E[w]``: a family with positions, scaling or dropout
            there overrides :meth:`embed`).
        final_norm_at: The norm after the last block (``""``: none, a post-norm family).
        token_type_ids: Whether its embedding takes segment ids.
        heads: Head name (``"causal_lm"``, ``"masked_lm"``, ``"sequence_classification"``) -> :data:`Head`.
    """

    base_classes: tuple[str, ...] = ()
    layer_classes: tuple[str, ...] = ()
    layers_at = ""
    attention: Callable[[Any, Any], nn.Module] | None = None
    mlp_at: tuple[str, ...] = ()
    reading = "split"
    embedding_at = ""
    final_norm_at = ""
    token_type_ids = False
    heads: Mapping[str, Head] = {"causal_lm": causal_lm_head, "sequence_classification": last_token_head}

    def layers(self, base: Any) -> Sequence[nn.Module]:
        """The base model's blocks, in order (:attr:`layers_at`)."""
        return self._declared(base, "layers_at")

    def parts(self, layer: Any, config: Any, index: int) -> tuple[nn.Module, ...]:
        """Block ``index``'s parts, in stepping order (sharing the block's modules): :attr:`attention`, then the
        modules of :attr:`mlp_at` in sequence.

        Raises:
            TypeError: the block has something this reading does not cover, named with its class.
        """
        if self.attention is None or not self.mlp_at:
            raise NotImplementedError(f"{type(self).__name__} declares no attention and mlp_at, nor parts()")
        mlp = [_submodule(layer, path) for path in self.mlp_at]
        return self.attention(layer, config), mlp[0] if len(mlp) == 1 else nn.Sequential(*mlp)

    def field(self, config: Any) -> str:
        """The reading of the blocks under ``config``: :attr:`reading` (``"split"`` or ``"parallel"``)."""
        return self.reading

    def blocks(self, base: Any) -> tuple[str | nn.Module, list[tuple[nn.Module, ...]]]:
        """``(field, sets)``: the reading (or a field built from the sets, as ALBERT's of its shared layer) and each
        block's :meth:`parts`, in order.

        Raises:
            TypeError: a block that is none of :attr:`layer_classes`, or that :meth:`parts` cannot read.
        """
        sets = []
        for index, layer in enumerate(self.layers(base)):
            if type(layer).__name__ not in self.layer_classes:
                raise TypeError(
                    f"from_transformers cannot read {type(layer).__name__}: the blocks of {type(base).__name__} "
                    f"it reads are {', '.join(self.layer_classes)}"
                )
            sets.append(self.parts(layer, base.config, index))
        masks = AttentionMasks()  # one for all blocks: each mask is built once per forward
        for part in (part for parts in sets for part in parts):
            if isinstance(part, TransformersAttention):
                part.masks = masks
        return self.field(base.config), sets

    def default_positions(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
        """The positions ``(B, n)`` of tokens given no ``position_ids`` and no cache, or ``None`` for ``0 .. n-1``
        whatever the padding (Hugging Face's default for most families; OPT counts the real tokens instead)."""
        return None

    def embed(self, base: Any, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        """The tokens ``x(0)`` ``(B, n, d)``: the base model's embedding, positions and dropout (by default the token
        embedding :attr:`embedding_at` alone)."""
        return self._declared(base, "embedding_at")(input_ids)

    def rotary(self, base: Any, x: Tensor, position_ids: Tensor | None) -> tuple[Tensor, Tensor] | None:
        """``(cos, sin)`` of the tokens' rotary positions from the base model's own rotary module ``rotary_emb``
        (so with the rope scaling its config selects), or ``None`` for a family without one."""
        module = getattr(base, "rotary_emb", None)
        if module is None:
            return None
        if position_ids is None:
            position_ids = torch.arange(x.shape[-2], device=x.device)[None]
        return module(x, position_ids)

    def final_norm(self, base: Any) -> nn.Module | None:
        """The norm after the last block, :attr:`final_norm_at` (``None`` for a post-norm family)."""
        return _submodule(base, self.final_norm_at) if self.final_norm_at else None

    def _declared(self, base: Any, attribute: str) -> Any:
        path = getattr(self, attribute)
        if not path:
            method = {"layers_at": "layers", "embedding_at": "embed"}[attribute]
            raise NotImplementedError(f"{type(self).__name__} declares no {attribute}, nor {method}()")
        return _submodule(base, path)


def _submodule(root: Any, path: str) -> Any:
    """``root.a.b`` of the dotted ``path`` ``"a.b"``."""
    for name in path.split("."):
        root = getattr(root, name)
    return root
