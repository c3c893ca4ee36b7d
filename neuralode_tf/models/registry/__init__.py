"""Named model configurations, one registry in the style of timm.

A configuration is a model class (its *builder*) and keyword arguments; :func:`create_model` calls
``builder(**{**kwargs, **overrides})``, so every argument can be overridden, e.g.
``create_model("deit_tiny_cifar100", field="parallel", num_sets=6, method="rk4")``. Arguments that depend on
the data and have no default are given there too: ``vocab_size`` of :class:`~neuralode_tf.models.TextClassifier`,
:class:`~neuralode_tf.models.TransEvolveClassifier` and :class:`~neuralode_tf.models.TransEvolveSeq2Seq`,
``src_vocab_size`` of :class:`~neuralode_tf.models.Seq2Seq`. :func:`list_models` lists the names (the papers'
architectures and the models of the training presets, :data:`neuralode_tf.train.PRESETS`, which build them by
name with the data's shape as overrides); :func:`model_config` gives one configuration with its description.
"""

from . import language, resnets, sequences, sets, text, vision  # noqa: F401  (they register on import)
from ._registry import RENAMED_MODELS, ModelConfig, create_model, list_models, model_config, register_model

__all__ = ["ModelConfig", "RENAMED_MODELS", "register_model", "create_model", "list_models", "model_config"]
