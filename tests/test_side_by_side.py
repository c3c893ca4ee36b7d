"""The side-by-side table of the benchmarks (``benchmarks/side_by_side.py``): each row's ratio is ours over the
alternative, from the paired ratios where both were timed against one baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.side_by_side import language_model_rows, markdown, rows

pytestmark = pytest.mark.cpu_only("reads no device: arithmetic on benchmark results")

SUITE = {
    "overhead": {
        "euler": {
            "ratio": {"builtin": 1.01, "torchdiffeq": 1.10, "torchode": 1.20},
            "seconds": {"hand loop": 0.100, "builtin": 0.101, "torchdiffeq": 0.110, "torchode": 0.120},
        }
    },
    "compile": {
        "seconds": {"solve compiled": 0.0050, "hand loop compiled": 0.0049, "hand loop": 0.0080},
        "speed vs compiled hand loop": 0.98,
        "speedup over hand loop": 1.6,
    },
    "memory": {
        "checkpoint (euler)": {"seconds": 0.30, "peak 64": 40 * 2**20},
        "torchdiffeq adjoint (euler)": {"seconds": 0.60, "peak 64": 20 * 2**20},
    },
}
TRANSEVOLVE = {
    "rows": [
        {
            "n": 1024,
            "seconds": {"fullFF-1 auto": 0.75, "standard": 0.80, "materialised": 1.40},
            "speedup": {"auto": 1.07},
            "speedup_vs_materialised": 1.87,
        }
    ]
}


def test_rows_pair_ours_with_each_alternative():
    table = {(row.ours, row.alternative, row.unit): row for row in rows(SUITE, TRANSEVOLVE)}
    loop = table["`solve` euler, 6 steps", "hand-written loop", "ms"]
    assert (loop.value, loop.alternative_value, loop.ratio) == pytest.approx((101.0, 100.0, 1.01))
    assert table["`solve` euler, 6 steps", "torchdiffeq euler", "ms"].ratio == pytest.approx(1.01 / 1.10)
    assert table["`solve` euler, 6 steps", "torchode euler", "ms"].ratio == pytest.approx(1.01 / 1.20)
    compiled = table["`solve(compile=True)`, 12 Euler steps", "`torch.compile` of the hand loop", "ms"]
    assert compiled.ratio == pytest.approx(1 / 0.98)
    transevolve = table["TransEvolve `auto`, n = 1k", "6 SDPA blocks", "ms"]
    assert (transevolve.value, transevolve.ratio) == pytest.approx((750.0, 1 / 1.07))
    materialised = table["TransEvolve `auto`, n = 1k", "6 blocks, materialised attention", "ms"]
    assert materialised.ratio == pytest.approx(1 / 1.87)
    assert table["checkpoint, 64 euler steps", "torchdiffeq adjoint", "ms"].ratio == pytest.approx(0.5)
    assert table["checkpoint, 64 euler steps", "torchdiffeq adjoint", "MiB"].ratio == pytest.approx(2.0)
    assert len(table) == 9  # rk4 and torchode's adjoint are absent from this suite, so from the table


def test_markdown_has_a_line_per_row_with_units():
    text = markdown(rows(SUITE, None))
    assert text.count("\n") == 2 + 7
    assert "| checkpoint, 64 euler steps (peak memory) | 40.0 MiB | torchdiffeq adjoint | 20.0 MiB | 2.000x |" in text


def test_the_readme_table_is_the_recorded_one():
    """The README's side-by-side table is ``benchmarks.side_by_side`` applied to the recorded results."""
    root = Path(__file__).resolve().parents[1]
    results = root / "benchmarks" / "results"
    if not (results / "suite_cpu.json").is_file():
        pytest.skip("no recorded suite beside this suite")
    suite = json.loads((results / "suite_cpu.json").read_text())
    transevolve = json.loads((results / "transevolve_cpu.json").read_text())
    output_times = json.loads((results / "output_times_cpu.json").read_text())
    lm_training = json.loads((results / "lm_training_cpu.json").read_text())
    generation_hf = json.loads((results / "generation_hf_cpu.json").read_text())
    table = rows(suite, transevolve, output_times) + language_model_rows(lm_training, generation_hf)
    assert markdown(table) in (root / "README.md").read_text()


def test_200_output_times_cost_solve_what_they_cost_the_peers():
    """The claim behind the output-times rows, recomputed in the run: 200 output times cost ``solve`` what they cost
    torchdiffeq and torchode, and what 2 cost, where a step onto each output time costs more than 10 times that."""
    from benchmarks.output_times import count_evaluations

    counts = count_evaluations("cpu")
    assert counts["solve on torchdiffeq"] == counts["torchdiffeq"] == counts["solve, 2 times"]
    assert counts["solve on torchode"] == counts["torchode"]
    assert counts["solve, a step onto each time"] > 10 * counts["solve, 2 times"]
