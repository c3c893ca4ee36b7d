"""``python -m paper_repro.claims [PAPER ...] [--check] [--write]``.

Recomputes every claim of the named ledgers (default: all five: the four papers' and depth_dynamics): exact values from the code,
qualitative verdicts from the recordings, and prints each ledger and the per-paper counts.

* ``--check`` exits with status 1 if a stored entry (ours or verdict) differs from the recomputation,
  or if the README's verdict counts are not the ledgers'. CI runs it.
* ``--write`` stores the recomputed values in the ledgers and the counts in the README instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import _ledger, _report


def rewrite(path: Path, outcomes: dict[str, _ledger.Outcome]) -> None:
    """Replace the ``ours`` and ``verdict`` lines of each ``[[claim]]`` block of the ledger file ``path``."""
    blocks = path.read_text(encoding="utf-8").split("[[claim]]\n")
    for i, block in enumerate(blocks[1:], start=1):
        claim_id = next(line for line in block.splitlines() if line.startswith("id = "))
        outcome = outcomes[json.loads(claim_id.split("=", 1)[1].strip())]
        lines = []
        for line in block.splitlines(keepends=True):
            for key in ("ours", "verdict"):
                if line.startswith(f"{key} = "):
                    line = f"{key} = {json.dumps(getattr(outcome, key), ensure_ascii=False)}\n"
            lines.append(line)
        blocks[i] = "".join(lines)
    path.write_text("[[claim]]\n".join(blocks), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper_repro.claims", description=__doc__.split("\n\n")[1])
    parser.add_argument("papers", nargs="*", metavar="PAPER", help=f"default: all of {', '.join(_ledger.PAPERS)}")
    parser.add_argument("--check", action="store_true", help="exit 1 if a stored entry or the README is stale")
    parser.add_argument("--write", action="store_true", help="store the recomputed values")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ledgers, errors, stale = [], [], []
    for key in args.papers or _ledger.PAPERS:
        try:
            ledger = _ledger.load(key)
        except _ledger.LedgerError as error:
            parser.error(str(error))
        outcomes = []
        for claim in ledger.claims:
            try:
                outcomes.append(_ledger.recompute(ledger, claim))
            except (_ledger.LedgerError, ValueError) as error:
                errors.append(f"{key}:{claim.id}: cannot recompute: {error}")
                outcomes.append(_ledger.Outcome(claim.ours, claim.verdict))
        now_by_id = {claim.id: now for claim, now in zip(ledger.claims, outcomes, strict=True)}
        moved = set(_ledger.changed(ledger, outcomes))
        for claim in (c for c in ledger.claims if c.id in moved):
            now = now_by_id[claim.id]
            stale.append(f"{key}:{claim.id}: stored {claim.ours!r} ({claim.verdict}), now {now.ours!r} ({now.verdict})")
        if args.write:
            rewrite(ledger.path, now_by_id)
            ledger = _ledger.load(key)
        print(f"## {ledger.paper}\n\n{_report.table(ledger, outcomes)}\n")
        ledgers.append(ledger)
    if set(args.papers or _ledger.PAPERS) == set(_ledger.PAPERS):
        block = _report.summary(ledgers)
        print(block)
        if args.write:
            _report.write_readme_block(block)
        elif _report.readme_block() != block:
            stale.append("README.md: the verdict counts between the claims markers are not the ledgers'")
    print(f"\n{sum(len(ledger.claims) for ledger in ledgers)} claims recomputed in {time.perf_counter() - start:.0f} s")
    for title, problems in (("updated" if args.write else "stale", stale), ("errors", errors)):
        if problems:
            print(f"\n{title}:\n  " + "\n  ".join(problems), file=sys.stderr)
    return 1 if args.check and (errors or stale) else 0


if __name__ == "__main__":
    sys.exit(main())
