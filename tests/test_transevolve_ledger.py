"""The TransEvolve ledger's timings (paper_repro/claims/transevolve.toml, Table 4 and §8): each is judged against
the paper's own baseline, names it and the recorded file it reads, has a paper value, and a cell that prints no
speed-up (parity) is never "agrees"."""

from __future__ import annotations

import re

import pytest

claims = pytest.importorskip("paper_repro.claims", reason="the suite runs beside paper_repro/")
from paper_repro.claims import _ledger, _report, _rule  # noqa: E402
from paper_repro.claims import _transevolve as te  # noqa: E402

pytestmark = pytest.mark.cpu_only("reproduction bookkeeping on recorded timings, no device computation")

SEED = _ledger.ROOT.parent / "shared" / "seeds" / "transevolve-dutta2021.txt"
RATIO = re.compile(r"(\d+(?:\.\d+)?)×")


@pytest.fixture(scope="module")
def ledger():
    return claims.load("transevolve")


@pytest.fixture(scope="module")
def timings(ledger):
    """The speed claims: flagged as timings, or judged on the benchmark's step times (which must be flagged)."""
    return [
        c for c in ledger.claims if c.measure == "timing" or c.unit == "ms per step" or "_faster_than_" in c.samples
    ]


def _paper_ratio(claim) -> float:
    """The speed-up the paper's cells print for b over a: one ratio over the Transformer, or two variants' ratio."""
    ratios = [float(r) for r in RATIO.findall(claim.paper)]
    assert len(ratios) in (1, 2), claim.paper
    return ratios[0] if len(ratios) == 1 else ratios[0] / ratios[1]


def _parity(claim) -> bool:
    return abs(_paper_ratio(claim) - 1.0) < 0.05


def test_every_speed_claim_is_a_timing(ledger, timings):
    """Every claim judged on the benchmark's step times is flagged, and every samples function is used once."""
    assert all(c.measure == "timing" for c in timings) and len(timings) >= 40
    names = sorted(te.speed_samples_name(*pair) for pair in te.SPEED_COMPARISONS)
    assert names == sorted(c.samples for c in timings)  # no sample function without its claim, nor the reverse


def test_every_timing_names_the_papers_baseline_and_the_file_it_reads(ledger, timings):
    for claim in timings:
        assert claim.kind == "qualitative" and claim.baseline and claim.stored == str(te.SPEED_RESULTS)
        results = _ledger.ROOT / claim.stored
        assert results.is_file() or not results.parent.is_dir()  # (the installed-wheel session has no results/)
        assert _report.source(ledger, claim).startswith(f"recorded in `{claim.stored}` by `{te.SPEED_COMMAND}`")
        assert _report.column(claim).startswith("timing ")  # counted apart from the accuracy verdicts
        if claim.baseline.startswith("the Transformer"):  # Table 4: our rendering of the paper's Transformer
            assert te.SPEED_BASELINE in (claim.a, claim.b) and "materialised" in claim.baseline
            assert "over the Transformer" in claim.paper and "Table 4" in claim.where
        else:  # §8: one variant against another, named as the paper names it
            assert claim.baseline.startswith("TransEvolve-")
            assert f"{claim.baseline.removeprefix('TransEvolve-')} auto" in (claim.a, claim.b)


def test_no_timing_without_a_paper_value(timings):
    """A comparison the paper did not time (fused SDPA kernels) is our measurement: it stays in the benchmark."""
    for claim in timings:
        assert RATIO.search(claim.paper), f"{claim.id}: no ratio printed by the paper in {claim.paper!r}"
        assert "not timed" not in claim.paper and "standard" not in (claim.a, claim.b)


def _skip_without_the_recorded_times() -> None:
    if not (_ledger.ROOT / te.SPEED_RESULTS).is_file():
        pytest.skip(f"{te.SPEED_RESULTS} is not beside this suite")


def test_a_parity_cell_is_never_agrees(ledger, timings):
    """A cell of about 1.0× (or two equal cells) prints no speed-up: the claim names the side its measurement lies
    on, so a difference beyond two standard errors either way is "disagrees", and none is "agrees"."""
    parity = [c for c in timings if _parity(c)]
    assert {c.id for c in parity} >= {"t4-speed-fullff-2-3k", "t4-speed-fullff-2-fidelity-3k"}
    _skip_without_the_recorded_times()
    for claim in parity:
        a, b = getattr(te, claim.samples)()
        judged = _rule.two_standard_errors(a, b)
        assert judged.difference <= 0, f"{claim.id}: the claim is not on the side its measurement lies on"
        assert judged.verdict != "agrees" and claim.verdict != "agrees", claim.id
        assert "no faster than" in claim.claim or "no slower than" in claim.claim
        no_faster = (claim.a, claim.b, int(claim.samples.rsplit("_", 1)[1])) in te.PARITY_NO_FASTER
        assert no_faster == ("no faster than" in claim.claim)
    for claim in ledger.claims:  # and no other claim of the ledger with a parity cell
        if RATIO.search(claim.paper) and len(RATIO.findall(claim.paper)) <= 2 and _parity(claim):
            assert claim.verdict != "agrees", claim.id


def test_the_speed_ups_against_a_parity_cell_disagree(ledger):
    """The audit's case: our auto path seconds faster per step than the Transformer where Table 4 prints 1.0×."""
    claim = next(c for c in ledger.claims if c.id == "t4-speed-fullff-2-3k")
    assert claim.paper == "1.0× over the Transformer" and (claim.a, claim.b) == ("fullFF-2 auto", "materialised")
    _skip_without_the_recorded_times()
    outcome = _ledger.recompute(ledger, claim)
    assert outcome.verdict == claim.verdict == "disagrees"
    a, b = getattr(te, claim.samples)()
    assert sum(b) / len(b) - sum(a) / len(a) > 1000  # ours is faster by more than a second per step


def test_other_timings_claim_a_direction_without_a_magnitude(timings):
    for claim in timings:
        if not _parity(claim):
            assert " faster than " in claim.claim and not RATIO.search(claim.claim), claim.id
            assert claim.unit == "ms per step" and "ms per step" in claim.ours


@pytest.mark.skipif(not SEED.is_file(), reason="the seed paper text is not beside the repository")
def test_table4_speed_cells_are_the_papers(timings):
    """Each Table 4 timing quotes the variant's cell of the seed text's speed column at its length."""
    text = SEED.read_text(encoding="utf-8")
    printed = {}
    for variant in te.TRANSEVOLVE_VARIANTS:
        row = re.search(rf"^TransEvolve-{variant} [\d.]+ [\d.]+ ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+)$", text, re.M)
        assert row, variant
        printed.update({(variant, n): float(r) for n, r in zip(te.SPEED_LENGTHS, row.groups())})
    for claim in timings:
        n = int(claim.samples.rsplit("_", 1)[1])
        named = {x.rsplit(" ", 1)[0] for x in (claim.a, claim.b)} - {te.SPEED_BASELINE}
        if claim.baseline.startswith("TransEvolve-"):  # §8: the two variants' cells
            cells = re.fullmatch(r"(\S+) ([\d.]+)× vs (\S+) ([\d.]+)× over the Transformer", claim.paper)
            assert cells and {cells[1], cells[3]} == named, claim.id
            assert float(cells[2]) == printed[(cells[1], n)] and float(cells[4]) == printed[(cells[3], n)], claim.id
        else:  # Table 4: the variant's cell, over the Transformer
            (variant,) = named
            assert claim.paper == f"{printed[(variant, n)]}× over the Transformer", claim.id
