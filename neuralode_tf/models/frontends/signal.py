"""A continuous-depth transformer for 1-D signals (MNIST-1D)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from .text import TextClassifier, sinusoidal_positions

__all__ = ["SignalClassifier"]


class SignalEmbedding(nn.Module):
    """Cut a signal ``(B, L)`` into ``L / p`` patches of ``p`` samples, embed each linearly and add
    sinusoidal positions: the 1-D analogue of a ViT's patch embedding (Dosovitskiy et al. 2021, eq. 1)."""

    def __init__(self, patch: int, dim: int):
        super().__init__()
        self.patch, self.dim = patch, dim
        self.proj = nn.Linear(patch, dim)

    def forward(self, signal: Tensor) -> Tensor:
        if signal.shape[-1] % self.patch:
            raise ValueError(f"signal length {signal.shape[-1]} is not a multiple of the patch length {self.patch}")
        x = self.proj(signal.unflatten(-1, (-1, self.patch)))
        return x + sinusoidal_positions(x.shape[-2], self.dim, device=x.device, dtype=x.dtype)


class SignalClassifier(TextClassifier):
    """Patch-embedded signal, continuous-depth encoder, mean (or max) pooling and a linear head.

    The encoder and its arguments are those of :class:`~neuralode_tf.models.TextClassifier`
    (``dim``, ``num_heads``, ``depth``, ``field``, ``num_sets``, solve settings); only the
    embedding differs. ``forward(signal (B, L)) -> logits (B, num_classes)`` is
    ``forward_head(forward_features(signal))``, the features pooled ``(B, dim)``.

    Args:
        num_classes: Number of output classes.
        patch: Samples per token (MNIST-1D's length 40 with ``patch=4`` gives 10 tokens).
        **kwargs: Everything else of :class:`~neuralode_tf.models.TextClassifier`.
    """

    def __init__(self, num_classes: int, patch: int = 4, **kwargs: Any):
        super().__init__(vocab_size=1, num_classes=num_classes, **kwargs)
        self.embed = SignalEmbedding(patch, self.head.in_features)

    # A signal has no padding: no key_padding_mask, unlike the text classifier's methods.
    def forward_features(self, signal: Tensor) -> Tensor:  # type: ignore[override]
        """The pooled features ``(B, dim)`` of ``signal`` ``(B, L)``."""
        return self._pooled(self.embed(signal), None)

    def forward(self, signal: Tensor) -> Tensor:  # type: ignore[override]
        return self.forward_head(self.forward_features(signal))
