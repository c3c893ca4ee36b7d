"""Claims that the library's docstrings make about recorded benchmark results (benchmarks/results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuralode_tf.fields.transevolve import AUTO_FACTORED_MAX_TOKENS

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "transevolve_cpu.json"

pytestmark = pytest.mark.cpu_only("reads a recorded CPU benchmark")


@pytest.mark.skipif(not RESULTS.is_file(), reason="no recorded TransEvolve benchmark beside this suite")
def test_factored_is_the_faster_exact_path_at_every_measured_cpu_length():
    """``AUTO_FACTORED_MAX_TOKENS``: on the CPU ``auto`` picks ``factored`` up to the longest measured length,
    because it is the faster exact path (than ``fused`` and ``fidelity``) at every measured length."""
    rows = json.loads(RESULTS.read_text())["rows"]
    for row in rows:
        seconds = row["seconds"]
        factored = seconds["fullFF-1 factored"]
        assert factored < seconds["fullFF-1 fused"] and factored < seconds["fullFF-1 fidelity"], row["n"]
    assert max(row["n"] for row in rows) == AUTO_FACTORED_MAX_TOKENS["cpu"]
