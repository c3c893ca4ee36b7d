"""Hugging Face transformers models read as continuous-depth ODEs: :func:`from_transformers`.

A converted model takes the Hugging Face model's inputs (``input_ids``, ``attention_mask`` with 1 at real tokens,
``position_ids``, and ``token_type_ids`` for GPT-2 and BERT) and returns its main output: ``logits`` for
``*ForCausalLM`` (GPT-2: ``GPT2LMHeadModel``), ``*ForMaskedLM`` and ``*ForSequenceClassification``,
``last_hidden_state`` for a base model. Embedding, final norm and head are the model's own modules; the ``L``
blocks become the field of a :class:`~neuralode_tf.ContinuousDepth` on depth-time ``[0, L]``, block
``m = ⌊t⌋`` giving the parts of the field on ``[m, m + 1)`` (a :class:`~neuralode_tf.fields.WeightSharedField`),
built around the block's own modules (the same ``Parameter`` objects, no copy). The families:

==============================  ==========================================================  =================
family (base models)            block ``m`` and its reading                                 default method
==============================  ==========================================================  =================
GPT-2 (``GPT2Model``)           ``x + G(LN_1 x)``, then ``+ F(LN_2 ·)``;                      ``lie_trotter``
                                ``dx/dt = G_m(x) + F_m(x)``, split
LLaMA, Mistral, Qwen2           the same with RMSNorm, rotary ``q, k``, grouped-query         ``lie_trotter``
                                attention, SwiGLU ``F``; split
Qwen3                           as LLaMA, with ``q, k`` RMS-normalised per head; split        ``lie_trotter``
Gemma                           as LLaMA, ``(1 + w)`` RMSNorms, GeGLU, ``x(0) = √d E[w]``;    ``lie_trotter``
                                split
Gemma 2                         Gemma with sandwich norms (a norm after each branch),         ``lie_trotter``
                                attention logits capped ``c tanh(s q kᵀ / c)`` where the
                                installed attention caps them, alternating windows,
                                capped LM logits; split
Phi-3                           as LLaMA, fused ``qkv_proj`` and gate/up projections; split   ``lie_trotter``
StableLM                        pre-LN, partial rotary, per-head ``q, k`` LayerNorms;         ``lie_trotter``
                                split (``use_parallel_residual``: parallel, ``euler``)
Phi                             ``x + G(LN x) + F(LN x)``: one norm for both branches,        ``euler``
                                partial rotary, per-head ``q, k`` LayerNorms; parallel
Mixtral                         Mistral's attention, a routed mixture of experts as ``F``;    ``lie_trotter``
                                split
StarCoder2                      pre-LN, GQA, rotary, biases, sliding window; split            ``lie_trotter``
Falcon (parallel attention)     ``x + G(N_a x) + F(N_f x)``, multi-query or grouped;          ``euler``
                                parallel (sequential blocks: split, ``lie_trotter``)
GPT-NeoX (parallel residual)    ``x + G(LN_1 x) + F(LN_2 x)``: Zhong et al.'s parallel        ``euler``
                                block, the same ODE as one field (``ParallelField``)
GPT-NeoX (sequential)           as GPT-2, with partial rotary ``q, k``; split                 ``lie_trotter``
GPT-J                           ``x + G(LN x) + F(LN x)``, interleaved partial rotary;        ``euler``
                                parallel
OPT                             pre-LN as GPT-2, learned positions counted from the           ``lie_trotter``
                                attention mask (offset 2); OPT-350m post-LN as BERT; split
BERT, RoBERTa, ELECTRA          ``N_2(x' + F(x'))``, ``x' = N_1(x + G(x))``: a projected      ``lie_trotter``
                                Euler step; ``dx/dt = G + (N_1 - I) + F + (N_2 - I)``
                                (ELECTRA: a projected factorised embedding)
DistilBERT                      BERT's post-LN block, its own projections; split              ``lie_trotter``
ALBERT                          BERT's post-LN block, one layer shared by every block:        ``lie_trotter``
                                an autonomous field; factorised embedding
==============================  ==========================================================  =================

For the pre-norm families, with ``G_m`` the attention sub-layer (norm inside) and ``F_m`` the MLP sub-layer,

.. math:: \\frac{dx}{dt} = G_{\\lfloor t \\rfloor}(x) + F_{\\lfloor t \\rfloor}(x), \\qquad t \\in [0, L],

(Lu et al. 2019; Zhong et al. 2022, eq. 3): one Lie-Trotter Euler step of size 1 per block is the block
``x + G_m(x)``, then ``+ F_m(.)``, and one Euler step of size 1 of the sum is GPT-NeoX's parallel block
``x + G_m(x) + F_m(x)`` (Zhong et al. 2022, eq. 4). BERT's post-LN block is no such step: each sub-layer is an
Euler step followed by a projection, its LayerNorm ``N``, which the field carries as a part of its own,
``N(x) - x``, whose unit Euler step is the projection (:class:`PostNorm` says what other methods then
integrate). Attention runs through :func:`torch.nn.functional.scaled_dot_product_attention`,
causal for the decoders, with Hugging Face's padding mask and (Mistral, Qwen2, Qwen3) sliding window.

**Exactness.** The default solve options (one Lie-Trotter Euler step per block on ``[0, L]``; Euler for a parallel
field) compute the Hugging Face model's output: ``tests/test_huggingface.py`` and ``tests/test_hf_families.py`` assert
a max-abs difference <= 1e-10 in float64 and <= 1e-5 in float32 (on outputs of size about 1) for every family, with
left and right padding, grouped-query attention, tied embeddings and a batch of several sequences, for the base model
and each head; in float64 to 1e-5 where Hugging Face computes part of a block in float32 whatever the dtype (Gemma 2's
eager softmax). A decoder's padded query that sees no key
(left of the text, or past a sliding window) gets zero attention weights, as torch's
``scaled_dot_product_attention`` and so Hugging Face's ``sdpa`` attention give it: every position is compared under
transformers 5; under transformers 4, whose values there differ, only the positions whose query sees a key. Other
options (``method="rk4"``, more ``steps``, an adaptive ``"dopri5"``, ``gradient="adjoint"``) integrate the same ODE;
``neuralode_tf.set_solve_options(converted, ...)`` changes them on a converted model, as on any other. The
conversion reads the blocks through the module classes it knows (:func:`families`, which :func:`register_family`
extends) and refuses anything else with a ``TypeError`` that names the class.

**A local checkpoint**, without downloading anything::

    from transformers import AutoModelForCausalLM
    from neuralode_tf.models import from_transformers

    model = AutoModelForCausalLM.from_pretrained("/path/to/folder").eval()   # a folder with config.json + weights
    converted = from_transformers(model, method="rk4", step_size=0.25)      # four rk4 steps per block
    logits = converted(input_ids, attention_mask=attention_mask)

As everywhere in the library, ``steps`` counts the steps over the whole interval ``[0, L]``:
``from_transformers(model, method="rk4", steps=4)`` takes four rk4 steps over all ``L`` blocks, and
``steps=4 * L`` is the same as ``step_size=0.25``. ``transformers`` is an optional dependency (the ``hf`` extra);
this package never imports it.

**Evolving attention** (EA-BERT, Wang et al. 2021, §4.2): ``from_transformers(bert, evolving=dict(alpha=0.1,
beta=0.1, kernel_size=3))`` adds a convolution between consecutive blocks' attention logits to a post-LN encoder
(BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT; :class:`EvolvingTransformersAttention`; the first block stays the
checkpoint's), trained with the shared Hugging Face parameters. The blocks then form an augmented field on tokens
and logits ``(x, A)``
(:class:`EvolvingTransformersStack`, ``dA/dt = L(A, x) - A``), whose default solve is the discrete EA model and
which other methods and adjoints integrate; with ``alpha = beta = 0`` it is the Hugging Face model exactly
(``tests/test_ea_bert.py``).
"""

from ...._renamed import renamed_names
from ._attention import AttentionMasks, TransformersAttention
from ._family import Family
from ._model import ContinuousTransformersModel
from .bert import PostNorm
from .convert import HEADS, families, from_transformers, register_family
from .evolving import EvolvingTransformersAttention, EvolvingTransformersStack

__all__ = [
    "from_transformers",
    "ContinuousTransformersModel",
    "families",
    "register_family",
    "HEADS",
    "Family",
    "TransformersAttention",
    "AttentionMasks",
    "PostNorm",
    "EvolvingTransformersAttention",
    "EvolvingTransformersStack",
]

__getattr__ = renamed_names(__name__, {"TASKS": "HEADS"}, globals())
"""``TASKS``, the former name of :data:`HEADS`, with a :class:`DeprecationWarning` (until the next release)."""


def __dir__() -> list[str]:
    """`dir()` of the package: its public names (`__all__`), not the modules it is made of."""
    return sorted(__all__)
