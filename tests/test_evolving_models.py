"""Evolving attention in the front-ends: ViT, text classifier and Seq2Seq with ``field="evolving"``."""

import pytest
import torch

from neuralode_tf import solve
from neuralode_tf.models import TextClassifier, ViT, transformer_field
from neuralode_tf.models.frontends.seq2seq import Seq2Seq
from neuralode_tf.models.frontends.text import PAD
from neuralode_tf.nn import EvolvingAttentionBranch
from paper_repro.claims._evolving_costs import table5_models

torch.manual_seed(0)


def max_abs(a, b):
    return (a - b).abs().max().item()


def randint(low, high, size, device):
    """Drawn on the CPU, then moved: the same tokens on every device under test."""
    return torch.randint(low, high, size).to(device)


def _copy_vanilla_weights(evolving: torch.nn.Module, vanilla: torch.nn.Module) -> None:
    """Load the EA model's parameters (all but the convolutions) into the vanilla one, in order."""
    shared = [p for name, p in evolving.named_parameters() if ".conv." not in name]
    targets = list(vanilla.parameters())
    assert [p.shape for p in shared] == [p.shape for p in targets]
    with torch.no_grad():
        for target, source in zip(targets, shared):
            target.copy_(source)


def test_vit_with_zero_alpha_beta_is_the_vanilla_vit(device):
    ea = ViT(
        img_size=8,
        patch_size=4,
        in_chans=1,
        num_classes=3,
        dim=16,
        depth=3,
        num_heads=2,
        field="evolving",
        evolving={"alpha": 0.0, "beta": 0.0},
    ).to(device, torch.float64)
    vanilla = ViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, depth=3, num_heads=2)
    vanilla = vanilla.to(device, torch.float64)
    _copy_vanilla_weights(ea, vanilla)
    images = torch.randn(4, 1, 8, 8, dtype=torch.float64).to(device)
    assert max_abs(ea(images), vanilla(images)) <= 1e-12


def test_text_classifier_is_the_discrete_ea_transformer_with_padding(device):
    model = TextClassifier(
        50, 3, dim=16, num_heads=2, depth=3, field="evolving", evolving={"alpha": 0.4, "beta": 0.7, "kernel_size": 3}
    ).to(device, torch.float64)
    tokens = randint(1, 50, (3, 9), device)
    tokens[0, 6:] = PAD
    pad = tokens.eq(PAD)
    x = model.embed(tokens, pad)
    layers = model.encoder.field.layers
    for layer in layers:
        layer.attentions[0].bind(key_padding_mask=pad)
    logits = layers[0].attentions[0].initial_logits(x)
    for layer in layers:  # the EA-Transformer written out: eq. 4 logits carried from block to block
        attention, mlp = layer.attentions[0], layer.parts[1].field
        increment, logits = attention(x, logits)
        x = x + increment
        x = x + mlp(0.0, x)
    features = model.norm(x).masked_fill(pad[..., None], 0.0).sum(1) / (~pad).sum(1, keepdim=True)
    assert max_abs(model(tokens), model.head(features)) <= 1e-12


def test_text_classifier_padding_does_not_change_real_outputs(device):
    model = TextClassifier(50, 3, dim=16, num_heads=2, depth=2, field="evolving").to(device)
    tokens = randint(1, 50, (2, 7), device)
    padded = torch.cat([tokens, torch.full((2, 3), PAD, device=device)], dim=1)
    assert max_abs(model(tokens), model(padded)) <= 1e-5


def test_seq2seq_evolving_decoder_is_causal(device):
    model = Seq2Seq(
        30,
        dim=16,
        num_heads=2,
        encoder_depth=2,
        decoder_depth=2,
        field="evolving",
        evolving={"alpha": 0.5, "beta": 0.5},
    ).to(device)
    src = randint(3, 30, (2, 6), device)
    tgt = randint(3, 30, (2, 8), device)
    memory, src_pad = model.encode(src)
    logits = model.decode(tgt, memory, src_pad)
    changed = tgt.clone()
    changed[:, 5:] = randint(3, 30, (2, 3), device)
    assert max_abs(model.decode(changed, memory, src_pad)[:, :5], logits[:, :5]) == 0.0
    assert max_abs(model.decode(changed, memory, src_pad)[:, 5:], logits[:, 5:]) > 1e-3
    # Incremental decoding then agrees with teacher forcing: the greedy tokens score as their argmax.
    tokens = model.greedy_decode(src, bos=1, eos=30, max_len=5)  # eos outside the vocabulary: 5 tokens
    teacher = model.decode(torch.cat([torch.ones_like(tokens[:, :1]), tokens[:, :-1]], 1), memory, src_pad)
    assert torch.equal(teacher[..., 1:].argmax(-1) + 1, tokens)


