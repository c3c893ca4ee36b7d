"""A paper's ledger: its claims, read from ``<paper>.toml``, and their recomputation.

Each ``[[claim]]`` has ``id``, ``where`` (table, figure or section), ``claim``, ``paper`` (the paper's
value as printed), ``class`` and the stored ``ours`` and ``verdict``. By class:

* ``exact``: ``compute`` names a function of ``_<paper>.py`` that returns our value as text at the
  paper's printed precision; the verdict is :func:`~._rule.exact_verdict`.
* ``qualitative``: ``a`` beats ``b``, judged by :func:`~._rule.two_standard_errors` on the per-seed
  values of ``metric`` (``test_accuracy``, the final one; ``non_finite``; ``train_loss``, the last epoch's
  mean; ``sweep.K``, the test accuracy with K steps; a learning curve's ``curve.KEY``, its last epoch's value, or
  ``curve.KEY.lastN``, the mean of its last N epochs, where KEY is ``loss`` or ``accuracy`` (training, the mean over
  the epoch's steps) or ``test_loss`` or ``test_accuracy`` (the test split's at the epoch's end, recorded with
  ``--set eval_every=1``); or a language model's final ``val_loss`` or ``perplexity``; lower is better for losses:
  ``higher_is_better = false``) in
  ``recording`` (a ``[recordings.NAME]`` table: path, stand-in, date and command of a run too long for
  CI); or on the two lists that the function named by ``samples`` returns.
* ``not here``: needs the paper's data or hardware; ``command`` is the run that would produce ours.

Flags, counted apart in the README tally (:mod:`._report`):

* ``basis = "stated choice"`` (exact): the match rests on a choice of ours that ``choice`` states (a setting
  fitted to the paper's number, a convention for what is counted), not on the construction alone.
* ``measure = "timing"`` (qualitative): a speed claim, judged against the paper's own ``baseline`` (named);
  ``stored`` is the recorded benchmark file its ``samples`` function reads.
* ``paper_source``: where the paper value comes from when the seed text does not print it (``"our
  derivation: ..."``, or another version of the paper); empty means it is printed in the seed text.

:func:`recompute` gives every claim's ``ours`` and verdict from the code and the recordings, so a
stored entry that the code no longer supports is found by :func:`changed`.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import _rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # the repository
PAPERS = ("neural_ode_transformer", "transevolve", "evolving_attention", "ot_transformer", "depth_dynamics")
_REQUIRED = ("id", "where", "claim", "paper", "class", "ours", "verdict")
_BY_CLASS = {"exact": ("compute",), "qualitative": ("a", "b"), "not here": ("command",)}


class LedgerError(ValueError):
    """A ledger entry that is malformed, or that names a recording or function that does not exist."""


@dataclass(frozen=True)
class Recording:
    """Rows of ``neuralode-tf compare`` (or a benchmark), recorded by a run too long for CI."""

    name: str
    path: str  # relative to the repository
    stand_in: str
    date: str
    command: str

    def rows(self) -> list[dict]:
        path = ROOT / self.path
        if not path.is_file():
            raise LedgerError(f"recording {self.name!r} has no file {self.path}: record it with `{self.command}`")
        return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Claim:
    id: str
    where: str
    claim: str
    paper: str
    kind: str  # "exact", "qualitative" or "not here" (the TOML key is ``class``)
    ours: str
    verdict: str
    note: str = ""
    command: str = ""
    compute: str = ""
    recording: str = ""
    samples: str = ""
    a: str = ""
    b: str = ""
    metric: str = "test_accuracy"
    metric_b: str = ""  # b's metric, when it is not a's (e.g. one model at two step counts)
    higher_is_better: bool = True
    unit: str = ""  # of a ``samples`` claim's values, e.g. "ms per step"
    basis: str = ""  # exact: "" (by construction) or "stated choice", with ``choice``
    choice: str = ""
    measure: str = "accuracy"  # qualitative: "accuracy" or "timing", with ``baseline``
    baseline: str = ""
    stored: str = ""  # the recorded file a ``samples`` function reads (relative to the repository)
    paper_source: str = ""  # "" = printed in the seed text


@dataclass
class Ledger:
    key: str  # the file's stem, which is also the notebook's
    paper: str
    reference: str
    claims: list[Claim]
    recordings: dict[str, Recording] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return HERE / f"{self.key}.toml"


def load(key: str) -> Ledger:
    """Read and validate ``<key>.toml``."""
    if key not in PAPERS:
        raise LedgerError(f"no ledger {key!r}; the ledgers are {', '.join(PAPERS)}")
    return parse(key, tomllib.loads((HERE / f"{key}.toml").read_text(encoding="utf-8")))


def parse(key: str, data: dict) -> Ledger:
    """Validate a ledger's TOML data: required keys per class, unique ids, known verdicts and recordings."""
    recordings = {name: Recording(name=name, **entry) for name, entry in data.get("recordings", {}).items()}
    claims, seen = [], set()
    for entry in map(dict, data["claim"]):
        missing = [k for k in (*_REQUIRED, *_BY_CLASS.get(entry.get("class"), ())) if k not in entry]
        where = f"{key}.toml, claim {entry.get('id', '?')!r}"
        if entry.get("class") not in _rule.VERDICTS:
            raise LedgerError(f"{where}: class must be one of {list(_rule.VERDICTS)}, not {entry.get('class')!r}")
        if missing:
            raise LedgerError(f"{where}: missing {missing}")
        if entry["id"] in seen:
            raise LedgerError(f"{where}: duplicate id")
        if entry["verdict"] not in _rule.VERDICTS[entry["class"]]:
            raise LedgerError(f"{where}: verdict {entry['verdict']!r} is not one of {_rule.VERDICTS[entry['class']]}")
        if entry["class"] == "qualitative" and bool(entry.get("recording")) == bool(entry.get("samples")):
            raise LedgerError(f"{where}: a qualitative claim takes either `recording` or `samples`")
        if entry.get("recording") and entry["recording"] not in recordings:
            raise LedgerError(f"{where}: no [recordings.{entry['recording']}]")
        _check_flags(entry, where)
        seen.add(entry["id"])
        claims.append(Claim(kind=entry.pop("class"), **entry))
    return Ledger(key, data["paper"], data["reference"], claims, recordings)


