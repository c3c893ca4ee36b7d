"""The reproductions' claims ledger (paper_repro/claims): the verdict rule, ledger validation and rewriting."""

from __future__ import annotations

import json

import pytest

claims = pytest.importorskip("paper_repro.claims", reason="the suite runs beside paper_repro/")
from paper_repro.claims import _ledger  # noqa: E402
from paper_repro.claims.__main__ import rewrite  # noqa: E402

pytestmark = pytest.mark.cpu_only("reproduction bookkeeping, no tensors")


def test_two_standard_errors_on_hand_computed_numbers():
    # a: mean 2, variance 1; b: mean 0, variance 0 -> se = sqrt(1/3) = 0.577, 2 se = 1.155
    judged = claims.two_standard_errors([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert judged.verdict == "agrees" and judged.difference == 2.0 and judged.seeds == (3, 3)
    assert judged.standard_error == pytest.approx(3**-0.5, rel=1e-15)
    assert claims.two_standard_errors([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]).verdict == "disagrees"
    assert claims.two_standard_errors([1.0, 2.0, 3.0], [0.5, 1.5, 2.5]).verdict == "inconclusive (within noise)"
    # lower is better (a loss): the same numbers judged the other way
    assert claims.two_standard_errors([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], higher_is_better=False).verdict == "agrees"


def test_two_standard_errors_at_the_boundary_is_inconclusive():
    # difference exactly 2 se: a = (0, 2, 4) has variance 4, se = sqrt(4/3); shift b so that diff = 2 se
    se = (4 / 3) ** 0.5
    judged = claims.two_standard_errors([0.0, 2.0, 4.0], [2 - 2 * se] * 3)
    assert judged.difference == pytest.approx(2 * judged.standard_error, rel=1e-12)
    assert claims.two_standard_errors([0.0, 2.0, 4.0], [2 - 2.01 * se] * 3).verdict == "agrees"


def test_two_standard_errors_refuses_too_few_seeds_and_nan():
    with pytest.raises(ValueError, match="at least 3 seeds"):
        claims.two_standard_errors([1.0, 2.0], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="non-finite"):
        claims.two_standard_errors([1.0, 2.0, float("nan")], [0.0, 0.0, 0.0])


def test_exact_verdict_compares_the_printed_text():
    assert claims.exact_verdict("2.49M", "2.49M") == "matched"
    assert claims.exact_verdict("2.49M", "2.50M") == "differs"
    assert claims.exact_verdict("33M", "34M") == "differs"


def _entry(**changes) -> dict:
    entry = dict(id="x", where="Table 1", claim="a beats b", paper="1 vs 0", ours="", verdict="agrees")
    entry.update({"class": "qualitative", "recording": "r", "a": "ot", "b": "baseline"}, **changes)
    return entry


RECORDING = {"r": dict(path="r.json", stand_in="digits", date="2026-11-24", command="neuralode-tf compare p")}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"class": "approximate"}, "class must be one of"),
        ({"verdict": "matched"}, "verdict 'matched' is not one of"),
        ({"recording": "missing"}, r"no \[recordings.missing\]"),
        ({"recording": "", "samples": ""}, "either `recording` or `samples`"),
        ({"class": "exact", "verdict": "matched"}, r"missing \['compute'\]"),
        ({"class": "not here", "verdict": "not here"}, r"missing \['command'\]"),
        ({"basis": "stated choice", "choice": "fitted"}, 'basis is "stated choice" on an exact claim'),
        ({"class": "exact", "verdict": "matched", "compute": "f", "basis": "stated choice"}, "takes both"),
        ({"measure": "speed"}, 'measure is "accuracy" or "timing"'),
        ({"measure": "timing"}, "names the paper's `baseline`"),
        ({"measure": "timing", "baseline": "T", "recording": "", "samples": "f"}, "the recorded file they read"),
    ],
)
def test_malformed_entries_are_refused_with_their_id(changes, message):
    with pytest.raises(claims.LedgerError, match=message):
        _ledger.parse("paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": [_entry(**changes)]})
    with pytest.raises(claims.LedgerError, match="duplicate id"):
        _ledger.parse("paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": [_entry()] * 2})


