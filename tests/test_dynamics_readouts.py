"""depth_readout: the model's own head at any depth (the logit lens), and its distance to the final prediction."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuralode_tf.dynamics.readouts import depth_readout, readout_for, register_readout
from neuralode_tf.models import CausalLM, Seq2Seq, TextClassifier, ViT
from neuralode_tf.models.frontends.text import PAD
from tests._huggingface import LAYERS, inputs, max_diff, model


def _kl_and_agreement(lens: torch.Tensor, real: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """KL(final || depth) and top-1 agreement per depth of ``lens`` ``(T, B, n, V)``, written out per token."""
    p = torch.softmax(lens[-1], -1)
    kl = (p * (p.log() - torch.log_softmax(lens, -1))).sum(-1)
    agrees = (lens.argmax(-1) == lens[-1].argmax(-1)).to(kl.dtype)
    if real is None:
        return kl.mean((1, 2)), agrees.mean((1, 2))
    return kl[:, real].mean(1), agrees[:, real].mean(1)


@pytest.mark.cpu_only("float64 comparison with Hugging Face's own discrete forward, on tiny random-weight models")
@pytest.mark.parametrize("padding", ["none", "right"])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_logit_lens_at_block_outputs_is_the_lens_of_hugging_face_hidden_states(family, padding):
    """At ``k = 0..L`` the lens is ``lm_head(N(hidden_states[k]))``, HF's last entry already normed (float64, <= 1e-10
    on the real tokens; measured <= 1e-15). KL and agreement are those of that lens over the real tokens; at ``L`` they
    are 0 and 1, and the final logits are the converted model's output."""
    from neuralode_tf.models import from_transformers

    hf_model = model(family)
    converted = from_transformers(hf_model)
    ids, mask = inputs(family, padding, torch.device("cpu"))
    with torch.no_grad():
        lens = depth_readout(converted, list(range(LAYERS + 1)), ids, mask)
        hidden = hf_model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        norm, head = converted.family.final_norm(converted.base), hf_model.get_output_embeddings()
        expected = torch.stack([head(norm(h)) for h in hidden[:-1]] + [head(hidden[-1])])
        output = converted(ids, mask)
    real = None if mask is None else mask.bool()
    assert lens.logits.shape == expected.shape == (LAYERS + 1, *ids.shape, hf_model.config.vocab_size)
    assert max(max_diff(a, b, real) for a, b in zip(lens.logits, expected)) <= 1e-10
    kl, agreement = _kl_and_agreement(expected, real)
    assert max_diff(lens.kl, kl) <= 1e-10 and max_diff(lens.agreement, agreement) <= 1e-12
    assert lens.kl[-1].item() == 0.0 and lens.agreement[-1].item() == 1.0
    assert lens.kl[0].item() > 1e-3 and lens.agreement[0].item() < 1.0  # the embedding's lens is not the end's
    assert max_diff(lens.final_logits, output) == 0.0
    assert lens.trajectory.stats.nfe_dense == 0


@pytest.mark.cpu_only("Hugging Face models in float64: heads with pooling, and a base model without a head")
def test_converted_classifiers_read_their_own_head_and_a_base_model_is_refused():
    from neuralode_tf.models import from_transformers

    for family in ("llama", "bert"):
        converted = from_transformers(model(family, "sequence_classification"))
        ids, mask = inputs(family, "right", torch.device("cpu"))
        with torch.no_grad():
            readout = depth_readout(converted, [0.0, 1.5, float(LAYERS)], ids, mask)
            output = converted(ids, mask)
        assert readout.logits.shape == (3, ids.shape[0], 3)
        assert max_diff(readout.logits[-1], output) == 0.0 and readout.kl[-1].item() == 0.0
    with pytest.raises(TypeError, match="base model"):
        depth_readout(from_transformers(model("gpt2", "base")), [1.0], *inputs("gpt2", "none", torch.device("cpu")))


