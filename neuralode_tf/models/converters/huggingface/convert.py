"""``from_transformers``: the families it reads, the heads it keeps, and the conversion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ...readings.stack import stack_encoder
from ._family import Family
from ._model import ContinuousTransformersModel
from .albert import Albert
from .bert import Bert, Roberta
from .distilbert import DistilBert
from .electra import Electra
from .evolving import evolving_encoder
from .falcon import Falcon
from .gemma import Gemma, Gemma2
from .gpt2 import GPT2
from .gpt_neox import GPTNeoX
from .gptj import GPTJ
from .llama import Llama
from .mixtral import Mixtral
from .olmo import Olmo, Olmo2
from .opt import OPT
from .phi import Phi, Phi3
from .qwen3 import Qwen3
from .stablelm import StableLm
from .starcoder2 import Starcoder2

__all__ = ["HEADS", "families", "from_transformers", "register_family"]

_REGISTRY: list[Family] = []


def register_family(family: Family) -> Family:
    """Let :func:`from_transformers` read the base models that ``family`` names (its ``base_classes``); returns it.

    A family is one :class:`Family` object: which modules of a block are its parts (the attention branch, the MLP
    branch, their norms), its reading (split or parallel), its embedding, its positions and its final norm. The
    extending guide adds one.

    Raises:
        TypeError: ``family`` is no :class:`Family`.
        ValueError: it names no base class, declares neither where a part of the model is nor the method that reads
            it (the message names both), or names a base class that a registered family reads already.
    """
    if not isinstance(family, Family):
        raise TypeError(f"register_family takes a Family, got {type(family).__name__}")
    if not family.base_classes or not family.layer_classes:
        raise ValueError(f"{type(family).__name__} names no base_classes or no layer_classes")
    undeclared = [
        f"{declared} nor {method}()"
        for declared, method in (("layers_at", "layers"), ("embedding_at", "embed"))
        if not getattr(family, declared) and getattr(type(family), method) is getattr(Family, method)
    ]
    if (family.attention is None or not family.mlp_at) and type(family).parts is Family.parts:
        undeclared.append("attention and mlp_at nor parts()")
    if undeclared:
        raise ValueError(f"{type(family).__name__} declares no {'; no '.join(undeclared)}")
    for other in _REGISTRY:
        taken = sorted(set(other.base_classes) & set(family.base_classes))
        if taken:
            raise ValueError(f"{', '.join(taken)}: read by the registered family {type(other).__name__} already")
    _REGISTRY.append(family)
    return family


def families() -> tuple[Family, ...]:
    """The registered families, in the order they were registered."""
    return tuple(_REGISTRY)


for _family in (
    GPT2(),
    Llama(),
    Qwen3(),
    Gemma(),
    Gemma2(),
    Mixtral(),
    Olmo(),
    Olmo2(),
    Starcoder2(),
    Falcon(),
    OPT(),
    GPTNeoX(),
    GPTJ(),
    Phi(),
    Phi3(),
    StableLm(),
    Bert(),
    Roberta(),
    DistilBert(),
    Electra(),
    Albert(),
):
    register_family(_family)

HEADS = {
    "ForCausalLM": "causal_lm",
    "LMHeadModel": "causal_lm",
    "ForMaskedLM": "masked_lm",
    "ForSequenceClassification": "sequence_classification",
}
"""Class-name suffix of a Hugging Face model with a head -> the head (a key of :attr:`Family.heads`) whose output
the converted model returns."""


def from_transformers(
    hf_model: nn.Module, *, evolving: Mapping[str, Any] | None = None, **solve_options: Any
) -> ContinuousTransformersModel:
    """A Hugging Face transformers model read exactly as a continuous-depth ODE (see
    :mod:`neuralode_tf.models.converters.huggingface` for the reading of each family).

    The blocks become a :class:`~neuralode_tf.fields.WeightSharedField` over ``[0, L]`` whose layer ``m`` is a
    :class:`~neuralode_tf.fields.SplitField` of block ``m``'s parts (a
    :class:`~neuralode_tf.fields.ParallelField` for GPT-NeoX's parallel residual), solved by a
    :class:`~neuralode_tf.ContinuousDepth`; the embedding, the final norm and the head are the model's own. The
    parts are built around the model's modules, so the converted model shares its parameters (the same
    ``Parameter`` objects: training one trains the other). The default, one Lie-Trotter Euler step per block
    (Euler for a parallel field), computes the Hugging Face model's output exactly (to rounding: float64
    max-abs <= 1e-10 in ``tests/test_huggingface.py``); other settings integrate the same ODE, e.g.
    ``from_transformers(model, method="rk4", steps=4)`` or later
    ``neuralode_tf.set_solve_options(converted, method="dopri5", rtol=1e-6)``.

    Args:
        hf_model: A model of a family in :func:`families`: the base model (returns ``last_hidden_state``) or one
            with a head of :data:`HEADS` (returns ``logits``). The converted model starts in its training mode;
            use ``eval()`` (or zero dropout) for solves with several evaluations per step: dropout inside the
            blocks stays.
        evolving: Add evolving attention (Wang et al. 2021, §4.2: EA-BERT) to a post-LN encoder (BERT, RoBERTa,
            ELECTRA, DistilBERT, ALBERT), e.g. ``evolving=dict(alpha=0.1, beta=0.1, kernel_size=3)``: ``alpha``
            weighs the previous block's attention logits and ``beta`` the ``kernel_size × kernel_size`` convolution
            between consecutive blocks' logits (eq. 4; ``kernel_size`` defaults to 3). The ``L - 1`` new
            convolutions (the first block has no previous map and stays the checkpoint's) are the converted model's
            only parameters that the Hugging Face model lacks, initialised from torch's random state on the model's
            device and dtype (convert after moving it); with ``alpha = beta = 0`` the output is the Hugging Face
            model's. The ODE state is then ``(x, A)``, tokens and carried logits
            (:mod:`neuralode_tf.models.converters.huggingface.evolving`); the default solve is the discrete EA model.
        **solve_options: Settings of :func:`~neuralode_tf.models.stack_encoder`: ``method``, ``steps`` /
            ``step_size`` (over ``[0, L]``: ``steps=4 * L`` is four per block), ``gradient``, ``backend``,
            ``rtol``, ``atol``, ..., and ``t1``, ``transport_cost``.

    Raises:
        TypeError: ``hf_model`` is no Hugging Face model, its base model is of no family in :func:`families`, its
            head is none of :data:`HEADS` its family has, or a block has what the reading does not cover
            (cross-attention, relative positions); the message names the class. With ``evolving``: a model that
            is none of those encoders, or settings that are no mapping of ``alpha``, ``beta``, ``kernel_size``.
        ValueError: ``evolving`` values out of range (``alpha``, ``beta`` in ``[0, 1]``, an odd ``kernel_size``),
            or a ``transport_cost`` with them.
    """
    if not any(cls.__module__.startswith("transformers.") for cls in type(hf_model).__mro__):
        raise TypeError(f"from_transformers reads Hugging Face transformers models, not {type(hf_model).__name__}")
    base = hf_model.base_model
    family = next((f for f in _REGISTRY if type(base).__name__ in f.base_classes), None)
    if family is None:
        readable = ", ".join(name for f in _REGISTRY for name in f.base_classes)
        raise TypeError(
            f"from_transformers cannot read {type(hf_model).__name__}: its base model {type(base).__name__} is "
            f"none of the registered families' {readable} (register_family adds one)"
        )
    head = "base" if base is hf_model else _head(hf_model, family)
    field, sets = family.blocks(base)
    if evolving is None:
        encoder = stack_encoder(field, len(sets), sets, **solve_options)
    else:
        encoder = evolving_encoder(family, base, sets, evolving, **solve_options)
    converted = ContinuousTransformersModel(hf_model, encoder, family, head)
    return converted.train(hf_model.training)  # the new modules (attention) in the model's mode


def _head(hf_model: nn.Module, family: Family) -> str:
    name = type(hf_model).__name__
    head = next((head for suffix, head in HEADS.items() if name.endswith(suffix)), None)
    if head is None or head not in family.heads:
        kept = ", ".join(sorted(family.heads))
        raise TypeError(f"from_transformers cannot read the head of {name}: for its family it reads {kept}")
    return head