def _check_flags(entry: dict, where: str) -> None:
    """The flags' own rules: a stated choice says what was chosen, a timing names its baseline and its file."""
    if entry.get("basis", "") not in ("", "stated choice") or (entry.get("basis") and entry["class"] != "exact"):
        raise LedgerError(f'{where}: basis is "stated choice" on an exact claim, or absent')
    if bool(entry.get("basis")) != bool(entry.get("choice")):
        raise LedgerError(f"{where}: a stated choice takes both `basis` and `choice`")
    if entry.get("measure", "accuracy") not in ("accuracy", "timing"):
        raise LedgerError(f'{where}: measure is "accuracy" or "timing", not {entry["measure"]!r}')
    if entry.get("measure") == "timing":
        if entry["class"] != "qualitative" or not entry.get("baseline"):
            raise LedgerError(f"{where}: a timing is a qualitative claim that names the paper's `baseline`")
        if entry.get("samples") and not entry.get("stored"):  # the samples function reads it, and says if it is missing
            raise LedgerError(f"{where}: a timing's samples name the recorded file they read, `stored`")


@dataclass(frozen=True)
class Outcome:
    ours: str
    verdict: str


def _function(ledger: Ledger, name: str) -> Callable:
    module = importlib.import_module(f".{'_' + ledger.key}", __package__)
    if not hasattr(module, name):
        raise LedgerError(f"{ledger.key}: _{ledger.key}.py has no function {name!r}")
    return getattr(module, name)


