"""Token vocabularies and padding."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

__all__ = ["Vocabulary", "pad_sequences"]


class Vocabulary:
    """A bijection between tokens and ids: ``<pad>`` is 0, ``<unk>`` is 1, then ``specials``, then ``tokens``.

    Args:
        tokens: The ordinary tokens, in id order; duplicates and special tokens are not allowed.
        specials: Further special tokens (e.g. ``"<bos>"``, ``"<eos>"``), given ids 2, 3, ...
    """

    PAD = 0
    UNK = 1

    def __init__(self, tokens: Iterable[str], specials: Sequence[str] = ()):
        self.itos: tuple[str, ...] = ("<pad>", "<unk>", *specials, *tokens)
        self.stoi: dict[str, int] = {token: i for i, token in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            duplicates = sorted(t for t, n in Counter(self.itos).items() if n > 1)
            raise ValueError(f"a Vocabulary's tokens must be distinct, got duplicates {duplicates}")

    @classmethod
    def build(
        cls,
        texts: Iterable[Sequence[str]],
        *,
        min_freq: int = 1,
        max_size: int | None = None,
        specials: Sequence[str] = (),
    ) -> Vocabulary:
        """The tokens of ``texts`` that occur at least ``min_freq`` times, most frequent first (ties
        alphabetically), at most ``max_size`` entries in all (special tokens included)."""
        counts = Counter(token for text in texts for token in text)
        reserved = {"<pad>", "<unk>", *specials}
        ranked = sorted(
            (t for t, n in counts.items() if n >= min_freq and t not in reserved), key=lambda t: (-counts[t], t)
        )
        if max_size is not None:
            ranked = ranked[: max(max_size - len(reserved), 0)]
        return cls(ranked, specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; unknown tokens map to ``<unk>``."""
        return [self.stoi.get(token, self.UNK) for token in tokens]

    def decode(self, ids: Iterable[int] | Tensor) -> list[str]:
        """Tokens of ``ids``."""
        return [self.itos[i] for i in (ids.tolist() if isinstance(ids, Tensor) else ids)]

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens: {', '.join(self.itos[:8])}{', ...' if len(self) > 8 else ''})"


def pad_sequences(
    sequences: Sequence[Sequence[int]], length: int, pad_id: int = Vocabulary.PAD
) -> tuple[Tensor, Tensor]:
    """Stack id sequences into ``(N, length)``, truncating longer ones and padding shorter ones with ``pad_id``.

    Returns:
        ``(ids, mask)``: long ids and a bool mask that is **True at padding**, the ``key_padding_mask``
        convention of :class:`torch.nn.MultiheadAttention`.
    """
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    mask = torch.ones(len(sequences), length, dtype=torch.bool)
    for row, seq in enumerate(sequences):
        seq = seq[:length]
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = False
    return ids, mask
