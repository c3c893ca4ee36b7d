"""``from_transformers`` reads Mixtral, StarCoder2 and Falcon exactly: the default solve is the Hugging Face
model (base, LM head, sequence classification; float64 and float32; padding none/right/left), shares its
parameters, passes gradients to them, and refuses by name what it does not read."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import neuralode_tf
from neuralode_tf.models import from_transformers
from neuralode_tf.models import huggingface as hf
from neuralode_tf.models.huggingface.falcon import Falcon
from neuralode_tf.models.huggingface.mixtral import Mixtral
from neuralode_tf.models.huggingface.starcoder2 import Starcoder2
from tests._huggingface import hf_output, hf_zeroes_blind_queries, inputs, max_diff, transformers

VOCAB, DIM, LAYERS, HEADS = 97, 32, 3, 4
EXACT = {torch.float64: 1e-10, torch.float32: 1e-5}

CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # name: (config class, model class prefix, config keyword arguments)
    "starcoder2": (
        "Starcoder2Config",
        "Starcoder2",
        dict(num_key_value_heads=2, sliding_window=4, use_bias=True, intermediate_size=2 * DIM),
    ),
    "mixtral": (
        "MixtralConfig",
        "Mixtral",
        dict(
            num_key_value_heads=2,
            sliding_window=4,
            intermediate_size=2 * DIM,
            num_local_experts=4,
            num_experts_per_tok=2,
        ),
    ),
    "falcon": ("FalconConfig", "Falcon", dict(parallel_attn=True, multi_query=True, bias=False)),
    "falcon_grouped": (
        "FalconConfig",
        "Falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, bias=True, ffn_hidden_size=2 * DIM),
    ),
    "falcon_one_norm": (
        "FalconConfig",
        "Falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1),
    ),
    "falcon_sequential": ("FalconConfig", "Falcon", dict(parallel_attn=False, multi_query=False, bias=True)),
}
"""Grouped-query attention (2 key/value heads for 4 query heads) and a sliding window shorter than the sequence
(StarCoder2, Mixtral: 4 of 4 experts routed top-2); Falcon-7B's parallel multi-query block with one norm, Falcon-40B's
grouped block with two norms (and with one), the old sequential block."""

WINDOW = {"starcoder2": 4, "mixtral": 4}
FAMILY_OF = {"starcoder2": Starcoder2, "mixtral": Mixtral, "falcon": Falcon}


def _skip_if_absent(name: str) -> None:
    if not hasattr(transformers(), CONFIGS[name][0]):
        pytest.skip(f"{CONFIGS[name][0]} is not in transformers {transformers().__version__}")


def config(name: str, **overrides: Any) -> Any:
    _skip_if_absent(name)
    config_class, _, kwargs = CONFIGS[name]
    common: dict[str, Any] = dict(
        vocab_size=VOCAB,
        hidden_size=DIM,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        pad_token_id=0,
        initializer_range=0.05,
        num_labels=3,
    )
    return getattr(transformers(), config_class)(**{**common, **kwargs, **overrides})


def model(name: str, task: str = "causal_lm", *, dtype: torch.dtype = torch.float64, **overrides: Any) -> Any:
    """A random-weight model (seed 0) of config ``name`` with the head of ``task``, in eval mode."""
    prefix = CONFIGS[name][1]
    if name == "mixtral" and dtype == torch.float64 and hf_zeroes_blind_queries():
        # transformers 5's default experts kernel (torch._grouped_mm) takes no float64: its eager experts do
        overrides.setdefault("experts_implementation", "eager")
    suffix = {"causal_lm": "ForCausalLM", "sequence_classification": "ForSequenceClassification", "base": "Model"}
    cfg = config(name, **overrides)
    torch.manual_seed(0)
    return getattr(transformers(), prefix + suffix[task])(cfg).to(dtype).eval()


def compared(name: str, mask: torch.Tensor | None) -> torch.Tensor | None:
    """Positions ``(B, n)`` compared: all (``None``) under transformers 5, else those whose query sees a real key
    (causally, within the sliding window): transformers 4 gives a query that sees none other values."""
    if mask is None or hf_zeroes_blind_queries():
        return None
    n, window = mask.shape[-1], WINDOW.get(name)
    i = torch.arange(n, device=mask.device)
    allowed = i[:, None] >= i[None, :]
    if window is not None:
        allowed = allowed & (i[:, None] - i[None, :] < window)
    return (allowed[None] & mask.bool()[:, None, :]).any(-1)


def _both(hf_model: Any, name: str, ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(Hugging Face's output, the converted model's) on the same inputs."""
    with torch.no_grad():
        return hf_output(hf_model, ids, mask), from_transformers(hf_model)(ids, mask)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("padding", ["none", "right", "left"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_default_solve_is_the_hf_model(name, padding, dtype, device):
    """The LM head's logits, batch of 3 (10, 7 and 4 real tokens), at every position (transformers 4: those whose
    query sees a key). Mixtral's experts mix with float32 router weights in both versions, but its MoE module is the
    model's own, so a float64 model is compared to 1e-10 like the others."""
    hf_model = model(name, dtype=dtype).to(device)
    ids, mask = inputs(name, padding, device)
    expected, got = _both(hf_model, name, ids, mask)
    assert got.shape == expected.shape and got.dtype == dtype and torch.isfinite(got).all()
    assert max_diff(got, expected, compared(name, mask)) <= EXACT[dtype]


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("task", ["sequence_classification", "base"])
@pytest.mark.parametrize("name", ["starcoder2", "mixtral", "falcon", "falcon_grouped"])
def test_heads_and_base_models(name, task, padding, device):
    """``*ForSequenceClassification`` pools the last non-padding token; the base model gives ``last_hidden_state``."""
    hf_model = model(name, task).to(device)
    ids, mask = inputs(name, padding, device)
    expected, got = _both(hf_model, name, ids, mask)
    assert got.shape == expected.shape
    assert max_diff(got, expected, compared(name, mask) if task == "base" else None) <= 1e-10


@pytest.mark.parametrize("name", ["starcoder2", "mixtral", "falcon_grouped"])
def test_parameters_are_shared_not_copied(name, device):
    hf_model = model(name).to(device)
    converted = from_transformers(hf_model)
    assert {id(p) for p in converted.parameters()} == {id(p) for p in hf_model.parameters()}
    field_pointers = {p.data_ptr() for p in converted.encoder.parameters()}
    assert field_pointers and field_pointers <= {p.data_ptr() for p in hf_model.base_model.parameters()}
    ids = inputs(name, "none", device)[0]
    with torch.no_grad():  # an in-place change of the Hugging Face weights changes the converted model
        before = converted(ids)
        for p in hf_model.base_model.parameters():
            p.mul_(1.5)
        assert max_diff(converted(ids), before) > 1e-3


@pytest.mark.parametrize("name", ["starcoder2", "mixtral", "falcon", "falcon_sequential"])
def test_gradients_flow_into_the_hf_parameters(name, device):
    """Backpropagating through the converted model gives the Hugging Face model's own gradients (of the positions
    compared in the forward)."""
    hf_model = model(name).to(device)
    ids, mask = inputs(name, "right", device)
    where = compared(name, mask)
    weight = 1.0 if where is None else where[..., None].double()
    (hf_output(hf_model, ids, mask) * weight).square().sum().backward()
    expected = {key: p.grad.clone() for key, p in hf_model.named_parameters() if p.grad is not None}
    hf_model.zero_grad(set_to_none=True)
    (from_transformers(hf_model)(ids, mask) * weight).square().sum().backward()
    got = {key: p.grad for key, p in hf_model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys() and len(got) > 10
    assert max(max_diff(got[key], expected[key]) for key in got) <= 1e-9


@pytest.mark.parametrize(
    ("name", "method", "field"),
    [
        ("starcoder2", "lie_trotter", "SplitField"),
        ("mixtral", "lie_trotter", "SplitField"),
        ("falcon", "euler", "ParallelField"),
        ("falcon_grouped", "euler", "ParallelField"),
        ("falcon_sequential", "lie_trotter", "SplitField"),
    ],
)
def test_default_method_and_set_solve_options(name, method, field, device):
    hf_model = model(name).to(device)
    converted = from_transformers(hf_model)
    assert converted.encoder.solve_options["method"] == method
    assert converted.encoder.solve_options["step_size"] == 1.0
    assert type(converted.encoder.field.layers[0]).__name__ == field
    ids, _ = inputs(name, "none", device)
    with torch.no_grad():
        expected = hf_output(hf_model, ids, None)
        neuralode_tf.set_solve_options(converted, method="rk4", steps=2 * LAYERS)
        assert max_diff(converted(ids), expected) > 1e-6
        neuralode_tf.set_solve_options(converted, method=method)
        assert max_diff(converted(ids), expected) <= 1e-10


def test_the_attention_reads_the_layout_of_falcon_projections(device):
    """Multi-query (one key/value head), grouped (``num_kv_heads`` groups) and per-head fused projections."""
    heads = {}
    for name in ("falcon", "falcon_grouped", "falcon_sequential"):
        converted = from_transformers(model(name).to(device))
        attention = converted.encoder.field.layers[0].parts[0].branch
        heads[name] = (attention.num_heads, attention.num_kv_heads)
    assert heads == {"falcon": (4, 1), "falcon_grouped": (4, 2), "falcon_sequential": (4, 4)}


def test_dropout_matches_in_training_mode_where_it_is_off(device):
    """Residual and embedding dropouts are read (StarCoder2's ``residual_dropout``, ``embedding_dropout``;
    Falcon's sequential ``attention_dropout``/``hidden_dropout``): with them the two models are random in
    training mode and equal in eval mode; the converted model follows the Hugging Face model's mode."""
    for name, rates in (
        ("starcoder2", dict(residual_dropout=0.3, embedding_dropout=0.3)),
        ("falcon_sequential", dict(attention_dropout=0.3, hidden_dropout=0.3)),
    ):
        hf_model = model(name, **rates).to(device)
        converted = from_transformers(hf_model)
        ids, _ = inputs(name, "none", device)
        with torch.no_grad():
            assert max_diff(converted(ids), hf_output(hf_model, ids, None)) <= 1e-10
            converted.train()
            assert hf_model.training and max_diff(converted(ids), converted(ids)) > 1e-3
        dropouts = [m for m in converted.encoder.modules() if isinstance(m, torch.nn.Dropout)]
        assert dropouts and all(m.p == 0.3 for m in dropouts if m.p)


def test_unread_variants_raise_type_errors_naming_them(device):
    with pytest.raises(TypeError, match="cannot read FalconDecoderLayer with alibi=True"):
        from_transformers(model("falcon", alibi=True))
    with pytest.raises(TypeError, match="cannot read FalconDecoderLayer with hidden_dropout=0.1 on a parallel block"):
        from_transformers(model("falcon", hidden_dropout=0.1))
    with pytest.raises(TypeError, match="cannot read the head of MixtralForTokenClassification"):
        from_transformers(transformers().MixtralForTokenClassification(config("mixtral")))
    hf_model = model("starcoder2")
    hf_model.model.layers[1] = torch.nn.Identity()
    with pytest.raises(TypeError, match="cannot read Identity: the blocks of Starcoder2Model it reads are Starcoder2"):
        from_transformers(hf_model)


@pytest.mark.cpu_only("inspects the registry")
def test_the_families_are_registered():
    names = {name for family in hf.families() for name in family.base_classes}
    assert {"Starcoder2Model", "MixtralModel", "FalconModel"} <= names
    assert "OPTModel" not in names  # not read yet: its positions need the attention mask in the embedding
