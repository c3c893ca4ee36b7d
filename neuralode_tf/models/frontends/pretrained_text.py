"""A local Hugging Face sequence classifier read as an ODE, which tokenises its texts itself:
:class:`PretrainedTextClassifier`, the model of the ``"text"`` datasets (EA-BERT, Wang et al. 2021, §4.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ...data.splits import Text
from ..converters.huggingface import from_transformers

__all__ = ["LAYOUT", "CheckpointFolderError", "PretrainedTextClassifier"]

LAYOUT = (
    "a folder written by save_pretrained: config.json, the weights (model.safetensors or pytorch_model.bin) and the "
    "tokenizer's files (tokenizer_config.json with tokenizer.json, or vocab.txt, or vocab.json and merges.txt)"
)
"""What a checkpoint folder holds."""


class CheckpointFolderError(ValueError):
    """The checkpoint folder is missing, or lacks ``config.json`` or the tokenizer's files."""


class PretrainedTextClassifier(nn.Module):
    """A local checkpoint's sequence classifier read as an ODE, which tokenises its texts itself.

    ``forward(texts)`` takes a batch of a ``"text"`` dataset (:class:`~neuralode_tf.data.TextSplit`): strings, or
    pairs of strings, which the checkpoint's tokenizer joins as it was pretrained to (BERT: ``[CLS] a [SEP] b
    [SEP]`` with segment ids 0 and 1). The batch is padded to its longest encoding and truncated at ``max_length``
    tokens (pairs: Hugging Face's ``"longest_first"``, which shortens the longer text first); the converted model's
    logits ``(B, num_labels)`` are returned.

    Args:
        checkpoint: The folder (``save_pretrained``'s output) holding the model and its tokenizer; nothing is
            downloaded.
        num_labels: Classes of the head, 1 for a regression (STS-B); a checkpoint without a head of this size gets
            a new one, initialised from torch's random state.
        evolving: :func:`~neuralode_tf.models.from_transformers`'s ``evolving`` settings, or ``None``.
        max_length: Tokens per example at most.
        **solve_options: :func:`~neuralode_tf.models.from_transformers`'s solve settings (``method``, ``steps``, ...).

    Attributes:
        converted: The :class:`~neuralode_tf.models.converters.huggingface.ContinuousTransformersModel`.
        tokenizer: The checkpoint's tokenizer (no module: not in the ``state_dict``).

    Raises:
        CheckpointFolderError: ``checkpoint`` is not a folder, or has no ``config.json`` or no tokenizer.
    """

    def __init__(
        self,
        checkpoint: str | Path,
        num_labels: int,
        *,
        evolving: Mapping[str, Any] | None = None,
        max_length: int = 128,
        **solve_options: Any,
    ):
        super().__init__()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        folder = Path(checkpoint).expanduser()
        if not folder.is_dir() or not (folder / "config.json").is_file():
            what = "no config.json in" if folder.is_dir() else "no folder"
            raise CheckpointFolderError(f"{what} {folder}; expected {LAYOUT}")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as error:
            raise CheckpointFolderError(f"{str(checkpoint)!r} has no tokenizer ({error}); expected {LAYOUT}") from error
        hf_model = AutoModelForSequenceClassification.from_pretrained(
            folder, num_labels=num_labels, ignore_mismatched_sizes=True, local_files_only=True
        )
        self.converted = from_transformers(hf_model, evolving=evolving, **solve_options)
        self.max_length = max_length

    def forward(self, texts: Sequence[Text]) -> Tensor:
        pairs = [text for text in texts if isinstance(text, tuple)]
        if pairs and len(pairs) != len(texts):
            raise ValueError("a batch holds texts or pairs of texts, not both")
        columns = (list(texts),) if not pairs else ([a for a, _ in pairs], [b for _, b in pairs])
        encoded = self.tokenizer(
            *columns, padding=True, truncation="longest_first", max_length=self.max_length, return_tensors="pt"
        )
        device = next(self.parameters()).device
        names = ["input_ids", "attention_mask"]
        if "token_type_ids" in encoded and self.converted.family.token_type_ids:
            names.append("token_type_ids")  # the segments of a pair (all 0 for one text, the model's default)
        return self.converted(**{name: encoded[name].to(device) for name in names})
