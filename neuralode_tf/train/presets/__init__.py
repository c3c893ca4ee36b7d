"""Named training presets: a dataset, a model and the loop settings that train it well here.

One registry (:mod:`._registry`: :data:`PRESETS`, :data:`VARIANTS`, :func:`register_preset`,
:func:`register_variants`, :func:`config`) and one module per family, each registering its own presets when imported:

* the offline stand-ins (:mod:`._stand_ins`): ViT, text, sets, signals, ListOps, sequence reversal, and the
  evolving-attention and TransEvolve comparisons on them;
* :mod:`~neuralode_tf.train.presets.ot`: the OT-Transformer paper's runs and their stand-ins;
* :mod:`~neuralode_tf.train.presets.lm`: the language models (nanoGPT's and the released OT-Transformer's
  configurations, the tweets' characters);
* :mod:`~neuralode_tf.train.presets.bert`: EA-BERT fine-tuning of a local checkpoint;
* :mod:`~neuralode_tf.train.presets.imagenet`: Wang et al.'s ImageNet runs.

The evolving-attention ablation they share is one table (:data:`._ablations.ABLATIONS`). ``data.*`` and
``model.*`` overrides reach the dataset loader and the model's configuration.
"""

from . import _stand_ins, ot, lm, bert, imagenet  # noqa: F401, I001  (they register, in the order of `train --list`)
from ._builders import classes, images, pairs, registered, tokens
from ._registry import PRESETS, VARIANTS, Preset, config, register_preset, register_variants
from ._stand_ins import EA_REVERSE, EA_VARIANTS, TRANSEVOLVE_LISTOPS_VARIANTS, ZHONG_REVERSE_VARIANTS
from .lm import LM_VARIANTS
from .ot import OT_VARIANTS

__all__ = [
    "Preset",
    "PRESETS",
    "VARIANTS",
    "register_preset",
    "register_variants",
    "config",
    "registered",
    "images",
    "tokens",
    "classes",
    "pairs",
    "OT_VARIANTS",
    "LM_VARIANTS",
    "TRANSEVOLVE_LISTOPS_VARIANTS",
    "EA_VARIANTS",
    "EA_REVERSE",
    "ZHONG_REVERSE_VARIANTS",
]
