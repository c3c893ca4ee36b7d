"""GLUE (Wang et al. 2018), the benchmark of Wang et al. (2021, §4.2, Tables 3 and 4), read from its TSV files.

The layout is the one GLUE's download script writes, one folder per task::

    glue_data/CoLA/{train,dev}.tsv        no header: source, label, original label, sentence
    glue_data/SST-2/{train,dev}.tsv       sentence, label
    glue_data/MRPC/{train,dev}.tsv        Quality, #1 ID, #2 ID, #1 String, #2 String
    glue_data/STS-B/{train,dev}.tsv       ..., sentence1, sentence2, score
    glue_data/QQP/{train,dev}.tsv         id, qid1, qid2, question1, question2, is_duplicate
    glue_data/MNLI/{train,dev_matched,dev_mismatched}.tsv   ..., sentence1, sentence2, ..., gold_label
    glue_data/QNLI/{train,dev}.tsv        index, question, sentence, label
    glue_data/RTE/{train,dev}.tsv         index, sentence1, sentence2, label
    glue_data/WNLI/{train,dev}.tsv        index, sentence1, sentence2, label

The test split of :func:`load_glue` is the task's development set: GLUE's test labels are not public (its
server scores test predictions), and the paper's Table 4 and Table 3's "(dev)" rows are development-set scores.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import torch

from ._util import existing, locate
from .errors import DatasetFormatError
from .splits import Splits, Text, TextSplit

__all__ = ["GLUE_TASKS", "load_glue"]


@dataclass(frozen=True)
class _Task:
    folder: str
    text: tuple[str | int, ...]  # column names, or indices in a file without a header (CoLA)
    label: str | int
    labels: tuple[str, ...] | None  # the file's label values in class-id order; None: a regression score
    classes: tuple[str, ...] | None
    metrics: tuple[str, ...]
    dev: str = "dev"

    @property
    def header(self) -> bool:
        """Whether the files start with a header naming the columns (every task's but CoLA's)."""
        return isinstance(self.label, str)


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")
_PAIR = ("sentence1", "sentence2")
_MNLI = ("entailment", "neutral", "contradiction")

GLUE_TASKS: dict[str, _Task] = {
    "cola": _Task("CoLA", (3,), 1, _BINARY, ("unacceptable", "acceptable"), ("matthews",)),
    "sst2": _Task("SST-2", ("sentence",), "label", _BINARY, ("negative", "positive"), ("accuracy",)),
    "mrpc": _Task(
        "MRPC", ("#1 String", "#2 String"), "Quality", _BINARY, ("not_equivalent", "equivalent"), ("f1", "accuracy")
    ),
    "stsb": _Task("STS-B", _PAIR, "score", None, None, ("pearson", "spearman")),
    "qqp": _Task(
        "QQP", ("question1", "question2"), "is_duplicate", _BINARY, ("not_duplicate", "duplicate"), ("f1", "accuracy")
    ),
    "mnli": _Task("MNLI", _PAIR, "gold_label", _MNLI, _MNLI, ("accuracy",), "dev_matched"),
    "mnli_mismatched": _Task("MNLI", _PAIR, "gold_label", _MNLI, _MNLI, ("accuracy",), "dev_mismatched"),
    "qnli": _Task("QNLI", ("question", "sentence"), "label", _NLI, _NLI, ("accuracy",)),
    "rte": _Task("RTE", _PAIR, "label", _NLI, _NLI, ("accuracy",)),
    "wnli": _Task("WNLI", _PAIR, "label", _BINARY, ("not_entailment", "entailment"), ("accuracy",)),
}
"""GLUE's tasks by name: their folder, text and label columns, classes and metrics (those of GLUE and of the paper's
Table 3: Matthews correlation for CoLA, F1 and accuracy for MRPC and QQP, Pearson and Spearman correlation for STS-B,
accuracy for the others). ``mnli`` is scored on the matched development set, ``mnli_mismatched`` on the mismatched
one; both train on MNLI's training set."""

_LAYOUT = "glue_data/<Task>/{train,dev}.tsv as GLUE's download script writes them (MNLI: dev_matched.tsv, ...)"
_MALFORMED_SHARE = 1e-3  # QQP's training file has a handful of rows with missing fields, which are skipped