def _settings(module: torch.nn.Module) -> list[tuple[float, float, int, bool, bool]]:
    """``(α, β, kernel size, causal, cross-attention)`` of every evolving branch of ``module``, in order."""
    return [
        (m.alpha, m.beta, m.kernel_size, m.causal, m.is_cross_attention)
        for m in module.modules()
        if isinstance(m, EvolvingAttentionBranch)
    ]


def _ends_with_other_maps(stack: torch.nn.Module, x: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens after ``depth`` blocks (bound stack), from the initial maps and from random ones."""
    start = stack.initial_state(x)
    other = (x, *(torch.randn(a.shape).to(a.device) for a in start[1:]))
    return tuple(
        solve(stack, y0, [0.0, float(depth)], method="lie_trotter", steps=depth).y1[0] for y0 in (start, other)
    )


def test_seq2seq_evolving_skips_are_in_the_encoder_only(device):
    # Wang et al. (2021, §4.3): convolutions in all three attentions, skip connections (α) in the encoder only.
    settings = {"alpha": 0.5, "beta": 0.1, "kernel_size": 3}
    model = Seq2Seq(30, dim=16, num_heads=2, encoder_depth=2, decoder_depth=2, field="evolving", evolving=settings)
    model = model.to(device)
    assert _settings(model.encoder) == [(0.5, 0.1, 3, False, False)] * 2
    assert _settings(model.decoder) == [(0.0, 0.1, 3, True, False), (0.0, 0.1, 3, True, True)] * 2
    src, tgt = randint(3, 30, (2, 6), device), randint(3, 30, (2, 8), device)
    memory, src_pad = model.encode(src)  # binds the source padding to the encoder
    model.decode(tgt, memory, src_pad)  # binds the memory to the decoder
    # α = 0: the decoder never reads the previous block's logits, so its carried maps change nothing ...
    decoder_ends = _ends_with_other_maps(model.decoder.field, torch.randn(2, 8, 16).to(device), 2)
    assert max_abs(*decoder_ends) == 0.0
    # ... while the encoder's α = 0.5 skip does read them.
    assert max_abs(*_ends_with_other_maps(model.encoder.field, torch.randn(2, 6, 16).to(device), 2)) > 1e-3


@pytest.mark.cpu_only("builds the paper-size Transformer-Lite and -Base (50M parameters each pair) on the CPU")
def test_table5_models_are_the_papers():
    # §4.3: 3x3 convolutions in encoder self-, decoder self- and encoder-decoder attention, β = 0.1;
    # α = 0.1 (Lite) or 0.5 (Base) in the encoder, none in the decoder; 6 + 6 layers, 8 heads.
    for name, (vanilla, evolving) in table5_models().items():
        alpha = {"Lite": 0.1, "Base": 0.5}[name]
        assert _settings(vanilla) == []
        assert _settings(evolving.encoder) == [(alpha, 0.1, 3, False, False)] * 6
        assert _settings(evolving.decoder) == [(0.0, 0.1, 3, True, False), (0.0, 0.1, 3, True, True)] * 6
        assert {m.num_heads for m in evolving.modules() if isinstance(m, EvolvingAttentionBranch)} == {8}


def test_transformer_field_evolving_and_bad_settings(device):
    field = transformer_field(16, 2, 2, field="evolving", evolving={"kernel_size": 5}).to(device)
    assert all(layer.attentions[0].conv.kernel_size == (5, 5) for layer in field.layers)
    x = torch.randn(2, 6, 16).to(device)
    assert field(torch.tensor(0.0), field.initial_state(x))[0].shape == x.shape
    with pytest.raises(ValueError, match="evolving= configures field='evolving'"):
        ViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, depth=2, evolving={"alpha": 0.1})
    with pytest.raises(ValueError, match="transport_cost"):
        ViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, depth=2, field="evolving", transport_cost=0.1)
    with pytest.raises(ValueError, match="unknown field .composed.; valid: .split., .parallel., .evolving. or a ready"):
        Seq2Seq(30, field="composed")
