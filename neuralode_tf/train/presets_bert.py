"""EA-BERT (Wang et al. 2021, §4.2 and Table 4) offline: a local Hugging Face BERT or RoBERTa checkpoint, read
exactly as an ODE (:func:`~neuralode_tf.models.from_transformers`), with evolving attention added, fine-tuned on
the tweets sentiment set.

``ea_bert_tweets`` fine-tunes the checkpoint folder of ``--set model.checkpoint=PATH``, what ``save_pretrained``
writes (``config.json``, the weights and the tokenizer's files; nothing is downloaded)::

    neuralode-tf train ea_bert_tweets --set model.checkpoint=/path/to/bert-base-uncased
    neuralode-tf compare ea_bert_tweets --seeds 0 1 2 --set model.checkpoint=/path/to/bert-base-uncased

The model is the folder's ``AutoModelForSequenceClassification`` with a head for the tweets' 3 classes (new, from
the run's seed, unless the checkpoint has one of that size) and its ``AutoTokenizer``, which tokenises the tweets
(:func:`~neuralode_tf.data.tweets_bytes`: the texts of :func:`~neuralode_tf.data.tweets`, same split) at every
forward (:class:`PretrainedTextClassifier`). The variants (``--set model.variant=NAME``, or all of them with
``neuralode-tf compare``) are the rows of Table 4:

==================  ==========================================  ==============================
variant             model                                       Table 4
==================  ==========================================  ==============================
``vanilla``         the checkpoint's model                      BERT-Base
``ea``              evolving attention, α = β = 0.1, 3x3         EA-BERT-Base
``no_convolution``  ``ea`` with β = 0                           w/o Convolution
``no_skip``         ``ea`` with α = 0                           w/o Skip Connection
``kernel_1x1``      ``ea`` with a 1x1 kernel                    with 1 × 1 Convolution
``kernel_5x5``      ``ea`` with a 5x5 kernel                    with 5 × 5 Convolution
==================  ==========================================  ==============================

**α = β = 0.1**, the smallest values of §4.2's search grid {0.1, 0.2, 0.4} (the paper reports its choice per task
in an appendix not at hand): they perturb the pretrained attention least while the convolutions are still random,
and are the values of the paper's EA-Transformer-Lite (§4.3). Not tuned here; ``--set model.alpha=0.2
model.beta=0.4`` runs another point of the grid. The first block has no convolution (see
:mod:`neuralode_tf.models.huggingface.evolving`). **Training** from §4.2's grid: lr 2e-5, batch 16, 2 epochs (3,814
steps on the 30,526 training tweets), AdamW with ε = 1e-8; with BERT's usual fine-tuning settings where the paper
gives none: 10% linear warm-up (380 steps), weight decay 0.01, gradient clipping at 1. Dropout is the checkpoint's
(0.1 in BERT's configurations, the paper's ratio). BERT-Base scale wants a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ..data import Splits, decode_bytes
from ..models import from_transformers
from ._preset import Preset, make_preset
from .config import ConfigError

__all__ = ["BERT_PRESETS", "BERT_VARIANTS", "EA_BERT", "PretrainedTextClassifier"]

EA_BERT: dict[str, Any] = dict(alpha=0.1, beta=0.1, kernel_size=3)
"""The ``ea`` variant's evolving-attention settings (see the module docstring)."""

_LAYOUT = (
    "a folder written by save_pretrained: config.json, the weights (model.safetensors or pytorch_model.bin) and the "
    "tokenizer's files (tokenizer_config.json with tokenizer.json, or vocab.txt, or vocab.json and merges.txt)"
)


