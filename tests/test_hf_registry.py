"""The family registry of ``from_transformers``: a family is one registered entry; a refused model names them."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf.models import from_transformers
from neuralode_tf.models.converters import huggingface as hf
from neuralode_tf.models.converters.huggingface import convert
from tests._huggingface import hf_output, model

pytestmark = pytest.mark.cpu_only("registry bookkeeping on small CPU models")


@pytest.fixture
def registry(monkeypatch):
    """The registry, restored after the test."""
    monkeypatch.setattr(convert, "_REGISTRY", list(convert._REGISTRY))
    return convert._REGISTRY


def test_a_registered_family_reads_its_models(registry):
    """A second reading of LLaMA under another base-class name: registering it is all that is needed."""

    class RenamedLlama(type(next(f for f in hf.families() if "LlamaModel" in f.base_classes))):
        base_classes = ("RenamedLlamaModel",)

    llama = model("llama", "base")
    renamed = type("RenamedLlamaModel", (type(llama),), {})  # a subclass in the transformers module
    renamed.__module__ = type(llama).__module__
    llama.__class__ = renamed
    with pytest.raises(TypeError, match="none of the registered families' .* \\(register_family adds one\\)"):
        from_transformers(llama)
    family = hf.register_family(RenamedLlama())
    assert hf.families()[-1] is family
    ids = torch.randint(2, 90, (2, 6))
    with torch.no_grad():
        assert (from_transformers(llama)(ids) - hf_output(llama, ids, None)).abs().max().item() <= 1e-10


def test_registering_refuses_what_is_no_family_or_taken(registry):
    with pytest.raises(TypeError, match="register_family takes a Family, got str"):
        hf.register_family("llama")
    taken = "LlamaModel, MistralModel, Qwen2Model: read by the registered family Llama already"
    with pytest.raises(ValueError, match=taken):
        hf.register_family(type(hf.families()[1])())

    class Empty(hf.Family):
        pass

    with pytest.raises(ValueError, match="Empty names no base_classes"):
        hf.register_family(Empty())

    class Undeclared(hf.Family):
        base_classes = ("SomeModel",)
        layer_classes = ("SomeLayer",)
        layers_at = "layers"

    undeclared = "Undeclared declares no embedding_at nor embed\\(\\); no attention and mlp_at nor parts\\(\\)"
    with pytest.raises(ValueError, match=undeclared):
        hf.register_family(Undeclared())


def test_a_family_declared_by_its_paths_alone_reads_its_models(registry):
    """LLaMA declared from scratch, attributes only (the docstring's example): the same output as the built-in."""
    from neuralode_tf.models.converters.huggingface.llama import _LlamaAttention

    class DeclaredLlama(hf.Family):
        base_classes = ("DeclaredLlamaModel",)
        layer_classes = ("LlamaDecoderLayer",)
        layers_at = "layers"
        attention = _LlamaAttention
        mlp_at = ("post_attention_layernorm", "mlp")
        embedding_at = "embed_tokens"
        final_norm_at = "norm"

    llama = model("llama", "base")
    declared = type("DeclaredLlamaModel", (type(llama),), {})
    declared.__module__ = type(llama).__module__
    ids = torch.randint(2, 90, (2, 6))
    with torch.no_grad():
        builtin = from_transformers(llama)(ids)
        llama.__class__ = declared
        hf.register_family(DeclaredLlama())
        converted = from_transformers(llama)
        assert converted.family is hf.families()[-1]
        assert (converted(ids) - builtin).abs().max().item() == 0.0
        assert (builtin - hf_output(llama, ids, None)).abs().max().item() <= 1e-10


def test_the_docs_list_every_registered_family():
    """The README's list of the families read and the front-ends guide's name every registered family (by its class
    name, case, spaces and hyphens aside: ``GPTNeoX`` is GPT-NeoX, ``Olmo2`` OLMo 2)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    listed = readme[readme.index("The families read are") :].split("each a declared entry")[0]
    guide_lines = (root / "docs" / "guide" / "front-ends.md").read_text(encoding="utf-8").splitlines()
    guide = next(line for line in guide_lines if "from_transformers" in line)
    squash = lambda text: "".join(text.lower().replace("-", "").split())  # noqa: E731
    for family in hf.families():
        name = squash(type(family).__name__)
        assert name in squash(listed) and name in squash(guide), type(family).__name__
