"""Threads on a shared machine: ``neuralode-tf train vit_digits`` and ``neuralode-tf demo`` with one thread per
available CPU (:func:`~neuralode_tf.train._threads.available_cpus`, their default) against one thread, on an idle
machine and with one core kept busy by another process.

Each command runs in a fresh process with ``threads=N`` / ``--threads N`` (``OMP_NUM_THREADS`` unset); the busy
core is a Python loop started before and stopped after the pair of runs it loads. The wall-clock ratios all CPUs /
one thread are taken in the same run; the test accuracy of both ``train`` runs is reported (the threads change
only the rounding of float reductions). ``python -m benchmarks.threads``
prints them and writes ``benchmarks/results/threads_cpu.json``; ``--quick`` trains 40 steps instead of 5 epochs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuralode_tf.train._threads import available_cpus

RESULTS = Path(__file__).parent / "results"
CLI = [sys.executable, "-m", "neuralode_tf.train.cli"]


def _timed(argv: list[str], threads: int) -> tuple[float, float | None]:
    """Seconds of one command in a fresh process, and the test accuracy of a training run (else ``None``)."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    with tempfile.TemporaryDirectory() as folder:
        if argv[0] == "train":
            argv = [*argv, "--out-dir", folder, "--set", "progress=false", f"threads={threads}"]
        else:
            argv = [*argv, "--threads", str(threads)]
        start = time.perf_counter()
        subprocess.run([*CLI, *argv], env=env, check=True, capture_output=True)
        seconds = time.perf_counter() - start
        metrics = Path(folder, "metrics.json")
        accuracy = json.loads(metrics.read_text())["test_accuracy"] if metrics.exists() else None
    return seconds, accuracy


def measure(quick: bool = False) -> dict[str, dict[str, float | None]]:
    """``{"<command>, <load>": {all_cpus_s, one_thread_s, ratio, accuracies}}`` for both commands and loads."""
    cpus = available_cpus()
    train = ["train", "vit_digits", *(["--set", "max_steps=40"] if quick else [])]
    rows: dict[str, dict[str, float | None]] = {}
    for load in ("idle", "one busy core"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load != "idle" else None
        try:
            for name, argv in (("train vit_digits", train), ("demo", ["demo"])):
                every, every_accuracy = _timed(argv, cpus)
                one, one_accuracy = _timed(argv, 1)
                rows[f"{name}, {load}"] = {
                    "all_cpus_s": round(every, 1),
                    "one_thread_s": round(one, 1),
                    "all_cpus_over_one_thread": round(every / one, 2),
                    "accuracy_all_cpus": every_accuracy,
                    "accuracy_one_thread": one_accuracy,
                }
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="train 40 steps instead of the preset's epochs")
    args = parser.parse_args()
    rows = measure(args.quick)
    for name, row in rows.items():
        print(
            f"{name:<32} all CPUs {row['all_cpus_s']:>6} s, one thread {row['one_thread_s']:>6} s, "
            f"ratio {row['all_cpus_over_one_thread']}"
        )
    record = {"cpus": available_cpus(), "quick": args.quick, "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "threads_cpu.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
