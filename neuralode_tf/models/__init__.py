"""Models, grouped by job; every public name is exported here.

* :mod:`~neuralode_tf.models.frontends`: the models a user trains, continuous-depth transformers for images
  (:class:`ViT`), sets, text, signals, sequence-to-sequence problems, language modelling (:class:`CausalLM`), a
  pretrained text classifier and TransEvolve's;
* :mod:`~neuralode_tf.models.readings`: the readings of a block stack as an ODE, by name (:data:`FIELDS`:
  ``"split"``, ``"parallel"``, ``"composed"``, ``"node"``, ``"discrete"``, ...) beside the blocks and stacks they
  build (:func:`stack_encoder`, :func:`transformer_field`, :class:`NODETransformer`, :class:`DiscreteStack`);
* :mod:`~neuralode_tf.models.converters`: trained networks read as ODEs, timm ViTs
  (:func:`continuous_from_timm`), ResNets (:func:`continuous_resnet`, :func:`aa_resnet`) and Hugging Face models
  (:func:`from_transformers`, with its family registry :mod:`~neuralode_tf.models.converters.huggingface`);
* :mod:`~neuralode_tf.models.registry`: one registry of named configurations.

What a model's ``forward`` takes follows its dataset's kind (images, tokens, points, ...; see
:mod:`neuralode_tf.train`).

Every model takes ``field``, the name of a reading of its own blocks (:data:`FIELDS`) or a ready-made field
module, and the solve settings of its :class:`~neuralode_tf.ContinuousDepth` stack(s) (``method``, ``steps`` /
``step_size``, ``gradient``, ...). The default method with one Euler step per unit of depth-time
(``lie_trotter``, or ``euler`` for parallel blocks) computes the discrete network the field was read from. The
classifiers split as timm's, ``forward = forward_head(forward_features(...))``; the encoder-decoders have
``encode`` and ``decode``. Padding masks are True at padding, named as in :class:`torch.nn.Transformer`
(``key_padding_mask``, ``src_key_padding_mask``, ``tgt_key_padding_mask``, ``memory_key_padding_mask``). A
model's parameter count is ``sum(p.numel() for p in model.parameters())``.

The registry (:mod:`~neuralode_tf.models.registry`, in the style of timm) names the papers' architectures
and the models of the training presets: :func:`list_models` lists the names (``list_models("ot_*")``),
:func:`create_model` builds one with keyword overrides (``create_model("deit_tiny_cifar100",
field="parallel", num_sets=6)``; data-dependent arguments such as ``vocab_size`` are overrides too),
:func:`model_config` gives its class, keyword arguments and description, and :func:`register_model` adds one.
"""

from .converters.augmented_resnet import AA_RESNET_DEPTHS, aa_resnet, augmented_convolutions
from .converters.huggingface import from_transformers
from .converters.resnet_ode import ContinuousResNet, continuous_resnet
from .converters.timm import continuous_from_timm
from .frontends.causal_lm import CausalLM
from .frontends.decoding import EncoderDecoder
from .frontends.pretrained_text import PretrainedTextClassifier
from .frontends.seq2seq import Seq2Seq
from .frontends.set_reference import ReferenceSetTransformer
from .frontends.set_transformer import SetTransformer
from .frontends.signal import SignalClassifier
from .frontends.text import PAD, TextClassifier
from .frontends.transevolve import TRANSEVOLVE_VARIANTS, TransEvolveClassifier, TransEvolveEncoder, TransEvolveSeq2Seq
from .frontends.vit import ViT
from .readings.blocks import decoder_field, transformer_field
from .readings.discrete import DiscreteStack
from .readings.node import NODETransformer
from .readings.set_blocks import isab_field
from .readings.stack import FIELDS, stack_encoder
from .registry import ModelConfig, create_model, list_models, model_config, register_model

__all__ = [
    "PretrainedTextClassifier",
    "create_model",
    "list_models",
    "model_config",
    "register_model",
    "ModelConfig",
    "ViT",
    "continuous_from_timm",
    "aa_resnet",
    "AA_RESNET_DEPTHS",
    "augmented_convolutions",
    "continuous_resnet",
    "ContinuousResNet",
    "from_transformers",
    "TextClassifier",
    "SignalClassifier",
    "SetTransformer",
    "ReferenceSetTransformer",
    "Seq2Seq",
    "CausalLM",
    "EncoderDecoder",
    "TRANSEVOLVE_VARIANTS",
    "TransEvolveEncoder",
    "TransEvolveClassifier",
    "TransEvolveSeq2Seq",
    "PAD",
    "FIELDS",
    "transformer_field",
    "decoder_field",
    "isab_field",
    "stack_encoder",
    "NODETransformer",
    "DiscreteStack",
]


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
