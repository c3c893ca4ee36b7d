"""Model front-ends: continuous-depth transformers for images (ViT, timm conversion), sets, text, signals,
sequence-to-sequence tasks and language modelling (:class:`CausalLM`), and one registry of named model configurations.
:func:`from_transformers` reads a Hugging Face transformers model exactly as an ODE
(:mod:`~neuralode_tf.models.huggingface`).

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

from . import _lm_registry  # noqa: F401  (registers the language models)
from .augmented_resnet import AA_RESNET_DEPTHS, aa_resnet, augmented_convolutions
from .blocks import decoder_field, transformer_field
from .causal_lm import CausalLM
from .decoding import EncoderDecoder
from .discrete import DiscreteStack
from .huggingface import from_transformers
from .node import NODETransformer
from .registry import ModelConfig, create_model, list_models, model_config, register_model
from .resnet_ode import ContinuousResNet, continuous_resnet
from .seq2seq import Seq2Seq
from .set_blocks import isab_field
from .set_reference import ReferenceSetTransformer
from .set_transformer import SetTransformer
from .signal import SignalClassifier
from .stack import FIELDS, stack_encoder
from .text import PAD, TextClassifier
from .timm import continuous_from_timm
from .transevolve import TRANSEVOLVE_VARIANTS, TransEvolveClassifier, TransEvolveEncoder, TransEvolveSeq2Seq
from .vit import ViT

__all__ = [
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
