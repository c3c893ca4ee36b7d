"""The claims ledgers of the four reproduced papers, and of the depth-dynamics studies (``depth_dynamics``).

One TOML ledger per paper (``<paper>.toml`` beside this file) lists every claim of every table and
figure: where it is, the paper's value, ours, its class (exact, qualitative or not here), its verdict
and the command that produced ours. Verdicts come from one rule (:mod:`._rule`); exact values are
recomputed from the code by ``python -m paper_repro.claims``, whose ``--check`` fails when a stored
entry is no longer what the code and the recordings give.

The reproduction notebooks import this package (``import claims`` from ``paper_repro/``) to render
their ledger and to judge their live reruns by the same rule.
"""

from ._ledger import (
    PAPERS,
    Claim,
    Ledger,
    LedgerError,
    Outcome,
    Recording,
    changed,
    load,
    recompute,
    recompute_all,
)
from ._report import counts, notebook_report, summary, table, tally
from ._rule import VERDICTS, Judgement, exact_verdict, two_standard_errors

__all__ = [
    "PAPERS",
    "VERDICTS",
    "Claim",
    "Judgement",
    "Ledger",
    "LedgerError",
    "Outcome",
    "Recording",
    "changed",
    "counts",
    "exact_verdict",
    "load",
    "notebook_report",
    "recompute",
    "recompute_all",
    "summary",
    "table",
    "tally",
    "two_standard_errors",
]