def test_causal_lm_lens_masks_padding_in_its_measures(device):
    """The lens is ``head(norm(x(t)))`` at every depth; ``kl`` and ``agreement`` average over real tokens only unless
    ``mask_padding=False``; at ``t1`` the readout is the model's output (max-abs 0)."""
    lm = CausalLM(40, 16, 3, 2, block_size=8, tie_weights=False).eval()
    for weight in [lm.head.weight, *(p for p in lm.encoder.parameters() if p.ndim == 2)]:
        nn.init.normal_(weight, std=0.5)  # blocks that move the tokens, and predictions far from uniform
    lm.to(device)
    tokens = torch.randint(1, 40, (2, 8), device=device)
    padding = torch.zeros_like(tokens, dtype=torch.bool)
    padding[1, 3:] = True
    times = [0.0, 0.5, 2.0, 3.0]
    with torch.no_grad():
        lens = depth_readout(lm, times, tokens, padding)
        unmasked = depth_readout(lm, torch.tensor(times), tokens, padding, mask_padding=False)
        heads = lm.forward_head(lm.norm(lens.trajectory.states))
        output = lm(tokens, padding)
    assert max_diff(lens.logits, heads) <= 1e-6
    assert max_diff(lens.final_logits, output) == 0.0 and max_diff(lens.logits[-1], output) == 0.0
    kl, agreement = _kl_and_agreement(torch.cat([lens.logits, lens.final_logits[None]]), ~padding)
    assert max_diff(lens.kl, kl[:-1]) <= 1e-5 and max_diff(lens.agreement, agreement[:-1]) <= 1e-6
    kl_all, agreement_all = _kl_and_agreement(torch.cat([lens.logits, lens.final_logits[None]]), None)
    assert max_diff(unmasked.kl, kl_all[:-1]) <= 1e-5 and max_diff(unmasked.agreement, agreement_all[:-1]) <= 1e-6
    assert max_diff(unmasked.kl, lens.kl) > 1e-2 and lens.kl[0].item() > 1.0
    assert lens.t.tolist() == times and lens.trajectory.states.shape == (4, 2, 8, 16)


def test_classifier_readout_at_the_end_is_the_model_output(device):
    """TextClassifier (padded, masked pooling), ViT and a converted timm ViT: ``y(t1)`` is the model's own logits
    exactly; ``y(t0)`` is not."""
    timm = pytest.importorskip("timm")
    from neuralode_tf.models.converters.timm import continuous_from_timm

    classifier = TextClassifier(30, 3, dim=16, num_heads=2, depth=2).eval().to(device)
    tokens = torch.randint(1, 30, (3, 6), device=device)
    tokens[1, 2:] = PAD
    vit = ViT(img_size=8, patch_size=4, num_classes=5, dim=16, depth=2, num_heads=2).eval().to(device)
    images = torch.randn(2, 3, 8, 8, device=device)
    timm_vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=8, patch_size=4, num_classes=4)
    converted = continuous_from_timm(timm_vit.eval()).to(device)
    for net, data in ((classifier, tokens), (vit, images), (converted, images)):
        with torch.no_grad():
            readout = depth_readout(net, [0.0, 1.0, net.encoder.t1], data)
            output = net(data)
        assert readout.logits.shape == (3, *output.shape)
        assert max_diff(readout.logits[-1], output) == 0.0 and max_diff(readout.final_logits, output) == 0.0
        assert max_diff(readout.logits[0], output) > 1e-4
        assert readout.kl[-1].item() == 0.0 and readout.agreement[-1].item() == 1.0


def test_unsupported_models_are_refused_naming_the_supported_ones(device):
    net = Seq2Seq(20, dim=16, num_heads=2).to(device)
    with pytest.raises(TypeError, match="no readout for Seq2Seq: the supported models are .*CausalLM.*TextClassifier"):
        depth_readout(net, [0.0], torch.ones(1, 3, dtype=torch.long, device=device))

    class Tagger(nn.Module):  # a model kind of one's own, registered with its head
        def __init__(self) -> None:
            super().__init__()
            self.inner = ViT(img_size=8, patch_size=4, num_classes=5, dim=16, depth=2, num_heads=2)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.inner(images)

    tagger = Tagger().eval().to(device)
    with pytest.raises(TypeError, match="no readout for Tagger"):
        readout_for(tagger)
    register_readout(Tagger, lambda model, x, inputs: model.inner.forward_head(model.inner.norm(x)))
    images = torch.randn(2, 3, 8, 8, device=device)
    with torch.no_grad():
        assert max_diff(depth_readout(tagger, [2.0], images).logits[0], tagger(images)) == 0.0
    with pytest.raises(TypeError, match="nn.Module class"):
        register_readout(int, lambda model, x, inputs: x)  # type: ignore[arg-type]
