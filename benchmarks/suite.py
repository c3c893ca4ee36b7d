"""The performance suite: framework overhead, compiled solving, memory against steps, adaptive solving.

Every figure is a ratio of medians of forward + backward passes timed round-robin in one process
(:mod:`benchmarks.harness`), so it holds on a noisy machine. Peak memory on CPU is the growth of the peak
resident size (``VmHWM``) of a fresh process per case, over a second, measured step (the first loads
libraries), with glibc returning freed memory at once so the peak follows live tensors; on GPU it is
``torch.cuda.max_memory_allocated``.

1. **Overhead**: ``solve`` with the built-in euler and rk4 (6 steps) on a 6-layer parallel field (d = 128,
   64 tokens, batch 16) against a hand-written loop over the same layers; torchdiffeq and torchode in the
   same table. Target: built-in ≤ 1.03x the loop.
2. **Compile**: ``solve(..., compile=True)`` against the eager hand loop at a size where Python dominates
   (d = 32, 16 tokens, batch 8, 12 Euler steps on a 12-layer field). Target: ≥ 1.5x faster; and against
   ``torch.compile`` of the hand loop itself, with the same inductor options: ≥ 0.97x its speed. Also
   reported: the same with the guards on the field's modules skipped (``compile={"guard_filter_fn": ...}``).
3. **Memory**: peak memory of forward + backward with 64 steps over 8 steps (Euler, and RK4, on
   ``[0, 6]``, the 6-layer field with one shared parameter set), for backprop through the solver,
   checkpointing and the two adjoints. Target: ≤ 1.2x for checkpointing and the adjoints.
3b. **Checkpointing's memory/time trade-off**: for 64 and 256 Euler steps (the same field, batch 4), time and peak
   memory of forward + backward relative to backprop's, measured in the same run, for budgets of stored states
   ``checkpoints=`` 4, 8, 16, 32 and ``N - 1``, and for the default recursive halving; with the steps recomputed
   per step (``stats.nfe_backward / stats.nfe``).
4. **TransEvolve**: the rows of ``benchmarks/results/transevolve_<device>.json`` (``python -m
   benchmarks.transevolve``), with their targets.
5. **Adaptive**: function evaluations and time of dopri5 and tsit5 on a trained ViT's field (the
   ``vit_digits`` preset, trained for a few epochs here), torchdiffeq against torchode with batch-joint
   and per-sample step sizes (forward solves, rtol = atol = 1e-4).

Run: ``OMP_NUM_THREADS=2 python -m benchmarks.suite`` (``--quick``: fewer repeats, no adaptive section).
Writes ``benchmarks/results/suite_<device>.json``, with each competitor's median time (``seconds``) beside the
ratios, which :mod:`benchmarks.side_by_side` lays out as one table.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import cuda_peak_of, paired, paired_ratios, peak_rss_in_subprocess, race, rss_growth_of
from neuralode_tf import solve
from neuralode_tf.models import transformer_field
from neuralode_tf.numerics import COMPILE_OPTIONS, methods

RESULTS = Path(__file__).parent / "results"
TARGETS = {
    "overhead": "builtin euler and rk4 <= 1.03x the hand loop",
    "compile": "solve(compile=True) >= 1.5x faster than the eager hand loop, and >= 0.97x the compiled hand loop",
    "memory": "peak(64 steps) / peak(8 steps) <= 1.2x for checkpoint and the adjoints",
}
MEMORY_CONFIGS = {
    "backprop (euler)": dict(method="euler", gradient="backprop"),
    "checkpoint (euler)": dict(method="euler", gradient="checkpoint"),
    "checkpoint (rk4)": dict(method="rk4", gradient="checkpoint"),
    "torchdiffeq adjoint (euler)": dict(method="euler", gradient="adjoint", backend="torchdiffeq"),
    "torchdiffeq adjoint (rk4)": dict(method="rk4_38", gradient="adjoint", backend="torchdiffeq"),  # its rk4
    "torchode adjoint (euler)": dict(method="euler", gradient="adjoint", backend="torchode"),
}
_TORCHDIFFEQ = {"euler": "euler", "rk4": "rk4_38"}
"""torchdiffeq's name for each method, in our names (its ``rk4`` is Kutta's 3/8 rule)."""
PARETO_STEPS = (64, 256)
PARETO_BUDGETS = (4, 8, 16, 32)
"""Budgets of the memory/time table (section 3b), besides ``N - 1`` (every state, one step's activations)."""
PARETO_BATCH = 4


def _problem(dim: int, tokens: int, batch: int, layers: int, device: torch.device, num_sets: int | None = None):
    torch.manual_seed(0)
    field = transformer_field(dim, layers, 4, field="parallel", num_sets=num_sets).to(device)
    x = torch.randn(batch, tokens, dim, device=device, requires_grad=True)
    return field, x


def _hand_loop(field, x: torch.Tensor, method: str) -> torch.Tensor:
    """The same layers stepped by hand, one unit step per layer (layer k on [k, k + 1))."""
    for k, layer in enumerate(field.layers):
        t = float(k)
        if method == "euler":
            x = x + layer(t, x)
        else:  # classic rk4; the layer is constant on the step
            k1 = layer(t, x)
            k2 = layer(t, x + 0.5 * k1)
            k3 = layer(t, x + 0.5 * k2)
            k4 = layer(t, x + k3)
            x = x + (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return x


def _backward(run):
    def step() -> None:
        run().square().mean().backward()

    return step


def overhead(device: torch.device, repeats: int) -> dict:
    field, x = _problem(128, 64, 16, 6, device)
    rows = {}
    for method in ("euler", "rk4"):
        steps = {
            "hand loop": _backward(lambda m=method: _hand_loop(field, x, m)),
            "builtin": _backward(lambda m=method: solve(field, x, [0.0, 6.0], method=m, steps=6).y1),
            "torchdiffeq": _backward(  # torchdiffeq's own rk4 is Kutta's 3/8 rule, rk4_38 here: the same cost
                lambda m=method: solve(field, x, [0.0, 6.0], method=_TORCHDIFFEQ[m], steps=6, backend="torchdiffeq").y1
            ),
        }
        if method == "euler":
            steps["torchode"] = _backward(
                lambda: solve(field, x, [0.0, 6.0], method="euler", steps=6, backend="torchode", per_sample=False).y1
            )
        rows[method] = paired(steps, "hand loop", repeats=2 * repeats, warmup=2)
    return rows


def compiled(device: torch.device, repeats: int) -> dict:
    field, x = _problem(32, 16, 8, 12, device)
    settings = dict(method="euler", steps=12, compile=True)
    start = time.perf_counter()
    _backward(lambda: solve(field, x, [0.0, 12.0], **settings).y1)()
    compile_seconds = time.perf_counter() - start
    eager = _hand_loop(field, x, "euler")
    gap = (solve(field, x, [0.0, 12.0], **settings).y1 - eager).abs().max().item()
    options = COMPILE_OPTIONS if device.type == "cpu" else {}  # the defaults solve(compile=True) takes there
    hand_compiled = torch.compile(lambda y: _hand_loop(field, y, "euler"), options=options)
    unguarded = dict(settings, compile={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})
    steps = {
        "hand loop": _backward(lambda: _hand_loop(field, x, "euler")),
        "solve eager": _backward(lambda: solve(field, x, [0.0, 12.0], method="euler", steps=12).y1),
        "solve compiled": _backward(lambda: solve(field, x, [0.0, 12.0], **settings).y1),
        "solve compiled, module guards skipped": _backward(lambda: solve(field, x, [0.0, 12.0], **unguarded).y1),
        "hand loop compiled": _backward(lambda: hand_compiled(x)),
    }
    # Paired with the compiled hand loop, whose target (>= 0.97x) is the tightest; a few ms each: more rounds.
    timed = paired(steps, "hand loop compiled", repeats=4 * repeats, warmup=3)
    ratios, eager_loop = timed["ratio"], timed["ratio"]["hand loop"]
    return {
        "seconds": timed["seconds"],
        "speed vs compiled hand loop": 1 / ratios["solve compiled"],
        "speedup over hand loop": eager_loop / ratios["solve compiled"],
        "speedup, module guards skipped": eager_loop / ratios["solve compiled, module guards skipped"],
        "compiled hand loop speedup": eager_loop,
        "eager solve / hand loop": ratios["solve eager"] / eager_loop,
        "max-abs vs eager": gap,
        "compile seconds": compile_seconds,
    }


def _memory_step(settings: dict, steps: int, device: torch.device, batch: int = 16):
    # One parameter set shared by the 6 layers: torchode's backsolve evaluates the field under vmap,
    # where a time-dependent choice of layer cannot be made.
    field, x = _problem(128, 64, batch, 6, device, num_sets=1)
    return _backward(lambda: solve(field, x, [0.0, 6.0], steps=steps, **settings).y1)


def _peak(settings: dict, steps: int, device: torch.device, batch: int = 16) -> int:
    """Peak memory of one forward + backward pass of :func:`_memory_step` (module docstring)."""
    if device.type == "cuda":
        return cuda_peak_of(_memory_step(settings, steps, device, batch))
    case = {"settings": settings, "steps": steps, "batch": batch}
    return peak_rss_in_subprocess("benchmarks.suite", case, release_freed=True)


def memory_time(device: torch.device, repeats: int) -> dict:
    """The price of flat memory: time of forward + backward with 64 steps over backprop's, same method."""
    rows = {}
    for method in ("euler", "rk4"):
        configs = {f"backprop ({method})": dict(method=method, gradient="backprop")}
        configs.update((c, s) for c, s in MEMORY_CONFIGS.items() if c.endswith(f"({method})"))
        steps = {config: _memory_step(settings, 64, device) for config, settings in configs.items()}
        timed = paired(steps, f"backprop ({method})", repeats=repeats, warmup=1)
        rows.update(
            {
                config: {"ratio": timed["ratio"].get(config, 1.0), "seconds": timed["seconds"][config]}
                for config in configs
            }
        )
    return rows


def memory(device: torch.device) -> dict:
    rows = {}
    for config, settings in MEMORY_CONFIGS.items():
        peaks = {steps: _peak(settings, steps, device) for steps in (8, 64)}
        rows[config] = {"peak 8": peaks[8], "peak 64": peaks[64], "ratio": peaks[64] / peaks[8]}
    return rows


def pareto(
    device: torch.device, repeats: int, steps_list: tuple[int, ...] = PARETO_STEPS, batch: int = PARETO_BATCH
) -> dict:
    """Section 3b: for each number of Euler steps ``N``, each budget's steps recomputed per step, and its time and
    peak memory of forward + backward over backprop's (times round-robin, memory as in section 3)."""
    table = {}
    for steps in steps_list:
        configs = {"backprop": dict(method="euler")}
        for budget in sorted({*PARETO_BUDGETS, steps - 1}):
            configs[f"checkpoints={budget}"] = dict(method="euler", gradient="checkpoint", checkpoints=budget)
        configs["checkpoints=None (halving)"] = dict(method="euler", gradient="checkpoint")
        passes = {config: _memory_step(settings, steps, device, batch) for config, settings in configs.items()}
        times = paired_ratios(passes, "backprop", repeats=repeats, warmup=1)
        peaks = {config: _peak(settings, steps, device, batch) for config, settings in configs.items()}
        table[steps] = {
            config: {
                "recomputed per step": _recomputed_per_step(settings, steps),
                "time vs backprop": times.get(config, 1.0),
                "memory vs backprop": peaks[config] / peaks["backprop"],
                "peak": peaks[config],
            }
            for config, settings in configs.items()
        }
    return table


def _recomputed_per_step(settings: dict, steps: int) -> float:
    """``stats.nfe_backward / stats.nfe`` of ``settings``: a property of the schedule, counted on a tiny field."""
    field, x = _problem(8, 4, 1, 6, torch.device("cpu"), num_sets=1)
    solution = solve(field, x, [0.0, 6.0], steps=steps, **settings)
    solution.y1.sum().backward()
    return solution.stats.nfe_backward / solution.stats.nfe


def _print_pareto(table: dict, batch: int = PARETO_BATCH) -> None:
    print(
        f"3b. checkpointing's memory/time trade-off: Euler on [0, 6], 6 layers, d=128, 64 tokens, batch {batch}; "
        "forward + backward over backprop's"
    )
    for steps, rows in table.items():
        print(f"   N={steps:<4} {'':<27} recomputed/step   time  memory")
        for config, row in rows.items():
            print(
                f"            {config:<27} {row['recomputed per step']:>15.2f} {row['time vs backprop']:>6.2f}x "
                f"{row['memory vs backprop']:>6.3f}x ({row['peak'] / 2**20:.0f} MiB)"
            )


def adaptive(device: torch.device) -> dict:
    from neuralode_tf.train import TrainConfig, build_setup, train

    out = Path(tempfile.mkdtemp(prefix="bench_adaptive_"))
    config = TrainConfig(preset="vit_digits", epochs=5, out_dir=str(out), progress=False, device=device.type)
    train(config)
    setup = build_setup(config)
    setup.model.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=True)["model"])
    model = setup.model.to(device).eval()
    field = model.encoder.field
    with torch.no_grad():
        y0 = model.tokens(setup.data.test.x[:64].to(device))
    rows = {}
    backends = {
        "torchdiffeq": dict(backend="torchdiffeq"),
        "torchode batch-joint": dict(backend="torchode", per_sample=False),
        "torchode per-sample": dict(backend="torchode", per_sample=True),
    }
    for method in ("dopri5", "tsit5"):
        for name, settings in backends.items():
            if method not in methods(settings["backend"]):  # torchdiffeq has no tsit5
                continue
            with torch.no_grad():
                solution = solve(field, y0, [0.0, 4.0], method=method, rtol=1e-4, atol=1e-4, **settings)
                seconds = race(
                    {
                        "run": lambda s=settings, m=method: solve(
                            field, y0, [0.0, 4.0], method=m, rtol=1e-4, atol=1e-4, **s
                        )
                    },
                    repeats=3,
                )["run"]
            rows[f"{method} {name}"] = {
                "nfe": solution.stats.nfe,
                "accepted": solution.stats.n_accepted,
                "rejected": solution.stats.n_rejected,
                "seconds": seconds,
            }
    return rows


