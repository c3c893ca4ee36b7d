"""The OT-Transformer ledger (paper_repro/claims/ot_transformer.toml): each claim is judged on the configuration it
names, matches that rest on a choice of ours say so, and paper values not printed in the seed text say where they
come from."""

from __future__ import annotations

import re

import pytest

from tests._recordings import recorded_rows

claims = pytest.importorskip("paper_repro.claims", reason="the suite runs beside paper_repro/")
from paper_repro.claims import _ledger  # noqa: E402

pytestmark = pytest.mark.cpu_only("reproduction bookkeeping and parameter counts, no device computation")

SEED = _ledger.ROOT.parent / "shared" / "seeds" / "ot-transformer-kan2025.txt"


@pytest.fixture(scope="module")
def ledger():
    return claims.load("ot_transformer")


def _claim(ledger, claim_id: str):
    return next(c for c in ledger.claims if c.id == claim_id)


def _preset(recording) -> str:
    """The preset that a recording's ``neuralode-tf compare PRESET ...`` command ran."""
    words = recording.command.split()
    return words[words.index("compare") + 1]


def test_the_dagger_row_is_judged_on_runs_with_the_papers_slight_cost(ledger):
    from neuralode_tf.train import OT_VARIANTS

    claim = _claim(ledger, "t4-baseline-beats-slightly-regularized-ot")
    recording = ledger.recordings[claim.recording]
    preset = _preset(recording)
    slight = OT_VARIANTS[preset][claim.b]
    # Table 4's †: the "unregularised" OT-Transformer trained with λ = 0.01; the paper preset ot_imdb has it too
    assert slight["transport_cost"] == 0.01 == OT_VARIANTS["ot_imdb"]["ot_slight"]["transport_cost"]
    assert {k: v for k, v in slight.items() if k != "transport_cost"} == {
        k: v for k, v in OT_VARIANTS[preset]["ot"].items() if k != "transport_cost"
    }  # otherwise the OT-Transformer of the preset
    runs = [row for row in recorded_rows(recording) if row["variant"] == claim.b]
    assert sorted(row["seed"] for row in runs) == [0, 1, 2]


def test_the_divergence_notes_state_the_slight_cost_runs_as_recorded(ledger):
    """The notes of §5.3's two divergence claims say how many λ = 0.01 runs diverged; the recording must agree."""
    for claim_id, variant in (
        ("s53-unregularized-ot-diverges", "ot_slight"),
        ("s53-unregularized-node-diverges", "node_slight"),
    ):
        claim = _claim(ledger, claim_id)
        runs = [row for row in recorded_rows(ledger.recordings[claim.recording]) if row["variant"] == variant]
        assert len(runs) == 3
        assert f"{variant}: {sum(row['non_finite'] for row in runs)} of {len(runs)} runs non-finite" in claim.note


def test_stated_choices_carry_their_choice_and_its_numbers(ledger):
    from neuralode_tf.train import OT_VARIANTS, PRESETS
    from paper_repro.claims import _ot_transformer as ot

    chosen = {c.id: c for c in ledger.claims if c.basis}
    assert {"t1-parameters", "t2-parameters"} <= set(chosen)
    for claim in chosen.values():
        assert claim.basis == "stated choice" and claim.kind == "exact" and len(claim.choice) > 40
    # Table 2: the unused feed-forward is added to the baseline only
    assert f"{ot.UNUSED_FEED_FORWARD:,}" in chosen["t2-parameters"].choice
    # Table 1: without the inducing points; with them the baseline would be the count the choice names
    data = ot.paper_shapes()["ot_modelnet40"]
    model = PRESETS["ot_modelnet40"].build_model(data, OT_VARIANTS["ot_modelnet40"]["baseline"])
    with_inducing = sum(p.numel() for p in model.encoder.parameters())
    assert f"{with_inducing / 1e6:.2f}M" in chosen["t1-parameters"].choice
    assert f"{with_inducing / 1e6:.2f}M" != chosen["t1-parameters"].paper.split(" / ")[0]


def test_every_text_generation_entry_names_its_source(ledger):
    entries = [c for c in ledger.claims if c.id.startswith("tg-")]
    assert len(entries) == 5
    for claim in entries:
        assert claim.paper_source, claim.id
        assert "2505.13499" in claim.paper_source or claim.paper_source.startswith("our derivation")


@pytest.mark.skipif(not SEED.is_file(), reason="the seed paper text is not beside the repository")
def test_every_number_of_an_unlabelled_paper_value_is_printed_in_the_seed():
    text = SEED.read_text(encoding="utf-8")
    for claim in claims.load("ot_transformer").claims:
        if claim.paper_source:
            continue
        for number in re.findall(r"\d+(?:\.\d+)?[kM%]?", claim.paper):
            printed = re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text)  # "46%" is not in "0.46%"
            assert printed, f"{claim.id}: {number} is not in the seed text; label it with paper_source"
    assert "nanoGPT" not in text and "Shakespeare" not in text  # the tg-* entries' paper is a later version


def test_figure_2_and_figure_4_are_in_the_ledger(ledger):
    figure2 = [c for c in ledger.claims if c.where.startswith("Figure 2") and c.metric == "train_loss"]
    assert [(c.a, c.b, c.higher_is_better) for c in figure2] == [("ot", "baseline", False)]
    assert ledger.recordings[figure2[0].recording].stand_in == "shapes3d"  # the point-cloud experiment's stand-in
    figure4 = [c for c in ledger.claims if c.where.startswith("Figure 4")]
    assert figure4 and all(c.kind == "not here" and "ot_catsdogs" in c.command for c in figure4)


def test_the_learning_curve_claims_are_judged_on_recorded_curves(ledger):
    """Figures 2, 3 and 5 on the curves: the test-split claims read test curves that the recorded runs evaluated after
    every epoch (``eval_every=1``), whose last point is the run's final accuracy; Figure 5 (§5.3) compares the †
    model, the paper's "unregularised" OT-Transformer on IMDb."""
    from neuralode_tf.train import PRESETS

    by_id = {c.id: c for c in ledger.claims}
    assert by_id["fig2-curves-end-ot-above-baseline"].metric == "curve.test_accuracy.last3"
    assert by_id["fig3-cost-raises-training-accuracy"].metric == "curve.accuracy"
    fig5 = by_id["fig5-cost-lowers-test-loss"]
    assert (fig5.metric, fig5.higher_is_better) == ("curve.test_loss", False)
    assert fig5.b == by_id["fig5-cost-raises-training-loss"].b == "ot_slight"
    for claim in (c for c in ledger.claims if c.metric.startswith("curve.test_")):
        recording = ledger.recordings[claim.recording]
        epochs = PRESETS[_preset(recording)].config.epochs
        assert f"the stand-in's {epochs} epochs" in claim.note
        rows = recorded_rows(recording)
        for variant in (claim.a, claim.b):
            runs = [row for row in rows if row["variant"] == variant]
            assert len(runs) == 3
            for row in runs:
                assert len(row["curve"]["test_accuracy"]) == len(row["curve"]["test_loss"]) == epochs
                assert row["curve"]["test_accuracy"][-1] == row["test_accuracy"]
