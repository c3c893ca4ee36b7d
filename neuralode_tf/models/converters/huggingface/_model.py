"""The converted model: a Hugging Face model whose stack of blocks is a ContinuousDepth."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...._renamed import renamed
from ....nn import KVCache
from ..._generation import check_cacheable, check_sampling, sample_next
from ..._inputs import check_token_ids, warn_if_dropout_samples
from ._family import Family

__all__ = ["ContinuousTransformersModel"]


class ContinuousTransformersModel(nn.Module):
    """A Hugging Face transformers model whose stack of blocks is a :class:`~neuralode_tf.ContinuousDepth`.

    ``forward`` takes the model's inputs and returns its main output (``logits``, or ``last_hidden_state`` for
    a base model); ``forward = forward_head(forward_features(...))``. Build it with
    :func:`~neuralode_tf.models.from_transformers`.

    Attributes:
        hf_model: The Hugging Face model. Its blocks stay in place and share their parameters with the
            encoder's field, so ``hf_model(...)`` still runs the discrete stack; ``parameters()`` yields every
            tensor once, the Hugging Face model's own.
        encoder: The :class:`~neuralode_tf.ContinuousDepth` that replaces the blocks.
        head: The head whose output ``forward`` returns: ``"base"`` (none: ``last_hidden_state``) or a key of the
            family's :attr:`~neuralode_tf.models.converters.huggingface.Family.heads` (``"causal_lm"``, ``"masked_lm"``,
            ``"sequence_classification"``).
    """

    def __init__(self, hf_model: nn.Module, encoder: nn.Module, family: Family, head: str):
        super().__init__()
        self.hf_model = hf_model
        self.encoder = encoder
        self.family = family
        self.head = head

    @property
    def task(self) -> str:
        """The former name of :attr:`head`, with a :class:`DeprecationWarning` (until the next release)."""
        renamed("ContinuousTransformersModel attribute", "task", {"task": "head"})
        return self.head

    @property
    def base(self) -> nn.Module:
        """The base model (``hf_model.base_model``: embeddings and blocks)."""
        return self.hf_model.base_model  # type: ignore[return-value]

    def forward_features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> Tensor:
        """``last_hidden_state`` ``(B, n, d)``: embedding, the ODE over the blocks' depth, final norm.

        Args:
            input_ids: Token ids ``(B, n)``, each in ``[0, vocab_size)`` of the input embedding (also at padding, which
                the embedding reads too), else ``ValueError`` names the id and its position.
            attention_mask: Hugging Face's convention: ``(B, n)``, 1 (or True) at real tokens, 0 at padding.
            position_ids: As the Hugging Face model takes them (default: the family's, ``0 .. n-1`` also under left
                padding for all but OPT, whose positions count the real tokens).
            token_type_ids: Segment ids, for the families that take them (GPT-2, BERT).
            kv_cache: A :class:`~neuralode_tf.nn.KVCache` (a decoder, no padding, a fixed-grid solve): ``input_ids``
                continue the ``kv_cache.length`` tokens it holds, at positions from there on (default), which are
                not recomputed; the cache grows by ``n``.
        """
        padding = _key_padding_mask(input_ids, attention_mask)
        if kv_cache is not None:
            if padding is not None:
                raise ValueError("a kv_cache takes no padding: decode unpadded sequences")
            check_cacheable(self)
        base: Any = self.base  # a transformers PreTrainedModel
        check_token_ids(input_ids, "input_ids", base.get_input_embeddings().num_embeddings)
        return self._features(input_ids, attention_mask, padding, position_ids, token_type_ids, kv_cache)

    def _features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        padding: Tensor | None,
        position_ids: Tensor | None,
        token_type_ids: Tensor | None,
        kv_cache: KVCache | None,
    ) -> Tensor:
        """:meth:`forward_features` once its checks have passed (``padding``: the ``key_padding_mask``), which
        :meth:`generate` makes once, not per token (the walk of ``check_cacheable`` costs about a millisecond)."""
        if kv_cache is not None and position_ids is None:
            start = kv_cache.length
            position_ids = torch.arange(start, start + input_ids.shape[-1], device=input_ids.device)[None]
        elif position_ids is None:
            position_ids = self.family.default_positions(input_ids, attention_mask)
        base: Any = self.base  # a transformers PreTrainedModel
        family = self.family
        if token_type_ids is not None and not family.token_type_ids:
            raise ValueError(f"{type(base).__name__} takes no token_type_ids")
        x = family.embed(base, input_ids, position_ids, token_type_ids)
        conditioning: dict[str, Any] = {"key_padding_mask": padding}
        rotary = family.rotary(base, x, position_ids)
        if rotary is not None:
            conditioning["rotary"] = rotary
        if kv_cache is None:
            x = self.encoder(x, **conditioning)
        else:
            with kv_cache.extending(input_ids.shape[-1]):
                x = self.encoder(x, kv_cache=kv_cache, **conditioning)
        norm = family.final_norm(base)
        return x if norm is None else norm(x)

    def forward_head(self, features: Tensor, input_ids: Tensor) -> Tensor:
        """The head's output from ``last_hidden_state`` (``input_ids`` locate the last real token for a decoder's
        sequence classification)."""
        if self.head == "base":
            return features
        return self.family.heads[self.head](self.hf_model, features, input_ids)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> Tensor:
        features = self.forward_features(
            input_ids, attention_mask, position_ids=position_ids, token_type_ids=token_type_ids, kv_cache=kv_cache
        )
        return self.forward_head(features, input_ids)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        *,
        cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Sample ``max_new_tokens`` tokens after ``input_ids`` ``(B, n0)`` (unpadded); returns ``(B, n0 +
        max_new_tokens)``. A ``*ForCausalLM`` model only.

        Each token is drawn from ``softmax(logits / temperature)`` at the last position, restricted to the ``top_k``
        most likely (``top_k=1``: greedy), with ``generator``. With ``cache=True`` (:class:`~neuralode_tf.nn.KVCache`)
        each step solves for the new token alone, reading the earlier tokens' keys and values per solver step,
        stage and block; its logits equal those of recomputing the whole sequence up to rounding (float64: the
        same tokens, ``tests/test_hf_generate.py``). The cache needs a fixed sequence of evaluations (a fixed-grid
        method, no ``compile``): otherwise ``cache=True`` raises ``ValueError``; ``cache=False`` works with every
        solve. No stop token ends a sequence: every row gets ``max_new_tokens`` tokens.

        Raises:
            TypeError: the model has no causal LM head.
            ValueError: an id outside the vocabulary, sampling settings out of range, or more tokens than the
                model's positions (``max_position_embeddings`` / ``n_positions``).
        """
        if self.head != "causal_lm":
            raise TypeError(f"generate() needs a causal LM head; this converted model's head is {self.head!r}")
        base: Any = self.base
        check_token_ids(input_ids, "input_ids", base.get_input_embeddings().num_embeddings)
        check_sampling(input_ids, max_new_tokens, temperature, top_k)
        config = base.config
        limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        if limit is not None and input_ids.shape[1] + max_new_tokens > limit:
            raise ValueError(f"{input_ids.shape[1]} + {max_new_tokens} tokens exceed the model's {limit} positions")
        warn_if_dropout_samples(self, "generate()", stacklevel=4)  # (4: past torch.no_grad's wrapper)
        if cache:
            check_cacheable(self)
        tokens, kv_cache = input_ids, KVCache()
        for _ in range(max_new_tokens):  # the ids were checked above (the prompt) or sampled; the cache too
            new = tokens[:, -1:] if cache and kv_cache.length else tokens
            logits = self.forward_head(self._features(new, None, None, None, None, kv_cache if cache else None), new)
            tokens = torch.cat([tokens, sample_next(logits[:, -1], temperature, top_k, generator)], dim=1)
        kv_cache.clear()  # the attention keeps it bound until the next forward: free its tensors now
        return tokens

    def extra_repr(self) -> str:
        return f"head={self.head!r}"


def _key_padding_mask(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
    """Hugging Face's ``attention_mask`` (1 = real token) as torch's ``key_padding_mask`` (True = padding); ``None``
    without padding, where attention needs no mask (as Hugging Face drops an all-ones mask)."""
    if not isinstance(input_ids, Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer tensor (batch, tokens), got {_describe(input_ids)}")
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, Tensor) or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask must be a tensor shaped like input_ids {tuple(input_ids.shape)}, 1 at real tokens and "
            f"0 at padding (Hugging Face's convention), got {_describe(attention_mask)}"
        )
    padding = ~attention_mask.bool()
    return padding if bool(padding.any()) else None


def _describe(value: object) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
