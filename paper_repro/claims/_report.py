"""Ledgers as text: one paper's table, the per-paper verdict counts, and the README's copy of them."""

from __future__ import annotations

from collections.abc import Iterable

from . import _rule
from ._ledger import ROOT, Claim, Ledger, Outcome, changed, recompute_all

COLUMNS = (
    ("exact matched", "exact", _rule.MATCHED),
    ("matched by a stated choice", "exact", _rule.MATCHED),
    ("exact differs", "exact", _rule.DIFFERS),
    ("agrees", "qualitative", _rule.AGREES),
    ("disagrees", "qualitative", _rule.DISAGREES),
    ("inconclusive", "qualitative", _rule.INCONCLUSIVE),
    ("timing agrees", "qualitative", _rule.AGREES),
    ("timing disagrees", "qualitative", _rule.DISAGREES),
    ("timing inconclusive", "qualitative", _rule.INCONCLUSIVE),
    ("not here", "not here", _rule.NOT_HERE),
)
"""The README tally's columns: (label, class, verdict). A claim falls in one: a stated choice's match and a
timing's verdict count apart from the matches by construction and the accuracy verdicts."""
README = ROOT / "README.md"
_START, _END = "<!-- claims:start -->", "<!-- claims:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def source(ledger: Ledger, claim: Claim) -> str:
    """Where ours comes from: the code, a recording (with its date and command) or a command to run."""
    if claim.kind == "exact":
        return f"computed: `python -m paper_repro.claims {ledger.key}`"
    if claim.recording:
        recording = ledger.recordings[claim.recording]
        return f"recorded {recording.date}: `{recording.command}`"
    if claim.stored:
        return f"recorded in `{claim.stored}` by `{claim.command}`, read by `{claim.samples}`"
    if claim.samples:
        return f"computed from `{claim.samples}`" + (f": `{claim.command}`" if claim.command else "")
    return f"`{claim.command}`"


def _paper(claim: Claim) -> str:
    return f"{claim.paper} ({claim.paper_source})" if claim.paper_source else claim.paper


def _kind(claim: Claim) -> str:
    if claim.basis:
        return f"exact, by a stated choice: {claim.choice}"
    if claim.measure == "timing":
        return f"qualitative, timing against {claim.baseline}"
    return claim.kind


def table(ledger: Ledger, outcomes: Iterable[Outcome] | None = None) -> str:
    """The ledger as a markdown table (with ``outcomes``, the recomputed values instead of the stored)."""
    rows = ["| id | where | claim | paper | ours | class | verdict | source |", "|---" * 8 + "|"]
    outcomes = list(outcomes) if outcomes is not None else [Outcome(c.ours, c.verdict) for c in ledger.claims]
    for claim, outcome in zip(ledger.claims, outcomes, strict=True):
        cells = (claim.id, claim.where, claim.claim, _paper(claim), outcome.ours, _kind(claim), outcome.verdict)
        rows.append("| " + " | ".join(_cell(c) for c in (*cells, source(ledger, claim))) + " |")
    return "\n".join(rows)


def column(claim: Claim) -> str:
    """The label of the :data:`COLUMNS` column a claim's stored verdict falls in."""
    if claim.basis and claim.verdict == _rule.MATCHED:
        return "matched by a stated choice"
    label = next(label for label, kind, verdict in COLUMNS if (kind, verdict) == (claim.kind, claim.verdict))
    return f"timing {label}" if claim.measure == "timing" else label


def counts(ledger: Ledger) -> dict[str, int]:
    """How many of the ledger's stored verdicts fall in each column of :data:`COLUMNS`."""
    labels = [column(claim) for claim in ledger.claims]
    return {label: labels.count(label) for label, _, _ in COLUMNS}


def tally(ledger: Ledger, outcomes: Iterable[Outcome]) -> str:
    """``"N claims: k exact: matched, ..."``: how many outcomes fall under each class and verdict."""
    labels = [f"{claim.kind}: {outcome.verdict}" for claim, outcome in zip(ledger.claims, outcomes, strict=True)]
    counted = {label: labels.count(label) for label in dict.fromkeys(labels)}
    return f"{len(labels)} claims: " + ", ".join(f"{n} {label}" for label, n in counted.items())


def notebook_report(ledger: Ledger, live: dict[str, list[dict]] | None = None) -> list[Outcome]:
    """A reproduction notebook's last cell: recompute the ledger (qualitative claims on the ``live`` rows of a
    ``full`` run where given), display it as a table and print the tally. Without ``live`` every entry must be
    the stored one (``AssertionError`` otherwise); with it, the entries that differ are listed."""
    from IPython.display import Markdown, display

    outcomes = recompute_all(ledger, live)
    display(Markdown(table(ledger, outcomes)))
    print(tally(ledger, outcomes))
    moved = changed(ledger, outcomes)
    if live is not None:
        print(f"live entries that differ from the stored ones: {moved or 'none'}")
    else:
        assert not moved, f"ledger entries that the code and the recordings no longer give: {moved}"
    return outcomes


def summary(ledgers: Iterable[Ledger]) -> str:
    """The per-paper verdict counts, as the README shows them."""
    rows = [
        "| paper | claims | " + " | ".join(label for label, _, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for ledger in ledgers:
        n = counts(ledger)
        name = f"[{ledger.paper}](paper_repro/claims/{ledger.key}.toml)"
        rows.append(f"| {name} | {len(ledger.claims)} | " + " | ".join(str(n[label]) for label, _, _ in COLUMNS) + " |")
    return "\n".join(rows)


def readme_block() -> str:
    """The README's copy of :func:`summary`, between its ``claims`` markers."""
    text = README.read_text(encoding="utf-8")
    if _START not in text or _END not in text:
        raise ValueError(f"README.md has no {_START} ... {_END} block")
    return text.split(_START, 1)[1].split(_END, 1)[0].strip()


def write_readme_block(block: str) -> None:
    text = README.read_text(encoding="utf-8")
    head, rest = text.split(_START, 1)
    README.write_text(f"{head}{_START}\n{block}\n{_END}{rest.split(_END, 1)[1]}", encoding="utf-8")
