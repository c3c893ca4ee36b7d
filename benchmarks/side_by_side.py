"""Every speed claim beside its obvious alternative: one table from the results of ``nox -s bench``.

Each row is a time of ours, the time of the alternative it replaces, both medians of forward + backward passes
timed round-robin in one process, and their ratio (ours / alternative: below 1, ours is faster):

* the built-in fixed-grid solver against a hand-written loop over the same layers, torchdiffeq and torchode
  (``benchmarks/suite.py``, section 1);
* ``solve(compile=True)`` against ``torch.compile`` of the hand loop and against the eager hand loop (section 2);
* TransEvolve's ``auto`` path (fullFF-1) against six pre-norm SDPA blocks and against the same blocks with
  materialised attention, at every measured length (``benchmarks/transevolve.py``);
* checkpointing against the adjoints at 64 Euler / RK4 steps, in time and in peak memory (section 3);
* one dopri5 solve asked for 200 output times against torchdiffeq's and torchode's own, in field evaluations
  (``benchmarks/output_times.py``; counted, not timed);
* a training step of ``CausalLM`` (one Lie-Trotter step per layer) against the plain GPT written in
  ``benchmarks/lm_training.py`` (eager, and both under ``torch.compile``; time and peak memory) and against Hugging
  Face's ``GPT2LMHeadModel``, at each size; and the converted GPT-2's cached greedy ``generate`` against Hugging
  Face's, per token (``benchmarks/generation.py --huggingface``), where those results exist.

A ratio between two rows of one paired table (e.g. built-in against torchdiffeq, both timed against the hand
loop) is the quotient of their paired ratios. Run ``python -m benchmarks.side_by_side`` after the two benchmarks;
it prints the table and writes ``benchmarks/results/side_by_side_<device>.md``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TRANSEVOLVE_PATH = "fullFF-1 auto"


@dataclass(frozen=True)
class Row:
    """One claim: ``ours`` took ``value`` where ``alternative`` took ``alternative_value`` (``unit``)."""

    ours: str
    value: float
    alternative: str
    alternative_value: float
    ratio: float
    unit: str = "ms"


def rows(suite: dict, transevolve: dict | None, output_times: dict | None = None) -> list[Row]:
    """The side-by-side rows of a suite result (and a TransEvolve and an output-times result, if there are)."""
    table = _overhead(suite["overhead"]) + _compiled(suite["compile"])
    if transevolve is not None:
        table += _transevolve(transevolve["rows"])
    table += _checkpointing(suite["memory"])
    if output_times is not None:
        table += _output_times(output_times)
    return table


def language_model_rows(lm_training: dict | None, generation_hf: dict | None) -> list[Row]:
    """The rows of a language-model training result and a generation-against-Hugging-Face result, if there are."""
    out = []
    for row in lm_training["rows"] if lm_training is not None else []:
        ms = {key: 1e3 * seconds for key, seconds in row["seconds"].items()}
        mib = {key: peak / 2**20 for key, peak in row["peak_bytes"].items()}
        ours = f"`CausalLM` training step, {row['config']['depth']} layers, d = {row['config']['dim']}"
        plain, ratio = "plain GPT (nanoGPT block)", row["ratio"]
        out.append(Row(ours, ms["causal_lm eager"], plain, ms["gpt eager"], ratio["causal_lm eager"]))
        if row["compiled"]:
            compiled = ours.replace("`CausalLM`", "`torch.compile(CausalLM)`")
            other = "`torch.compile` of the plain GPT"
            out.append(Row(compiled, ms["causal_lm compiled"], other, ms["gpt compiled"], ratio["causal_lm compiled"]))
        memory = row["memory_ratio"]["causal_lm eager"]
        out.append(Row(ours, mib["causal_lm eager"], plain, mib["gpt eager"], memory, unit="MiB"))
        hf = ratio["causal_lm eager"] / ratio["hf_gpt2 eager"]
        out.append(Row(ours, ms["causal_lm eager"], "`GPT2LMHeadModel`", ms["hf_gpt2 eager"], hf))
    for row in generation_hf["rows"] if generation_hf is not None else []:
        ms, name = row["ms_per_token"], row["name"].replace("gpt2 ", "GPT-2 ")
        ours = f"converted {name} cached greedy `generate`, per token"
        out.append(Row(ours, ms["converted"], "Hugging Face `generate` with its cache", ms["hf"], row["ratio"]))
    return out


def _output_times(result: dict) -> list[Row]:
    counts, n = result["evaluations"], result["n_times"]
    out = []
    for backend in ("torchdiffeq", "torchode"):
        ours, theirs = counts[f"solve on {backend}"], counts[backend]
        out.append(Row(f"`solve` dopri5 on {backend}, {n} output times", ours, backend, theirs, ours / theirs, "nfe"))
    return out


def _overhead(overhead: dict) -> list[Row]:
    out = []
    for method, timed in overhead.items():
        ms = {name: 1e3 * seconds for name, seconds in timed["seconds"].items()}
        ratio = {"hand loop": 1.0, **timed["ratio"]}
        ours = f"`solve` {method}, 6 steps"
        for other in ("hand loop", "torchdiffeq", "torchode"):
            if other in ms:
                name = "hand-written loop" if other == "hand loop" else f"{other} {method}"
                out.append(Row(ours, ms["builtin"], name, ms[other], ratio["builtin"] / ratio[other]))
    return out


def _compiled(compiled: dict) -> list[Row]:
    ms = {name: 1e3 * seconds for name, seconds in compiled["seconds"].items()}
    ours = "`solve(compile=True)`, 12 Euler steps"
    return [
        Row(
            ours,
            ms["solve compiled"],
            "`torch.compile` of the hand loop",
            ms["hand loop compiled"],
            1 / compiled["speed vs compiled hand loop"],
        ),
        Row(ours, ms["solve compiled"], "eager hand loop", ms["hand loop"], 1 / compiled["speedup over hand loop"]),
    ]


def _transevolve(measured: list[dict]) -> list[Row]:
    out = []
    for row in measured:
        ms, n = {name: 1e3 * seconds for name, seconds in row["seconds"].items()}, _length(row["n"])
        ours = f"TransEvolve `auto`, n = {n}"
        out.append(Row(ours, ms[TRANSEVOLVE_PATH], "6 SDPA blocks", ms["standard"], 1 / row["speedup"]["auto"]))
        out.append(
            Row(
                ours,
                ms[TRANSEVOLVE_PATH],
                "6 blocks, materialised attention",
                ms["materialised"],
                1 / row["speedup_vs_materialised"],
            )
        )
    return out


def _checkpointing(memory: dict) -> list[Row]:
    out = []
    for method in ("euler", "rk4"):
        ours = memory.get(f"checkpoint ({method})")
        for backend in ("torchdiffeq", "torchode"):
            adjoint = memory.get(f"{backend} adjoint ({method})")
            if ours is None or adjoint is None:
                continue
            what, other = f"checkpoint, 64 {method} steps", f"{backend} adjoint"
            out.append(
                Row(what, 1e3 * ours["seconds"], other, 1e3 * adjoint["seconds"], ours["seconds"] / adjoint["seconds"])
            )
            out.append(
                Row(
                    what,
                    ours["peak 64"] / 2**20,
                    other,
                    adjoint["peak 64"] / 2**20,
                    ours["peak 64"] / adjoint["peak 64"],
                    unit="MiB",
                )
            )
    return out


def _length(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def markdown(table: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| ours | | alternative | | ours / alternative |", "|---|---:|---|---:|---:|"]
    for row in table:
        what = {"MiB": "peak memory", "nfe": "evaluations"}.get(row.unit, "time")
        ours, other = _cell(row.value, row.unit), _cell(row.alternative_value, row.unit)
        lines.append(f"| {row.ours} ({what}) | {ours} | {row.alternative} | {other} | {row.ratio:.3f}x |")
    return "\n".join(lines) + "\n"


def _cell(value: float, unit: str) -> str:
    if unit == "nfe":
        return f"{value:.0f}"
    return f"{value:.1f} {unit}" if unit == "MiB" else f"{value:.2f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", help="the results to read, suite_<device>.json, ... (default: this machine's)")
    args = parser.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    suite = json.loads((RESULTS / f"suite_{args.device}.json").read_text())
    transevolve_file = RESULTS / f"transevolve_{args.device}.json"
    transevolve = json.loads(transevolve_file.read_text()) if transevolve_file.is_file() else None
    output_times_file = RESULTS / f"output_times_{args.device}.json"
    output_times = json.loads(output_times_file.read_text()) if output_times_file.is_file() else None
    language_models = [
        json.loads(path.read_text()) if path.is_file() else None
        for path in (RESULTS / f"lm_training_{args.device}.json", RESULTS / f"generation_hf_{args.device}.json")
    ]
    text = markdown(rows(suite, transevolve, output_times) + language_model_rows(*language_models))
    out = RESULTS / f"side_by_side_{args.device}.md"
    out.write_text(text)
    print(text + f"wrote {out}")


if __name__ == "__main__":
    main()