def test_a_qualitative_claim_is_judged_from_rows_by_the_rule():
    ledger = _ledger.parse("paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": [_entry()]})
    rows = [
        *(
            {"variant": "ot", "seed": s, "test_accuracy": a, "non_finite": False}
            for s, a in enumerate((0.9, 0.91, 0.92))
        ),
        *({"variant": "baseline", "seed": s, "test_accuracy": 0.8, "non_finite": False} for s in range(3)),
        {"variant": "baseline", "seed": 3, "test_accuracy": None, "non_finite": True},  # left out of accuracies
    ]
    outcome = claims.recompute(ledger, ledger.claims[0], rows)
    assert outcome == claims.Outcome("digits: +11.0 ± 0.6 points (se; 3 vs 3 seeds)", "agrees")
    diverged = _ledger.parse(
        "paper",
        {
            "paper": "P",
            "reference": "R",
            "recordings": RECORDING,
            "claim": [_entry(a="baseline", b="ot", metric="non_finite")],
        },
    )
    assert claims.recompute(diverged, diverged.claims[0], rows).ours.startswith("digits: +0.25 ± 0.25 of runs")


def test_curve_metrics_read_the_learning_curves_last_epochs():
    """``curve.KEY`` is a run's last epoch, ``curve.KEY.lastN`` the mean of its last N; accuracies in points."""
    curves = {
        "ot": [
            ([0.5, 0.7, 0.8], [0.9, 0.6, 0.5]),
            ([0.5, 0.8, 0.8], [0.9, 0.5, 0.4]),
            ([0.6, 0.8, 0.9], [0.8, 0.5, 0.4]),
        ],
        "baseline": [([0.5, 0.6, 0.6], [0.9, 0.7, 0.7])] * 3,
    }
    rows = [
        {"variant": v, "seed": s, "test_accuracy": acc[-1], "non_finite": False}
        | {"curve": {"test_accuracy": acc, "test_loss": loss}}
        for v, runs in curves.items()
        for s, (acc, loss) in enumerate(runs)
    ]

    def judged(**changes) -> claims.Outcome:
        ledger = _ledger.parse(
            "paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": [_entry(**changes)]}
        )
        return claims.recompute(ledger, ledger.claims[0], rows)

    # last epoch: (0.8, 0.8, 0.9) against 0.6; the mean of the last two: (0.75, 0.8, 0.85) against 0.6
    assert judged(metric="curve.test_accuracy").ours == "digits: +23.3 ± 3.3 points of test accuracy (se; 3 vs 3 seeds)"
    last2 = judged(metric="curve.test_accuracy.last2")
    assert last2.ours == "digits: +20.0 ± 2.9 points of test accuracy, mean of the last 2 epochs (se; 3 vs 3 seeds)"
    assert last2.verdict == "agrees"
    loss = judged(metric="curve.test_loss", higher_is_better=False)
    assert loss == claims.Outcome("digits: +0.267 ± 0.033 test loss (se; 3 vs 3 seeds)", "agrees")
    for metric in ("curve.nfe", "curve.test_loss.first2", "curve.test_loss.last0", "curve.loss.last2.x"):
        with pytest.raises(claims.LedgerError, match="unknown metric"):
            judged(metric=metric)
    with pytest.raises(claims.LedgerError, match="last 4 epoch"):
        judged(metric="curve.test_accuracy.last4")
    rows[0]["curve"]["test_loss"][-1] = None  # an epoch not evaluated
    with pytest.raises(claims.LedgerError, match="rerun it with --set eval_every=1"):
        judged(metric="curve.test_loss")
    del rows[0]["curve"]["test_accuracy"]  # a recording from before eval_every
    with pytest.raises(claims.LedgerError, match="no test_accuracy curve"):
        judged(metric="curve.test_accuracy")


def test_live_rows_replace_the_recording_and_changes_are_listed():
    ledger = _ledger.parse("paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": [_entry()]})
    rows = [
        {"variant": variant, "seed": s, "test_accuracy": accuracy + s / 100, "non_finite": False}
        for variant, accuracy in (("ot", 0.5), ("baseline", 0.9))
        for s in range(3)
    ]
    outcomes = claims.recompute_all(ledger, {"r": rows})  # "r" is never read from its (missing) file
    assert outcomes == [claims.Outcome("digits: -40.0 ± 0.8 points (se; 3 vs 3 seeds)", "disagrees")]
    assert claims.changed(ledger, outcomes) == ["x"]  # the stored entry says "" / agrees
    assert claims.tally(ledger, outcomes) == "1 claims: 1 qualitative: disagrees"


def test_every_ledger_parses_and_every_verdict_is_one_the_rule_gives():
    for key in claims.PAPERS:
        ledger = claims.load(key)
        assert ledger.claims, key
        assert all(claim.verdict in claims.VERDICTS[claim.kind] for claim in ledger.claims)


def test_every_compute_and_samples_name_is_a_function_of_its_paper_module():
    """CONTRIBUTING.md: an exact claim's ``compute`` (and a qualitative claim's ``samples``) names a function of
    ``paper_repro/claims/_<paper>.py``."""
    import importlib

    for key in claims.PAPERS:
        module = importlib.import_module(f"paper_repro.claims._{key}")
        for claim in claims.load(key).claims:
            for name in (claim.compute, claim.samples):
                if name:
                    assert callable(getattr(module, name, None)), f"{key}: {claim.id} names {name!r}"


