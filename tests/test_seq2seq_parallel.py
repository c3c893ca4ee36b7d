"""Seq2Seq with Zhong et al.'s (2022) parallel layers (eq. 4, Table 3) and with dropout: one Euler step per unit of
depth is the parallel encoder and decoder blocks written out by hand, the parallel decoder is causal, the split
reading is what it was, and dropout acts in training mode only, drawn as the discrete model draws it."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from neuralode_tf.models import Seq2Seq, decoder_field, transformer_field
from neuralode_tf.nn import AttentionBranch, MLPBranch

VOCAB = 30
SMALL = dict(dim=16, num_heads=2, encoder_depth=2, decoder_depth=3)


def _pairs(device: torch.device) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(3, VOCAB, (3, 7), generator=generator)
    tgt = torch.randint(3, VOCAB, (3, 6), generator=generator)
    src[0, 5:] = 0  # padding
    tgt[1, 4:] = 0
    return src.to(device), tgt.to(device)


def _by_hand(model: Seq2Seq, src: Tensor, tgt: Tensor) -> Tensor:
    """The parallel transformer written out: ``x + G(x) + F(x)`` per encoder layer, ``y + SA(y) + CA(y; m) + F(y)``
    per decoder layer (Zhong et al. 2022, eq. 4), every branch reading the same state."""
    src_pad, tgt_pad = src == 0, tgt == 0
    x = model.src_embed(src, src_pad)
    for layer in model.encoder.field.layers:
        attention, mlp = (part.branch for part in layer.parts)
        x = x + (attention(x, key_padding_mask=src_pad) + mlp(x))
    memory = model.encoder_norm(x)
    y = model.tgt_embed(tgt, tgt_pad)
    for layer in model.decoder.field.layers:
        self_attention, cross_attention, mlp = (part.branch for part in layer.parts)
        sa = self_attention(y, key_padding_mask=tgt_pad)
        ca = cross_attention(y, context=memory, key_padding_mask=src_pad)
        y = y + (sa + ca + mlp(y))
    return model.output(model.decoder_norm(y))


def test_unit_euler_steps_are_the_parallel_blocks(device):
    src, tgt = _pairs(device)
    torch.manual_seed(0)
    model = Seq2Seq(VOCAB, **SMALL, field="parallel").to(device, torch.float64).eval()
    assert model.encoder.solve_options["method"] == model.decoder.solve_options["method"] == "euler"
    assert len(model.encoder.field.layers) == 2 and len(model.decoder.field.layers) == 3
    with torch.no_grad():
        difference = (model(src, tgt) - _by_hand(model, src, tgt)).abs().max().item()
    assert difference <= 1e-12


def test_split_and_parallel_share_their_weights_and_split_is_unchanged(device):
    """The same seed builds the same parameters for both readings; the split model is still the model of
    ``transformer_field`` and ``decoder_field`` with Lie-Trotter unit steps, bit for bit."""
    src, tgt = _pairs(device)
    torch.manual_seed(0)
    split = Seq2Seq(VOCAB, **SMALL).to(device, torch.float64).eval()
    torch.manual_seed(0)
    parallel = Seq2Seq(VOCAB, **SMALL, field="parallel").to(device, torch.float64).eval()
    torch.manual_seed(0)
    fields = transformer_field(16, 2, 2), decoder_field(16, 2, 3)
    reference = Seq2Seq(VOCAB, **SMALL, field=fields, method="lie_trotter").to(device, torch.float64).eval()
    assert split.encoder.solve_options["method"] == split.decoder.solve_options["method"] == "lie_trotter"
    for other in (parallel, reference):
        assert split.state_dict().keys() == other.state_dict().keys()
        assert all(torch.equal(v, other.state_dict()[k]) for k, v in split.state_dict().items())
    with torch.no_grad():
        assert (split(src, tgt) - reference(src, tgt)).abs().max().item() == 0.0
        assert (split(src, tgt) - parallel(src, tgt)).abs().max().item() > 1e-3  # another model on the same weights


@pytest.mark.parametrize("solve", [dict(), dict(method="rk4", steps=2)])
def test_the_parallel_decoder_is_causal(solve, device):
    src, tgt = _pairs(device)
    tgt[1, 4:] = 5  # no padding: every position is read
    torch.manual_seed(0)
    model = Seq2Seq(VOCAB, **SMALL, field="parallel", **solve).to(device, torch.float64).eval()
    changed = tgt.clone()
    changed[:, 3:] = (tgt[:, 3:] + 7) % (VOCAB - 3) + 3
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    assert (before[:, :3] - after[:, :3]).abs().max().item() == 0.0
    assert (before[:, 3:] - after[:, 3:]).abs().max().item() > 1e-3


@pytest.mark.parametrize("field", ["split", "parallel"])
def test_dropout_acts_in_training_mode_only(field, device):
    src, tgt = _pairs(device)
    torch.manual_seed(0)
    model = Seq2Seq(VOCAB, **SMALL, field=field, dropout=0.3).to(device, torch.float64)
    branches = [m for m in model.modules() if isinstance(m, (AttentionBranch, MLPBranch))]
    assert len(branches) == 2 * 2 + 3 * 3 and {m.dropout for m in branches} == {0.3}
    torch.manual_seed(0)
    plain = Seq2Seq(VOCAB, **SMALL, field=field).to(device, torch.float64)
    with torch.no_grad():
        first, second = model(src, tgt), model(src, tgt)
        assert (first - second).abs().max().item() > 1e-3  # a fresh draw per forward pass
        model.eval(), plain.eval()
        assert (model(src, tgt) - plain(src, tgt)).abs().max().item() == 0.0


def test_unit_steps_draw_the_dropout_of_the_discrete_parallel_model(device):
    """In training mode each Euler step evaluates the branches once, in the block's order, so with the same random
    state the solve and the blocks by hand drop the same entries."""
    src, tgt = _pairs(device)
    torch.manual_seed(0)
    model = Seq2Seq(VOCAB, **SMALL, field="parallel", dropout=0.2).to(device, torch.float64).train()
    with torch.no_grad():
        torch.manual_seed(5)
        solved = model(src, tgt)
        torch.manual_seed(5)
        by_hand = _by_hand(model, src, tgt)
    assert (solved - by_hand).abs().max().item() <= 1e-12


def test_bad_arguments_are_refused(device):  # raised before anything is built on the device
    for dropout in (-0.1, 1.0, True, "0.1", None):
        with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\)"):
            Seq2Seq(VOCAB, **SMALL, field="parallel", dropout=dropout)
    with pytest.raises(ValueError, match="dropout= is for field='split' or 'parallel'"):
        Seq2Seq(VOCAB, **SMALL, field="evolving", dropout=0.1)
    fields = transformer_field(16, 2, 2, field="parallel"), decoder_field(16, 2, 3)
    with pytest.raises(ValueError, match=r"\['dropout'\] configure the model's own blocks"):
        Seq2Seq(VOCAB, **SMALL, field=fields, dropout=0.1)
    with pytest.raises(ValueError, match="unknown field 'composed'; valid: 'split', 'parallel', 'evolving'"):
        Seq2Seq(VOCAB, **SMALL, field="composed")
    assert Seq2Seq(VOCAB, **SMALL, field=fields).encoder.solve_options["method"] == "euler"  # by the kind of field


@pytest.mark.cpu_only("reads the recorded rows and the ledger; builds the preset's models on the CPU")
def test_the_table_3_claims_are_judged_on_the_recording_of_the_preset():
    from neuralode_tf.train.presets import PRESETS, VARIANTS, ZHONG_REVERSE_VARIANTS
    from paper_repro.claims import _ledger
    from tests._recordings import recorded_rows

    preset = "zhong_seq2seq_reverse"
    variants = VARIANTS[preset]
    assert variants is ZHONG_REVERSE_VARIANTS
    assert variants == {
        "sequential": dict(field="split", dropout=0.0),
        "sequential_dropout": dict(field="split", dropout=0.1),
        "parallel": dict(field="parallel", dropout=0.0),
        "parallel_dropout": dict(field="parallel", dropout=0.1),
    }
    ledger = _ledger.load("neural_ode_transformer")
    recording = ledger.recordings["translation"]
    rows = recorded_rows(recording)
    assert f"compare {preset} --seeds 0 1 2" in recording.command
    assert sorted((r["variant"], r["seed"]) for r in rows) == sorted((v, s) for v in variants for s in (0, 1, 2))
    assert not any(r["non_finite"] for r in rows) and all(r["val_loss"] > 0 for r in rows)
    data = PRESETS[preset].load_data({"num_train": 8, "num_test": 4})  # the recorded runs' vocabulary
    count = sum(p.numel() for p in PRESETS[preset].build_model(data, {}).parameters())
    assert {r["parameters"] for r in rows} == {count}  # one parameter count: the readings share their weights
    table_3 = [c for c in ledger.claims if c.id.startswith("t3-") and c.kind == "qualitative"]
    assert len(table_3) == 8 and all(c.recording == "translation" for c in table_3)
    for claim in table_3:
        outcome = _ledger.recompute(ledger, claim, rows)
        assert (outcome.ours, outcome.verdict) == (claim.ours, claim.verdict), claim.id