def load_glue(root: str | Path, task: str = "cola", *, max_samples: int | None = None, seed: int = 0) -> Splits:
    """A GLUE task's training set and development set (as the test split) from ``root``.

    Sentence-pair tasks give pairs of texts, which a pretrained model's tokenizer joins with its separator
    (:class:`~neuralode_tf.models.PretrainedTextClassifier`). Labels are class ids in the order of
    ``classes`` (those of Hugging Face's GLUE configurations); STS-B's are its float similarity scores (0 to 5), a
    regression (``classes`` is ``None``). Rows with too few fields (a few lines of QQP's training file) are skipped
    and counted in the ``description``; more than 0.1% of a file is an error.

    Args:
        root: The ``glue_data`` folder or its parent.
        task: A name of :data:`GLUE_TASKS`.
        max_samples: Keep a seeded random subset of this many training examples, for quick runs (the development
            set is kept whole).
        seed: Seed of that subset.

    Returns:
        ``"text"`` splits (:class:`~neuralode_tf.data.TextSplit`), with the task's ``metrics``.

    Raises:
        ValueError: ``task`` is not a GLUE task.
        DatasetNotFoundError: a folder or file is missing.
        DatasetFormatError: a column is missing, a label is not one of the task's, or too many rows are malformed.
    """
    if task not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; choose from {', '.join(GLUE_TASKS)}")
    spec = GLUE_TASKS[task]
    folder = existing(locate(root, "glue_data", _LAYOUT) / spec.folder, _LAYOUT)
    (train, skipped), (dev, dev_skipped) = (_read(folder / f"{name}.tsv", spec) for name in ("train", spec.dev))
    if max_samples is not None and max_samples < len(train):
        rows = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[:max_samples]
        train = TextSplit([train.texts[i] for i in rows.tolist()], train.y[rows])
    malformed = f"; {skipped + dev_skipped} malformed rows skipped" if skipped + dev_skipped else ""
    return Splits(
        name="glue",
        kind="text",
        train=train,
        test=dev,
        description=f"GLUE {spec.folder} in {folder}: {len(train)} train / {len(dev)} {spec.dev}{malformed}",
        classes=spec.classes,
        metrics=spec.metrics,
    )


def _read(path: Path, spec: _Task) -> tuple[TextSplit, int]:
    """The examples of one TSV file and the number of rows skipped for missing fields."""
    with open(existing(path, _LAYOUT), encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows:
        raise DatasetFormatError(f"{path} is empty; expected {_LAYOUT}")
    columns = _columns(path, spec, rows[0] if spec.header else None)
    rows = rows[1:] if spec.header else rows
    needed = max(columns) + 1
    complete = [row for row in rows if len(row) >= needed]
    skipped = len(rows) - len(complete)
    if skipped > _MALFORMED_SHARE * len(rows):
        raise DatasetFormatError(f"{path}: {skipped} of {len(rows)} rows have fewer than {needed} fields")
    *text_columns, label_column = columns
    texts: list[Text] = [
        row[text_columns[0]] if len(text_columns) == 1 else (row[text_columns[0]], row[text_columns[1]])
        for row in complete
    ]
    values = [row[label_column] for row in complete]
    return TextSplit(texts, _targets(values, spec, path)), skipped


def _columns(path: Path, spec: _Task, header: list[str] | None) -> list[int]:
    """The indices of the text columns and of the label column (last): from the ``header`` if the file has one."""
    wanted = [*spec.text, spec.label]
    if header is None:
        return [c for c in wanted if isinstance(c, int)]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DatasetFormatError(f"{path}: no column {missing[0]!r} in the header {header}; expected {_LAYOUT}")
    return [header.index(str(c)) for c in wanted]


def _targets(values: list[str], spec: _Task, path: Path) -> torch.Tensor:
    if spec.labels is None:
        try:
            return torch.tensor([float(v) for v in values])
        except ValueError as error:
            raise DatasetFormatError(f"{path}: a score is not a number ({error})") from error
    ids = {label: i for i, label in enumerate(spec.labels)}
    unknown = next((v for v in values if v not in ids), None)
    if unknown is not None:
        raise DatasetFormatError(f"{path}: label {unknown!r} is not one of {', '.join(spec.labels)}")
    return torch.tensor([ids[v] for v in values])
