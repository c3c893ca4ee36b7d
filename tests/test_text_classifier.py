"""The text classifier front-end: sinusoidal positions, padding never changes the logits, and any field and solve
settings plug in."""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf.models import PAD, TextClassifier, transformer_field
from neuralode_tf.models.frontends.text import sinusoidal_positions
from tests._conditioned import padding_mask


def test_sinusoidal_positions_follow_vaswani(device):
    pe = sinusoidal_positions(7, 6, device=device)
    assert pe.device.type == device.type
    p, i = 5, 2
    assert pe[p, 2 * i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 6)), abs=1e-6)
    assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 6)), abs=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "max"])
@pytest.mark.parametrize("solve", [dict(), dict(method="rk4", steps=3, num_sets=1)])
def test_text_classifier_padding_never_changes_the_logits(pooling, solve, device):
    model = TextClassifier(30, 3, dim=16, num_heads=2, depth=2, pooling=pooling, **solve).eval().to(device)
    lengths = [6, 4, 1]
    pad = padding_mask(lengths, 6, device)
    tokens = torch.randint(1, 30, (3, 6), device=device).masked_fill(pad, PAD)
    logits = model(tokens)  # the mask defaults to tokens == PAD
    longer = torch.cat([tokens, torch.zeros(3, 5, dtype=torch.long, device=device)], dim=1)
    longer_pad = torch.cat([pad, torch.ones(3, 5, dtype=torch.bool, device=device)], dim=1)
    longer[longer_pad] = torch.randint(1, 30, (int(longer_pad.sum()),), device=device)  # padded slots hold real ids
    assert (model(longer, longer_pad) - logits).abs().max().item() <= 1e-5
    for b, n in enumerate(lengths):
        assert (model(tokens[b : b + 1, :n]) - logits[b]).abs().max().item() <= 1e-5


def test_text_classifier_takes_any_field_and_solve_settings(device):
    field = transformer_field(16, 4, 2, num_sets=2)
    model = TextClassifier(20, 2, dim=16, depth=4, field=field, method="midpoint", steps=2, gradient="checkpoint")
    model.to(device)
    tokens = torch.randint(1, 20, (2, 5), device=device)
    model(tokens).sum().backward()
    assert model.encoder.field is field and model.encoder.stats.nfe == 4
    assert all(p.grad is not None for p in field.parameters())



def test_token_ids_outside_the_vocabulary_are_named(device):
    """An id outside ``[0, vocab_size)`` at a real position raises ``ValueError`` naming it, its (batch, token)
    position and the vocabulary size; at a padded position it is read as PAD, as any id there is."""
    model = TextClassifier(30, 3, dim=16, num_heads=2, depth=1).eval().to(device)
    tokens = torch.randint(1, 30, (2, 6), device=device)
    for bad_id in (30, -3):
        bad = tokens.clone()
        bad[1, 4] = bad_id
        with pytest.raises(ValueError, match=rf"tokens holds token id {bad_id} at \(batch 1, token 4\).*vocab_size=30"):
            model(bad)
        pad = torch.zeros(2, 6, dtype=torch.bool, device=device)
        pad[1, 4:] = True
        with torch.no_grad():
            assert torch.equal(model(bad, pad), model(tokens, pad))