def test_rewrite_replaces_only_ours_and_verdict(tmp_path):
    path = tmp_path / "ledger.toml"
    text = (
        'paper = "P"\n\n[[claim]]\nid = "a"\nnote = "ours = kept"\nours = ""\nverdict = "differs"\n\n'
        '[[claim]]\nid = "b"\nours = "1"\nverdict = "matched"\n'
    )
    path.write_text(text)
    rewrite(path, {"a": claims.Outcome('2 "quoted" ± 1', "matched"), "b": claims.Outcome("1", "matched")})
    assert path.read_text() == text.replace(
        'ours = ""\nverdict = "differs"', 'ours = "2 \\"quoted\\" ± 1"\nverdict = "matched"'
    )


def test_depth_dynamics_judges_the_best_candidate_against_the_margin_with_the_paired_standard_error(
    tmp_path, monkeypatch
):
    """``d + margin`` against zeros: the rule's standard error is then the paired ``sd(d) / sqrt(n)``."""
    from paper_repro.claims import _depth_dynamics

    tests = {
        "euler, 3 steps": {"family": "fixed grid (fewer steps)", "differences": [-1.0, -2.0, -3.0]},
        "drop last 1": {"family": "drop last layers", "differences": [5.0, 5.0, 5.0]},  # no solver: never judged
        "dopri5 per sample, tol 0.1": {"family": "dopri5 (per sample)", "differences": [-0.2, -0.4, -0.3]},
        "exit at layer, p >= 0.9": {"family": "early exit (confident)", "differences": [0.0, 0.1, -0.1]},
    }
    record = {"margin": 0.5, "models": {"vit_digits": {"tests": tests}}}
    monkeypatch.setattr(_depth_dynamics, "ADAPTIVE", tmp_path / "adaptive.json")
    (tmp_path / "adaptive.json").write_text(json.dumps(record))
    _depth_dynamics._record.cache_clear()
    try:
        a, b = _depth_dynamics.vit_digits_solver()
        assert a == pytest.approx([0.3, 0.1, 0.2]) and b == [0.0] * 3  # the per-sample dopri5 point
        judged = claims.two_standard_errors(a, b)
        assert judged.standard_error == pytest.approx(0.1 / 3**0.5) and judged.verdict == "agrees"
        assert _depth_dynamics.vit_digits_early_exit() == ([0.5, 0.6, 0.4], [0.0] * 3)
        with pytest.raises(claims.LedgerError, match="no model 'nanogpt_tweets_char'"):
            _depth_dynamics.nanogpt_tweets_char_solver()
    finally:
        _depth_dynamics._record.cache_clear()


def test_a_tie_without_spread_disagrees_and_with_spread_is_noise():
    """0/3 against 0/3 diverged runs: no noise hides an effect there, so "a diverges more than b" disagrees."""
    assert claims.two_standard_errors([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]).verdict == "disagrees"
    assert claims.two_standard_errors([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], higher_is_better=False).verdict == "disagrees"
    assert claims.two_standard_errors([0.0, 1.0, 2.0], [1.0, 1.0, 1.0]).verdict == "inconclusive (within noise)"
    assert claims.two_standard_errors([1e-12, 0.0, 0.0], [0.0, 0.0, 0.0]).verdict == "inconclusive (within noise)"


def test_the_tally_counts_stated_choices_and_timings_apart():
    """A stated choice's match and a timing's verdict fall in their own README columns, and the table says so."""
    from paper_repro.claims import _report

    entries = [
        dict(_entry(id="e1", verdict="matched"), **{"class": "exact", "compute": "f"}),
        dict(
            _entry(id="e2", verdict="matched"),
            **{"class": "exact", "compute": "f"},
            basis="stated choice",
            choice="a width fitted to the count",
        ),
        _entry(id="q1"),
        _entry(id="t1", measure="timing", baseline="the Transformer"),
        _entry(id="t2", measure="timing", baseline="the Transformer", verdict="disagrees", paper_source="arXiv v2"),
    ]
    ledger = _ledger.parse("paper", {"paper": "P", "reference": "R", "recordings": RECORDING, "claim": entries})
    counted = {label: n for label, n in _report.counts(ledger).items() if n}
    assert counted == {
        "exact matched": 1,
        "matched by a stated choice": 1,
        "agrees": 1,
        "timing agrees": 1,
        "timing disagrees": 1,
    }
    table = _report.table(ledger)
    assert "exact, by a stated choice: a width fitted to the count" in table
    assert "qualitative, timing against the Transformer" in table and "1 vs 0 (arXiv v2)" in table
