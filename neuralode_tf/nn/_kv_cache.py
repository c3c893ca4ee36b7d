"""The key/value cache of causal self-attention inside a fixed-grid solve: one slot per attention call."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

__all__ = ["KVCache"]


class KVCache:
    """The keys and values of every causal self-attention call of a forward pass, kept by call order.

    **Why call order.** A fixed-grid solve (a Runge-Kutta or splitting method on a given grid) evaluates
    the field's branches in a sequence fixed by the method and the grid alone, whatever the tokens. The
    ``c``-th attention call of one forward is thus the same branch, at the same step, stage (and
    sub-step) as the ``c``-th call of any other forward. For a field causal in the positions, the state
    of token ``i`` at that call depends on tokens ``≤ i`` only (:mod:`neuralode_tf.numerics.causality`),
    so its keys and values do not change when tokens are appended. A forward over new tokens
    ``L .. L+m-1`` therefore needs, at call ``c``, its own keys and values and those of the ``L`` earlier
    tokens at call ``c``: slot ``c`` of the cache. Appending its own to the slot and attending over the
    whole slot computes the rows ``L .. L+m-1`` that a forward over all ``L + m`` tokens computes, up to
    rounding (the same sums over tensors of other shapes): nothing is recomputed for the earlier tokens.
    Keys are stored after the rotary rotation, so a token keeps its position (:func:`~neuralode_tf.nn.apply_rotary`).

    **Use.** The first forward through :meth:`extending` fills one slot per call; every later forward must
    make exactly as many calls (else :meth:`append` or :meth:`extending` raises ``ValueError``). An
    adaptive method chooses its steps from the state, so a cache cannot follow it; the front-end
    (:meth:`~neuralode_tf.models.CausalLM.generate`) refuses one. A cache is bound to the attention
    branches through ``bind(kv_cache=...)``, which :class:`~neuralode_tf.ContinuousDepth` passes on from its
    keyword arguments. It serves inference: a pass that fails leaves the cache empty (:meth:`clear`).

    Attributes:
        length: Tokens held per sequence (the positions of the next forward's tokens start here).
    """

    def __init__(self) -> None:
        self._slots: list[tuple[Tensor, Tensor]] = []
        self._cursor: int | None = None
        self._new = 0
        self.length = 0

    @property
    def calls(self) -> int:
        """Attention calls per forward: the number of slots."""
        return len(self._slots)

    def clear(self) -> None:
        """Forget every slot: the next forward fills the cache afresh."""
        self._slots, self._cursor, self.length = [], None, 0

    @contextmanager
    def extending(self, tokens: int) -> Iterator[KVCache]:
        """A forward over ``tokens`` new tokens per sequence: the attention calls inside read and extend the slots in
        order. On exit the cache holds ``length + tokens`` tokens; if the forward raises, it is cleared."""
        if self._cursor is not None:
            raise RuntimeError("this KVCache is already inside a forward pass")
        self._cursor, self._new = 0, tokens
        try:
            yield self
            if self.length and self._cursor != len(self._slots):
                raise ValueError(
                    f"this forward made {self._cursor} attention calls, the one that filled the cache "
                    f"{len(self._slots)}: the solve is no fixed sequence of evaluations"
                )
        except BaseException:
            self.clear()
            raise
        self._cursor = None
        self.length += tokens

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Store one call's keys and values ``(*batch, H, m, k)`` of the new tokens in its slot; return the slot's
        keys and values of all ``length + m`` tokens."""
        if self._cursor is None:
            raise RuntimeError(
                "a KVCache is used inside a forward pass (CausalLM.forward with kv_cache=...); this call is outside "
                "one, e.g. a recomputation in a backward pass (gradient='checkpoint' or 'adjoint')"
            )
        if keys.shape[-2] != self._new:
            raise ValueError(f"the attention got {keys.shape[-2]} new tokens, the forward pass extends by {self._new}")
        index, self._cursor = self._cursor, self._cursor + 1
        if not self.length:
            self._slots.append((keys, values))
            return keys, values
        if index >= len(self._slots):
            raise ValueError(
                f"this forward makes more attention calls than the {len(self._slots)} of the one that filled the "
                "cache: the solve is no fixed sequence of evaluations"
            )
        cached_keys, cached_values = self._slots[index]
        if cached_keys.shape[:-2] != keys.shape[:-2]:
            raise ValueError(
                f"keys of shape {tuple(keys.shape)} cannot extend cached keys {tuple(cached_keys.shape)}: another batch"
            )
        self._slots[index] = slot = (torch.cat([cached_keys, keys], dim=-2), torch.cat([cached_values, values], -2))
        return slot
