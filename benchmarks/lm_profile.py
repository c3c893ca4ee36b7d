"""Where ``CausalLM``'s training step differs from the plain GPT's (``benchmarks/lm_training.py``): the profile.

Three views, on the models of ``benchmarks/lm_training.py`` with the same weights:

1. **Operators** (``torch.profiler``, one training step at the small size after two warm-up steps): every ATen
   operator whose number of calls differs between ``causal_lm`` and ``gpt``, with its calls in each and
   ``causal_lm``'s self time. The matrix products, attention kernels, GELUs and LayerNorms are the same calls;
   what is left is what the library adds to the arithmetic.
2. **Python per forward**: the forward (no gradients) at a tiny size (:data:`TINY`: 4 layers, d = 32, one sequence
   of 8 tokens), where the arithmetic takes little and the interpreter most, for ``causal_lm`` and ``gpt`` (the
   least of ``--repeats`` timings of 200 forwards each), and ``cProfile``'s view of ``causal_lm``'s forward: the
   library's functions whose cumulative time is above 3% of it, with their own time and calls per forward.
3. **Compilation** (``torch._dynamo.explain`` of the whole model): graphs and graph breaks, with where each
   break is.

Prints the three tables and writes ``benchmarks/results/lm_profile_<device>.json`` (``--out``). Run:
``OMP_NUM_THREADS=1 python -m benchmarks.lm_profile``.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import datetime
import json
import pstats
import timeit
from pathlib import Path

import torch

from benchmarks.lm_training import SIZES, _data, _models, _step

TINY = dict(dim=32, depth=4, heads=2, batch=1, tokens=8)
COMMAND = "OMP_NUM_THREADS=1 python -m benchmarks.lm_profile"


def operators(size: dict) -> list[dict]:
    """The ATen operators whose call counts differ in one training step of ``causal_lm`` and of ``gpt``."""
    from torch.profiler import ProfilerActivity, profile

    models = _models(size, torch.device("cpu"))
    tokens, targets = _data(size, torch.device("cpu"))
    calls: dict[str, collections.Counter] = {}
    self_us: collections.Counter = collections.Counter()
    for name in ("gpt", "causal_lm"):
        step = _step(name, models[name], tokens, targets)
        step()
        step()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            step()
        calls[name] = collections.Counter()
        for event in prof.events():
            if event.name.startswith("aten::"):
                key = f"{event.name} {list(map(list, event.input_shapes))[:2]}"
                calls[name][key] += 1
                if name == "causal_lm":
                    self_us[key] += event.self_cpu_time_total
    rows = []
    for key in sorted(set(calls["gpt"]) | set(calls["causal_lm"])):
        ours, plain = calls["causal_lm"][key], calls["gpt"][key]
        if ours != plain:  # the self time of the extra calls, at the mean of all of them
            extra_us = self_us[key] * max(ours - plain, 0) / ours if ours else 0.0
            rows.append({"op": key, "gpt": plain, "causal_lm": ours, "extra_self_us": extra_us})
    return rows


def python_overhead(repeats: int) -> dict:
    """Forward times at :data:`TINY` (no gradients) and the library's functions in ``causal_lm``'s profile."""
    models = _models(TINY, torch.device("cpu"))
    tokens, _ = _data(TINY, torch.device("cpu"))
    seconds = {}
    with torch.no_grad():
        for name in ("gpt", "causal_lm", "hf_gpt2"):
            model = models[name]
            model(tokens)
            seconds[name] = min(timeit.repeat(lambda m=model: m(tokens), number=200, repeat=repeats)) / 200
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [models["causal_lm"](tokens) for _ in range(200)])
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = max(entry[3] for (path, _, name), entry in stats.items() if path.endswith("causal_lm.py"))
    functions = [
        {"function": f"{path.split('neuralode_tf/')[-1]}:{line}({name})", "calls_per_forward": calls / 200,
         "cumulative_share": cumulative / total, "own_share": own / total}
        for (path, line, name), (_, calls, own, cumulative, _) in stats.items()
        if "neuralode_tf" in path and cumulative / total > 0.03
    ]  # fmt: skip
    return {
        "size": TINY,
        "forward_us": {name: 1e6 * value for name, value in seconds.items()},
        "causal_lm_over_gpt_us": 1e6 * (seconds["causal_lm"] - seconds["gpt"]),
        "library_functions": sorted(functions, key=lambda row: -row["cumulative_share"]),
    }


def compilation(size: dict) -> dict:
    """Graphs and graph breaks of ``torch.compile`` of each whole model."""
    import torch._dynamo

    models = _models(size, torch.device("cpu"))
    tokens, _ = _data(size, torch.device("cpu"))
    out = {}
    for name in ("gpt", "causal_lm", "hf_gpt2"):
        torch._dynamo.reset()
        explained = torch._dynamo.explain(models[name])(tokens)
        breaks = sorted({_where(reason) for reason in explained.break_reasons})
        out[name] = {"graphs": explained.graph_count, "graph_breaks": explained.graph_break_count, "where": breaks}
    return out


def _where(reason: object) -> str:
    """The library's innermost frame of a graph break, and the reason's first line."""
    frames = [frame for frame in reason.user_stack if "neuralode_tf" in frame.filename]  # type: ignore[attr-defined]
    frame = (frames or reason.user_stack)[-1]  # type: ignore[attr-defined]
    first = reason.reason.splitlines()[0][:80]  # type: ignore[attr-defined]
    return f"{frame.filename.split('neuralode_tf/')[-1]}:{frame.lineno} ({frame.name}): {first}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timings of 200 tiny forwards each (the least counts)")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/lm_profile_cpu.json)")
    args = parser.parse_args()
    ops = operators(SIZES["small"])
    print("ATen operators whose calls differ in a training step (small size): calls in gpt, causal_lm; extra self us")
    for row in ops:
        print(f"  {row['gpt']:4d} {row['causal_lm']:4d} {row['extra_self_us']:9.0f}  {row['op']}")
    overhead = python_overhead(args.repeats)
    print(f"forward at {TINY}, no grad: " + ", ".join(f"{k} {v:.0f} us" for k, v in overhead["forward_us"].items()))
    print("  causal_lm's forward under cProfile: cumulative and own share, calls per forward, function")
    for row in overhead["library_functions"]:
        shares = f"{row['cumulative_share']:6.1%} {row['own_share']:6.1%}"
        print(f"  {shares} {row['calls_per_forward']:5.1f}  {row['function']}")
    compiled = compilation(SIZES["small"])
    for name, row in compiled.items():
        print(f"torch.compile({name}): {row['graphs']} graphs, {row['graph_breaks']} breaks")
        for where in row["where"]:
            print(f"  {where}")
    results = {"date": datetime.date.today().isoformat(), "command": COMMAND}
    results.update(threads=torch.get_num_threads(), torch=torch.__version__)
    results.update(operators=ops, python=overhead, compilation=compiled)
    out = args.out or Path(__file__).parent / "results" / "lm_profile_cpu.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
