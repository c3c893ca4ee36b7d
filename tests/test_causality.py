"""Which solves of a causal decoder are exactly causal (neuralode_tf.numerics.causality).

Fixed-grid solves: a later target token changes earlier logits by exactly 0.0. Adaptive solves:
step-size control reads every position, so it does not, and ``solve`` warns; decoding each prefix
on its own (``causal_prefixes=True``) is exactly causal again and equals decoding bit for bit.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.models import Seq2Seq, decoder_field, transformer_field
from neuralode_tf.numerics import CausalityWarning, is_causal

BOS, EOS, VOCAB = 1, 2, 12
ADAPTIVE = {
    "dopri5 (torchdiffeq)": dict(method="dopri5", rtol=1e-5, atol=1e-5),
    "tsit5 (torchode)": dict(method="tsit5", rtol=1e-5, atol=1e-5),
}
FIXED = {"lie_trotter": dict(method="lie_trotter"), "rk4": dict(method="rk4", steps=3)}


def _model(field: str, device: torch.device, **solve_options) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(VOCAB, dim=16, num_heads=2, field=field, **solve_options).eval().to(device)


def _future_leak(model: Seq2Seq, device: torch.device, **forward_kwargs) -> float:
    """Largest change of the logits at positions 0..2 when the tokens after position 2 change."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, VOCAB, (2, 5), generator=g).to(device)
    tgt_in = torch.randint(3, VOCAB, (2, 6), generator=g).to(device)
    changed = tgt_in.clone()
    changed[:, 3:] = torch.randint(3, VOCAB, (2, 3), generator=g).to(device)
    with torch.no_grad():
        before = model(src, tgt_in, **forward_kwargs)[:, :3]
        after = model(src, changed, **forward_kwargs)[:, :3]
    return (before - after).abs().max().item()


@pytest.mark.parametrize("field", ["split", "evolving"])
@pytest.mark.parametrize("settings", list(FIXED))
def test_fixed_grid_decoders_are_exactly_causal(field, settings, device):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalityWarning)
        assert _future_leak(_model(field, device, **FIXED[settings]), device) == 0.0


@pytest.mark.parametrize("settings", list(ADAPTIVE))
def test_adaptive_decoder_solves_leak_the_future_and_warn(settings, device):
    model = _model("split", device, **ADAPTIVE[settings])
    with pytest.warns(CausalityWarning, match="adaptive"):
        leak = _future_leak(model, device)
    # The leak is real, and of the order of the tolerance, not of the logits.
    assert 0.0 < leak < 1e-2


@pytest.mark.parametrize("settings", list(ADAPTIVE))
def test_prefix_solves_are_exactly_causal_and_equal_decoding(settings, device):
    model = _model("split", device, **ADAPTIVE[settings])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalityWarning)
        assert _future_leak(model, device, causal_prefixes=True) == 0.0
        src = torch.randint(3, VOCAB, (2, 5), device=device)
        tokens = model.greedy_decode(src, max_len=4, bos=BOS, eos=EOS)
        tgt_in = torch.cat([torch.full_like(tokens[:, :1], BOS), tokens[:, :-1]], dim=1)
        with torch.no_grad():
            prefixes = model(src, tgt_in, causal_prefixes=True)
            memory, src_pad = model.encode(src)
    # Decoding by hand: each prefix solved alone (adaptive, so solve warns), its last position kept.
    with torch.no_grad(), pytest.warns(CausalityWarning):
        step_by_step = [model.decode(tgt_in[:, : i + 1], memory, src_pad)[:, -1] for i in range(tgt_in.shape[1])]
    assert (prefixes - torch.stack(step_by_step, dim=1)).abs().max().item() == 0.0


def test_fixed_grid_prefix_solves_match_teacher_forcing(device):
    """On a fixed grid, one solve and the prefix solves compute the same function (up to the float
    rounding of different sequence lengths in the matrix products)."""
    model = _model("split", device, method="rk4", steps=2)
    src, tgt_in = torch.randint(3, VOCAB, (2, 5), device=device), torch.randint(3, VOCAB, (2, 6), device=device)
    with torch.no_grad():
        gap = (model(src, tgt_in) - model(src, tgt_in, causal_prefixes=True)).abs().max().item()
    assert gap < 1e-5


def test_encoders_do_not_warn_and_causal_fields_are_detected(device):
    encoder = transformer_field(16, 2, 2).to(device)
    decoder = decoder_field(16, 2, 2).to(device)
    assert not is_causal(encoder) and is_causal(decoder) and is_causal(decoder_field(16, 2, 2, evolving={}))
    assert not is_causal(lambda t, y: -y)
    x = torch.randn(2, 5, 16, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalityWarning)
        solve(encoder, x, [0.0, 2.0], method="dopri5", rtol=1e-4, atol=1e-4)
        ContinuousDepth(decoder, t1=2.0, method="rk4", steps=2)(x, memory=torch.randn(2, 3, 16, device=device))
    with pytest.warns(CausalityWarning):
        ContinuousDepth(decoder, t1=2.0, method="dopri5", rtol=1e-4, atol=1e-4)(
            x, memory=torch.randn(2, 3, 16, device=device)
        )
