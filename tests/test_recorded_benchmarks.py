"""Claims that the library's docstrings make about recorded benchmark results (benchmarks/results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuralode_tf.fields.transevolve import AUTO_FACTORED_MAX_TOKENS

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "transevolve_cpu.json"
PADDINGS = ("none", "right", "left")  # the exactness table's columns, per dtype

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


def _recorded(name: str) -> dict:
    path = RESULTS.parent / f"{name}_cpu.json"
    if not path.is_file():
        pytest.skip(f"no recorded {name} benchmark beside this suite")
    return json.loads(path.read_text())


def test_the_readme_quotes_the_recorded_language_model_ratios():
    """The README's converted/Hugging Face and cached/uncached generation ratios are the recorded runs'."""
    readme = (RESULTS.parents[2] / "README.md").read_text()
    speed = {(row["name"], row["masked"]): row["ratio"] for row in _recorded("huggingface")["rows"]}
    quoted = (
        f"GPT-2 {speed['gpt2', False]:.2f}x (padded {speed['gpt2', True]:.2f}x), "
        f"LLaMA {speed['llama', False]:.2f}x (padded {speed['llama', True]:.2f}x), "
        f"Qwen3 {speed['qwen3', False]:.2f}x (padded {speed['qwen3', True]:.2f}x), "
        f"Gemma 2 {speed['gemma2', False]:.2f}x (padded {speed['gemma2', True]:.2f}x)"
    )
    assert max(speed.values()) <= 1.10  # the target the README states
    assert quoted in " ".join(readme.split())
    generation = {(row["method"], row["batch"]): row["speedup"] for row in _recorded("generation")["rows"]}
    assert all(row["same_tokens"] for row in _recorded("generation")["rows"])
    quoted = (
        f"Euler {generation['euler', 1]:.1f}x (batch 1) and {generation['euler', 8]:.1f}x (batch 8), "
        f"RK4 with 2 steps per layer {generation['rk4', 1]:.1f}x and {generation['rk4', 8]:.1f}x"
    )
    assert quoted in " ".join(readme.split())


def test_the_readme_exactness_table_is_the_recorded_one():
    """Each family's row of the README's exactness table: max-abs per dtype and padding, as recorded."""
    readme = (RESULTS.parents[2] / "README.md").read_text()
    for family, by_dtype in _recorded("huggingface")["exactness"].items():
        cells = [
            " / ".join("0" if by_dtype[dtype][pad] == 0 else f"{by_dtype[dtype][pad]:.1e}" for pad in PADDINGS)
            for dtype in ("float64", "float32")
        ]
        assert f"| {cells[0]} | {cells[1]} |" in readme, family
    from benchmarks.huggingface import EAGER

    for family, by_dtype in _recorded("huggingface")["exactness"].items():
        assert max(by_dtype["float64"][pad] for pad in PADDINGS) <= (1e-5 if family in EAGER else 1e-10), family


def test_the_training_guide_quotes_the_recorded_thread_ratios():
    """The guide's advice (more threads help on idle cores, one thread wins beside a busy core) is the recorded
    run's, with the same accuracy either way."""
    guide = " ".join((RESULTS.parents[2] / "docs" / "guide" / "training.md").read_text().split())
    rows = _recorded("threads")["rows"]
    idle, busy = rows["train vit_digits, idle"], rows["train vit_digits, one busy core"]
    assert idle["all_cpus_over_one_thread"] < 1 < busy["all_cpus_over_one_thread"]
    assert idle["accuracy_all_cpus"] == idle["accuracy_one_thread"]
    quoted = (
        f"took {idle['all_cpus_over_one_thread']:.2f}× the time of one thread with both cores idle, but "
        f"{busy['all_cpus_over_one_thread']:.1f}× with one core busy"
    )
    assert quoted in guide


def test_the_readme_says_the_transevolve_gpu_run_reverses_the_cpu_picture():
    """The README's H100 sentence quotes the recorded CUDA run: `auto` slower than SDPA and materialised blocks."""
    path = RESULTS.parent / "transevolve_cuda.json"
    if not path.is_file():
        pytest.skip("no recorded CUDA TransEvolve run beside this suite")
    rows = {row["n"]: row["seconds"] for row in json.loads(path.read_text())["rows"]}
    readme = " ".join((RESULTS.parents[2] / "README.md").read_text().split())
    for n, label in ((256, "n = 256"), (1024, "n = 1k")):
        ms = {key: f"{1000 * rows[n][key]:.2f}" for key in ("auto", "standard", "materialised")}
        assert f"{ms['auto']} ms against" in readme and f"{ms['standard']} ms at {label}" in readme
        assert rows[n]["auto"] > rows[n]["materialised"] > rows[n]["standard"]
        assert f"{rows[n]['standard'] / rows[n]['auto']:.2f}x their speed" in readme