@contextmanager
def _one_thread() -> Iterator[None]:
    """Compute exact claims on one torch thread: their small products run several times faster without thread
    contention, and their results do not depend on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _values(rows: list[dict], variant: str, metric: str) -> list[float]:
    """Per-seed values of one variant: accuracies (%) of the finite runs, or the non-finite indicator."""
    runs = [r for r in rows if r["variant"] == variant]
    if not runs:
        raise LedgerError(f"no runs of {variant!r} in the recording")
    if metric == "non_finite":
        return [float(r["non_finite"]) for r in runs]
    finite = [r for r in runs if not r["non_finite"]]
    if metric == "test_accuracy":
        return [100 * r["test_accuracy"] for r in finite]
    if metric == "train_loss":  # the last epoch's mean training loss (data-fitting term)
        if not all(r.get("curve") for r in finite):
            raise LedgerError(f"runs of {variant!r} have no learning curve: the recording predates them; rerun it")
        return [r["curve"]["loss"][-1] for r in finite]
    if metric in ("val_loss", "perplexity"):  # a language model's final validation loss, or its exponential
        return [r[metric] for r in finite]
    if metric.startswith("sweep."):
        steps = metric.split(".", 1)[1]
        return [100 * {str(k): v for k, v in r["sweep"].items()}[steps] for r in finite]
    if metric.startswith("curve."):
        return [_curve_value(r, variant, metric) for r in finite]
    raise LedgerError(f"unknown metric {metric!r}")


CURVES = {
    "loss": (3, " training loss"),
    "accuracy": (1, " points of training accuracy"),
    "test_loss": (3, " test loss"),
    "test_accuracy": (1, " points of test accuracy"),
}
"""A learning curve's keys (the rows' ``curve``, :func:`neuralode_tf.train.compare.learning_curve`), with the digits
and unit of a difference of them; accuracies are judged in points (x 100)."""


def _curve_metric(metric: str) -> tuple[str, int]:
    """The key and the number of last epochs of ``curve.KEY`` (1) or ``curve.KEY.lastN`` (N)."""
    _, key, *last = metric.split(".")
    epochs = last[0].removeprefix("last") if len(last) == 1 and last[0].startswith("last") else "1" if not last else ""
    if key not in CURVES or not epochs.isdigit() or int(epochs) < 1:
        raise LedgerError(f"unknown metric {metric!r}: curve.KEY or curve.KEY.lastN, with KEY one of {list(CURVES)}")
    return key, int(epochs)


def _curve_value(row: dict, variant: str, metric: str) -> float:
    """One run's ``curve.KEY`` (its last epoch's value) or ``curve.KEY.lastN`` (the mean of its last N epochs)."""
    key, epochs = _curve_metric(metric)
    values = (row.get("curve") or {}).get(key)
    if not values or len(values) < epochs or None in values[-epochs:]:
        evaluated = " with --set eval_every=1" if key.startswith("test_") else ""
        raise LedgerError(
            f"runs of {variant!r} have no {key} curve over their last {epochs} epoch(s): the recording predates it; "
            f"rerun it{evaluated}"
        )
    return (100 if key.endswith("accuracy") else 1) * statistics.fmean(values[-epochs:])


def _signed(x: float, digits: int) -> str:
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text  # no "+0.0" or "-0.0"


def recompute(ledger: Ledger, claim: Claim, rows: list[dict] | None = None) -> Outcome:
    """Our value and verdict, from the code (exact), the recording or ``rows`` (qualitative)."""
    if claim.kind == "not here":
        return Outcome(claim.ours, _rule.NOT_HERE)
    if claim.kind == "exact":
        with _one_thread():
            ours = str(_function(ledger, claim.compute)())
        return Outcome(ours, _rule.exact_verdict(claim.paper, ours))
    if claim.samples:
        a, b = _function(ledger, claim.samples)()
        label, unit, digits, count = "", f" {claim.unit}" if claim.unit else "", 2, "samples"
    else:
        recording = ledger.recordings[claim.recording]
        rows = recording.rows() if rows is None else rows
        a, b = _values(rows, claim.a, claim.metric), _values(rows, claim.b, claim.metric_b or claim.metric)
        label, count = f"{recording.stand_in}: ", "seeds"
        digits, unit = {
            "non_finite": (2, " of runs non-finite"),
            "train_loss": (3, " training loss"),
            "val_loss": (3, " validation loss"),
            "perplexity": (2, " perplexity"),
        }.get(claim.metric, (1, " points"))
        if claim.metric.startswith("curve."):
            key, epochs = _curve_metric(claim.metric)
            digits, unit = CURVES[key]
            unit += f", mean of the last {epochs} epochs" if epochs > 1 else ""
    judged = _rule.two_standard_errors(a, b, claim.higher_is_better)
    ours = (
        f"{label}{_signed(judged.difference, digits)} ± {judged.standard_error:.{digits}f}{unit} "
        f"(se; {judged.seeds[0]} vs {judged.seeds[1]} {count})"
    )
    return Outcome(ours, judged.verdict)


def recompute_all(ledger: Ledger, live: dict[str, list[dict]] | None = None) -> list[Outcome]:
    """Every claim's :func:`recompute`; qualitative claims of a recording named in ``live`` are judged on those
    rows (a notebook's live reruns) instead of the recording."""
    live = live or {}
    return [recompute(ledger, claim, live.get(claim.recording)) for claim in ledger.claims]


def changed(ledger: Ledger, outcomes: list[Outcome]) -> list[str]:
    """Ids of the claims whose ``outcomes`` are not the stored ``ours`` and verdict."""
    return [c.id for c, o in zip(ledger.claims, outcomes, strict=True) if (o.ours, o.verdict) != (c.ours, c.verdict)]