def _transevolve(device: torch.device) -> list[dict] | None:
    path = RESULTS / f"transevolve_{device.type}.json"
    if not path.is_file():
        return None
    return [
        {"n": row["n"], "auto speed": row["speedup"]["auto"], "fused memory": row.get("memory_ratio", {}).get("fused")}
        for row in json.loads(path.read_text())["rows"]
    ]


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats; skip the adaptive section")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:  # one step in this fresh process; print the bytes it needed
        case = json.loads(args.memory_case)
        step = _memory_step(case["settings"], case["steps"], torch.device("cpu"), case["batch"])
        print(rss_growth_of(step, warmup=True))
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    repeats = 7 if args.quick else 21
    results = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "targets": TARGETS,
    }

    results["overhead"] = over = overhead(device, repeats)
    print("1. overhead: time / time(hand loop), forward + backward, 6 layers, d=128, 64 tokens, batch 16")
    for method, row in over.items():
        cells = "  ".join(f"{name} {value:.3f}x" for name, value in row["ratio"].items())
        print(f"   {method:<6} {cells}   [{_verdict(row['ratio']['builtin'] <= 1.03)}: builtin <= 1.03x]")

    results["compile"] = comp = compiled(device, repeats)
    print("2. compile (d=32, 16 tokens, batch 8, 12 Euler steps):")
    print(
        f"   solve(compile=True) {comp['speedup over hand loop']:.2f}x faster than the eager hand loop "
        f"[{_verdict(comp['speedup over hand loop'] >= 1.5)}: >= 1.5x]; with the field's module guards skipped "
        f"{comp['speedup, module guards skipped']:.2f}x; torch.compile of the hand loop "
        f"{comp['compiled hand loop speedup']:.2f}x; compiled solve over the compiled hand loop "
        f"{comp['speed vs compiled hand loop']:.3f}x "
        f"[{_verdict(comp['speed vs compiled hand loop'] >= 0.97)}: >= 0.97x]; eager solve / hand loop "
        f"{comp['eager solve / hand loop']:.3f}x; max-abs vs eager {comp['max-abs vs eager']:.1e}; "
        f"compiled in {comp['compile seconds']:.0f} s"
    )

    results["memory"] = mem = memory(device)
    slower = memory_time(device, max(3, repeats // 4))
    print("3. memory: peak(64 steps) / peak(8 steps), forward + backward; time over backprop's at 64 steps")
    for config, row in mem.items():
        row["time vs backprop"], row["seconds"] = slower[config]["ratio"], slower[config]["seconds"]
        target = "" if config.startswith("backprop") else f" [{_verdict(row['ratio'] <= 1.2)}: <= 1.2x]"
        mib = f"{row['peak 8'] / 2**20:.0f} -> {row['peak 64'] / 2**20:.0f} MiB"
        print(f"   {config:<28} {row['ratio']:.2f}x ({mib}){target}; time {row['time vs backprop']:.2f}x")

    results["pareto"] = trade_off = pareto(device, max(3, repeats // 4))
    _print_pareto(trade_off)

    results["transevolve"] = te = _transevolve(device)
    if te:
        print("4. TransEvolve auto vs six SDPA blocks (recorded by benchmarks.transevolve):")
        for row in te:
            target = 1.3 if row["n"] == 256 else 1.0
            print(
                f"   n={row['n']:>5}: {row['auto speed']:.2f}x [{_verdict(row['auto speed'] >= target)}: >= {target}x]"
            )

    if not args.quick:
        results["adaptive"] = ada = adaptive(device)
        print("5. adaptive solves of a trained vit_digits field on [0, 4], 64 images, rtol = atol = 1e-4:")
        for name, row in ada.items():
            print(
                f"   {name:<28} nfe {row['nfe']:>4}  accepted {row['accepted']:>3}  rejected {row['rejected']:>2}"
                f"  {row['seconds'] * 1e3:8.1f} ms"
            )

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"suite_{device.type}.json"
    out.write_text(
        json.dumps(results, indent=2, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
