"""Cached against uncached generation with :class:`~neuralode_tf.models.CausalLM`: the KV cache's speed-up.

**Model.** d = 128, 4 layers of 4 heads, learned positions, block 512 (so that no window slides), the split
reading solved with ``rk4`` (2 steps per layer: 8 steps on ``[0, 4]``, 32 field evaluations per forward) or
``euler`` (one step per layer: the parallel blocks of Zhong et al.), weights as initialised (seed 0).

**Competitors.** For each method and batch (1 and 8), ``generate`` of :data:`NEW_TOKENS` tokens after a prompt of
:data:`PROMPT` tokens, greedily (``top_k=1``): ``cached`` (``cache=True``: each step solves the new token alone,
reading the earlier tokens' keys and values per step, stage and layer) and ``uncached`` (``cache=False``: each
step solves the whole context). Both run in one process: ``--repeats`` rounds of one
call of each in a shuffled order (:func:`benchmarks.harness.rounds`), after a warm-up generation of
:data:`WARMUP_TOKENS` tokens each. The two must generate the same tokens
(``same_tokens``; the cached logits equal the recomputed ones up to rounding, ``tests/test_causal_lm.py``).

**Output** (``--out``, default ``benchmarks/results/generation_<device>.json``): ``date``, ``command``, ``setup``
and ``rows``, one per method and batch: ``method``, ``batch``, ``repeats``, ``rounds`` (competitor: seconds per
round), ``seconds`` (competitor: median), ``tokens_per_second`` (competitor: new tokens of the whole batch per
second, from the median), ``speedup`` (``time(uncached) / time(cached)`` of the medians, above 1: the cache is
faster), ``speedup_paired`` (the median over rounds of the ratio within a round, which cancels slow spells of a
shared machine, :func:`benchmarks.harness.paired_ratios`) and ``same_tokens``.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.generation`` (``--quick``: 64 new tokens). One thread: on a busy
machine two OpenMP threads spin against other processes and a step's time varies tenfold.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.harness import rounds
from neuralode_tf.models import CausalLM

DIM, DEPTH, HEADS, VOCAB, BLOCK = 128, 4, 4, 65, 512
PROMPT, NEW_TOKENS, QUICK_TOKENS, WARMUP_TOKENS = 16, 256, 64, 8
METHODS = {"rk4": dict(method="rk4", steps=2 * DEPTH), "euler": dict(method="euler")}
BATCHES = (1, 8)


def _model(method: str, device: torch.device) -> CausalLM:
    torch.manual_seed(0)
    model = CausalLM(VOCAB, DIM, DEPTH, HEADS, block_size=BLOCK, **METHODS[method])
    return model.to(device).eval()


def _generation(
    model: CausalLM, prompt: torch.Tensor, new: int, cache: bool, out: list[torch.Tensor]
) -> Callable[[], None]:
    def run() -> None:
        out.append(model.generate(prompt, new, top_k=1, cache=cache))

    return run


def _row(method: str, batch: int, new: int, device: torch.device, repeats: int) -> dict:
    """Time cached against uncached generation for one method and batch: one row of the results."""
    model = _model(method, device)
    prompt = torch.randint(0, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(1)).to(device)
    outputs: dict[str, list[torch.Tensor]] = {"cached": [], "uncached": []}
    for cache in (True, False):  # the warm-up: a short generation of each (a full one costs minutes uncached)
        model.generate(prompt, WARMUP_TOKENS, top_k=1, cache=cache)
    steps = {name: _generation(model, prompt, new, name == "cached", outputs[name]) for name in outputs}
    samples = rounds(steps, repeats=repeats, warmup=0)
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    same = all(torch.equal(a, b) for a, b in zip(outputs["cached"], outputs["uncached"]))
    return {
        "method": method,
        "batch": batch,
        "repeats": repeats,
        "rounds": samples,
        "seconds": seconds,
        "tokens_per_second": {name: batch * new / t for name, t in seconds.items()},
        "speedup": seconds["uncached"] / seconds["cached"],
        "speedup_paired": statistics.median(u / c for u, c in zip(samples["uncached"], samples["cached"])),
        "same_tokens": same,
    }


def _command() -> str:
    threads = os.environ.get("OMP_NUM_THREADS")
    command = shlex.join(["python", "-m", "benchmarks.generation", *sys.argv[1:]])
    return f"OMP_NUM_THREADS={threads} {command}" if threads else command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TOKENS} new tokens instead of {NEW_TOKENS}")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per method and batch (at least 3)")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/generation_<device>.json)")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or Path(__file__).parent / "results" / f"generation_{device.type}.json"
    new = QUICK_TOKENS if args.quick else NEW_TOKENS
    print(f"CausalLM generation, d={DIM}, {DEPTH} layers, {HEADS} heads, prompt {PROMPT}, {new} new tokens, {device}")
    print("speed-up = time(uncached) / time(cached), above 1: the KV cache is faster")
    header = f"{'cached s':>11}{'uncached s':>12}{'speed-up':>10}{'paired':>10}{'same tokens':>13}"
    print(f"  {'method':<8}{'batch':>6}{header}")
    rows = []
    for method in METHODS:
        for batch in BATCHES:
            row = _row(method, batch, new, device, args.repeats)
            rows.append(row)
            seconds = row["seconds"]
            print(
                f"  {method:<8}{batch:>6}{seconds['cached']:>11.3f}{seconds['uncached']:>12.3f}"
                f"{row['speedup']:>9.2f}x{row['speedup_paired']:>9.2f}x{row['same_tokens']!s:>13}"
            )
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    setup = dict(dim=DIM, depth=DEPTH, num_heads=HEADS, vocab_size=VOCAB, block_size=BLOCK, prompt=PROMPT)
    setup.update(new_tokens=new, methods=METHODS, threads=torch.get_num_threads(), device=device_name)
    setup.update(torch=torch.__version__, warmup_tokens=WARMUP_TOKENS, competitors=["cached", "uncached"])
    results = {"date": datetime.date.today().isoformat(), "command": _command(), "setup": setup, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
