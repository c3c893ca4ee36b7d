"""EA-BERT (Wang et al. 2021, §4.2, Tables 3 and 4): a local Hugging Face BERT or RoBERTa checkpoint, read exactly
as an ODE (:func:`~neuralode_tf.models.from_transformers`), with evolving attention added, fine-tuned on the tweets
sentiment set offline (``ea_bert_tweets``) or on a GLUE task from its files (``ea_bert_glue``).

Both fine-tune the checkpoint folder of ``--set model.checkpoint=PATH``, what ``save_pretrained`` writes
(``config.json``, the weights and the tokenizer's files; nothing is downloaded)::

    neuralode-tf train ea_bert_tweets --set model.checkpoint=/path/to/bert-base-uncased
    neuralode-tf compare ea_bert_tweets --seeds 0 1 2 --set model.checkpoint=/path/to/bert-base-uncased
    neuralode-tf compare ea_bert_glue --seeds 0 1 2 --set model.checkpoint=/path/to/bert-base-uncased \
        data.root=/path/to/glue_data data.task=cola

The model is the folder's ``AutoModelForSequenceClassification`` with a head for the dataset's classes (one output
for STS-B's regression; new, from the run's seed, unless the checkpoint has one of that size) and its
``AutoTokenizer``, which tokenises the texts (:func:`~neuralode_tf.data.tweets_raw`: the tweets of
:func:`~neuralode_tf.data.tweets`, same split; :func:`~neuralode_tf.data.load_glue`: a GLUE task's sentences or
sentence pairs) at every forward (:class:`~neuralode_tf.models.PretrainedTextClassifier`). The variants
(``--set model.variant=NAME``, or all of them with ``neuralode-tf compare``) are the rows of Table 4:

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
:mod:`neuralode_tf.models.converters.huggingface.evolving`). **Training** from §4.2's grid ("learning rate {1e-4, 1e-5,
2e-5}, batch size {8, 16}, training epochs {2, 3, 5}"), AdamW with ε = 1e-8, and BERT's usual fine-tuning settings where
the paper gives none: weight decay 0.01, gradient clipping at 1, at most 128 tokens per example. Dropout is the
checkpoint's (0.1 in BERT's configurations, the paper's ratio). ``ea_bert_tweets``: lr 2e-5, batch 16, 2 epochs (3,814
steps on the 30,526 training tweets) with a 10% linear warm-up (380 steps). ``ea_bert_glue``: lr 2e-5, batch 16, 3
epochs, no warm-up (its length would depend on the task: ``--set warmup_steps=N``), CoLA unless ``data.task`` names
another of :data:`~neuralode_tf.data.GLUE_TASKS`; the test scores are the development set's, by the task's GLUE metrics
(``test_matthews`` for CoLA, ``test_f1`` and ``test_accuracy`` for MRPC, ...). BERT-Base scale wants a
GPU.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ...data import Splits
from ...models.frontends.pretrained_text import LAYOUT, CheckpointFolderError, PretrainedTextClassifier
from ..config import ConfigError
from ._ablations import ablations
from ._registry import Preset, register_preset, register_variants

__all__ = ["BERT_PRESETS", "BERT_VARIANTS", "EA_BERT"]

EA_BERT: dict[str, Any] = dict(alpha=0.1, beta=0.1, kernel_size=3)
"""The ``ea`` variant's evolving-attention settings (see the module docstring)."""

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
    variants = ablations(dict(alpha=alpha, beta=beta, kernel_size=kernel_size))
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(variants)}")
    num_labels = data.num_classes or 1  # one output for a regression (STS-B)
    if checkpoint is None:
        raise ConfigError(
            f"this preset fine-tunes a local checkpoint: give it with --set model.checkpoint=PATH, {LAYOUT}"
        )
    settings = dict(checkpoint=checkpoint, num_labels=num_labels, evolving=variants[variant])
    try:
        return PretrainedTextClassifier(**{**settings, **overrides})
    except CheckpointFolderError as error:
        raise ConfigError(f"model.checkpoint: {error}") from error


_FINE_TUNING: dict[str, Any] = dict(batch_size=16, lr=2e-5, weight_decay=0.01, eval_batch_size=64)

BERT_PRESETS: dict[str, Preset] = {
    "ea_bert_tweets": register_preset(
        "ea_bert_tweets",
        "EA-BERT (Wang et al. §4.2): fine-tune a local BERT/RoBERTa checkpoint with evolving attention (α=β=0.1, 3x3) "
        "on the tweets, 3 classes; variants of Table 4; needs model.checkpoint=<folder of save_pretrained>",
        "tweets_raw",
        _ea_bert,
        epochs=2,
        warmup_steps=380,
        **_FINE_TUNING,
    ),
    "ea_bert_glue": register_preset(
        "ea_bert_glue",
        "EA-BERT (Wang et al. §4.2, Tables 3-4): fine-tune a local BERT/RoBERTa checkpoint with evolving attention on "
        "a GLUE task (data.task=cola, sst2, mrpc, stsb, qqp, mnli, mnli_mismatched, qnli, rte, wnli), scored on its "
        "development set; needs model.checkpoint=<folder> and data.root=<glue_data>",
        "glue",
        _ea_bert,
        epochs=3,
        data={"task": "cola"},
        **_FINE_TUNING,
    ),
}
"""The EA-BERT presets (see the module docstring); :data:`~neuralode_tf.train.PRESETS` lists them."""

BERT_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    name: {variant: {"variant": variant} for variant in ablations(EA_BERT)} for name in BERT_PRESETS
}

"""Table 4's models for ``neuralode-tf compare ea_bert_tweets`` and ``ea_bert_glue``, as ``model.variant``
overrides."""

register_variants(BERT_VARIANTS)