def _ablations(ea: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Table 4's models as ``from_transformers``'s ``evolving``: none (the checkpoint's model), ``ea``, and the
    ablations without convolution (``β = 0``), without skip (``α = 0``), with 1x1 and 5x5 kernels."""
    return {
        "vanilla": None,
        "ea": dict(ea),
        "no_convolution": {**ea, "beta": 0.0},
        "no_skip": {**ea, "alpha": 0.0},
        "kernel_1x1": {**ea, "kernel_size": 1},
        "kernel_5x5": {**ea, "kernel_size": 5},
    }


class PretrainedTextClassifier(nn.Module):
    """A local checkpoint's sequence classifier read as an ODE, which tokenises its text itself.

    ``forward(tokens, key_padding_mask)`` takes rows of :func:`~neuralode_tf.data.tweets_bytes` (a batch of the
    ``"tokens"`` layout), decodes their texts, tokenises them with the checkpoint's tokenizer (padded to the
    batch's longest, truncated at ``max_length``) and returns the converted model's logits ``(B, num_labels)``.

    Args:
        checkpoint: The folder (``save_pretrained``'s output) holding the model and its tokenizer.
        num_labels: Classes of the head; a checkpoint without a head of this size gets a new one, initialised from
            torch's random state.
        evolving: :func:`~neuralode_tf.models.from_transformers`'s ``evolving`` settings, or ``None``.
        max_length: Tokens per text at most.
        **solve_options: :func:`~neuralode_tf.models.from_transformers`'s solve settings (``method``, ``steps``, ...).

    Attributes:
        converted: The :class:`~neuralode_tf.models.huggingface.ContinuousTransformersModel`.
        tokenizer: The checkpoint's tokenizer (no module: not in the ``state_dict``).

    Raises:
        ConfigError: ``checkpoint`` is not given, not a folder, or has no ``config.json`` or no tokenizer.
    """

    def __init__(
        self,
        checkpoint: str | Path | None,
        num_labels: int,
        *,
        evolving: Mapping[str, Any] | None = None,
        max_length: int = 128,
        **solve_options: Any,
    ):
        super().__init__()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        folder = _folder(checkpoint)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as error:
            raise ConfigError(
                f"model.checkpoint={str(checkpoint)!r} has no tokenizer ({error}); expected {_LAYOUT}"
            ) from error
        hf_model = AutoModelForSequenceClassification.from_pretrained(
            folder, num_labels=num_labels, ignore_mismatched_sizes=True, local_files_only=True
        )
        self.converted = from_transformers(hf_model, evolving=evolving, **solve_options)
        self.max_length = max_length

    def forward(self, tokens: Tensor, key_padding_mask: Tensor) -> Tensor:
        texts = decode_bytes(tokens, key_padding_mask)
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        device = tokens.device
        return self.converted(encoded["input_ids"].to(device), encoded["attention_mask"].to(device))


def _folder(checkpoint: str | Path | None) -> Path:
    if checkpoint is None:
        raise ConfigError(
            f"this preset fine-tunes a local checkpoint: give it with --set model.checkpoint=PATH, {_LAYOUT}"
        )
    folder = Path(checkpoint).expanduser()
    if not folder.is_dir() or not (folder / "config.json").is_file():
        what = "no config.json in" if folder.is_dir() else "no folder"
        raise ConfigError(f"model.checkpoint: {what} {folder}; expected {_LAYOUT}")
    return folder


def _ea_bert(
    data: Splits,
    variant: str = "ea",
    checkpoint: str | None = None,
    alpha: float = EA_BERT["alpha"],
    beta: float = EA_BERT["beta"],
    kernel_size: int = EA_BERT["kernel_size"],
    **overrides: Any,
) -> nn.Module:
    """The preset's model: ``variant`` of :func:`_ablations` around ``alpha``, ``beta`` and ``kernel_size``."""
    variants = _ablations(dict(alpha=alpha, beta=beta, kernel_size=kernel_size))
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(variants)}")
    settings = dict(checkpoint=checkpoint, num_labels=data.num_classes, evolving=variants[variant])
    return PretrainedTextClassifier(**{**settings, **overrides})


BERT_PRESETS: dict[str, Preset] = {
    "ea_bert_tweets": make_preset(
        "EA-BERT (Wang et al. §4.2): fine-tune a local BERT/RoBERTa checkpoint with evolving attention (α=β=0.1, 3x3) "
        "on the tweets, 3 classes; variants of Table 4; needs model.checkpoint=<folder of save_pretrained>",
        "tweets_bytes",
        _ea_bert,
        "ea_bert_tweets",
        epochs=2,
        batch_size=16,
        lr=2e-5,
        weight_decay=0.01,
        warmup_steps=380,
        eval_batch_size=64,
    ),
}
"""The EA-BERT preset (see the module docstring); :data:`~neuralode_tf.train.PRESETS` lists it."""

BERT_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "ea_bert_tweets": {name: {"variant": name} for name in _ablations(EA_BERT)},
}
"""Table 4's models for ``neuralode-tf compare ea_bert_tweets``, as ``model.variant`` overrides."""
