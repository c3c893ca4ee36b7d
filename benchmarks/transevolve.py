"""TransEvolve's attention paths against a standard SDPA stack, forward + backward.

One TransEvolve encoder block of depth 6 (attention computed once from the block input, evolved with
depth; Dutta et al. 2021) against six standard pre-norm encoder blocks (``AttentionBranch`` through
``scaled_dot_product_attention`` + ``MLPBranch``, a hand-written loop), with the same width, heads,
batch and feed-forward (the full MLP, so only attention differs), at sequence lengths 256, 1k, 2k
and 4k. Each TransEvolve mode (``fidelity``, ``factored``, ``fused``, ``auto``) is timed in the same
run as the standard stack; the table reports ``time(standard) / time(mode)`` (above 1: TransEvolve
is faster) and peak memory of one step relative to the standard stack's.

Two reference rows put the ratios in context:

* ``materialised``: the standard stack with ``scaled_dot_product_attention`` forced onto its math
  backend, which builds the ``n × n`` weights like the attention the paper timed against (Table 4);
  ``time(materialised) / time(auto)`` is the comparison the paper's 1.1-1.2x speaks of.
* ``ceiling``: ``time(standard) / time(floor)``, where ``floor`` is the standard stack with its
  query/key/value projections and attention removed (each block keeps LayerNorm, ``W_O`` and the
  MLP, which TransEvolve-fullFF also runs at every layer). No TransEvolve path can beat this ratio.

Run: ``OMP_NUM_THREADS=2 python -m benchmarks.transevolve`` (``--quick`` for 256 and 1k only).
Writes ``benchmarks/results/transevolve_<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.harness import cuda_peak_of, peak_rss_in_subprocess, race, rss_growth_of
from neuralode_tf.models import TransEvolveEncoder
from neuralode_tf.nn import AttentionBranch, MLPBranch

DIM, HEADS, DEPTH = 256, 8, 6
BATCH = {256: 8, 1024: 2, 2048: 1, 4096: 1}
MODES = ("fidelity", "factored", "fused", "auto")
TARGETS = "auto: >= 1.3x at n=256, >= 1.0x at 1k/2k/4k; fused: memory <= standard"


class _StandardStack(nn.Module):
    """Six pre-norm blocks ``x + G(x)``, then ``+ F(.)``, as a plain loop.

    ``attention=False`` replaces ``G`` by ``W_O LN(x)``: the floor that TransEvolve cannot go below.
    """

    def __init__(self, attention: bool = True):
        super().__init__()

        def mixer() -> nn.Module:
            return AttentionBranch(DIM, HEADS) if attention else nn.Sequential(nn.LayerNorm(DIM), nn.Linear(DIM, DIM))

        self.blocks = nn.ModuleList(nn.ModuleList([mixer(), MLPBranch(DIM)]) for _ in range(DEPTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for mixer, mlp in self.blocks:
            x = x + mixer(x)
            x = x + mlp(x)
        return x


def _model(name: str) -> nn.Module:
    if name in ("standard", "materialised"):
        return _StandardStack()
    if name == "floor":
        return _StandardStack(attention=False)
    return TransEvolveEncoder(DIM, HEADS, num_blocks=1, layers_per_block=DEPTH, feed_forward="full", mode=name)


def _step(model: nn.Module, x: torch.Tensor, materialised: bool = False):
    def run() -> None:
        model(x).square().mean().backward()

    def run_materialised() -> None:
        with sdpa_kernel(SDPBackend.MATH):
            run()

    return run_materialised if materialised else run


def _case(name: str, n: int, device: torch.device) -> tuple[nn.Module, torch.Tensor, bool]:
    torch.manual_seed(0)
    model = _model(name).to(device)
    x = torch.randn(BATCH[n], n, DIM, device=device, requires_grad=True)
    return model, x, name == "materialised"


def _memory(name: str, n: int, device: torch.device) -> int:
    if device.type == "cuda":
        return cuda_peak_of(_step(*_case(name, n, device)))
    return peak_rss_in_subprocess("benchmarks.transevolve", {"name": name, "n": n})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only n = 256 and 1k")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="time only")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:  # one step in this fresh process; print the bytes it needed
        case = json.loads(args.memory_case)
        print(rss_growth_of(_step(*_case(case["name"], case["n"], torch.device("cpu")))))
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lengths = (256, 1024) if args.quick else (256, 1024, 2048, 4096)
    rows = []
    print(f"TransEvolve (depth {DEPTH}, full FF) vs {DEPTH} SDPA blocks; d={DIM}, {HEADS} heads, {device}")
    print(f"targets: {TARGETS}")
    print(
        f"{'n':>5} {'batch':>5} "
        + "".join(f"{m + ' speed':>16}{m + ' mem':>14}" for m in MODES)
        + "  vs materialised  ceiling"
    )
    for n in lengths:
        names = ("standard", "materialised", "floor", *MODES)
        steps = {name: _step(*_case(name, n, device)) for name in names}
        times = race(steps, repeats=args.repeats if n <= 1024 else max(2, args.repeats // 2))
        row = {"n": n, "batch": BATCH[n], "seconds": times}
        row["speedup"] = {m: times["standard"] / times[m] for m in MODES}
        row["speedup_vs_materialised"] = times["materialised"] / times["auto"]
        row["ceiling"] = times["standard"] / times["floor"]
        if not args.no_memory:
            memory = {name: _memory(name, n, device) for name in ("standard", *MODES)}
            row["peak_bytes"] = memory
            row["memory_ratio"] = {m: memory[m] / memory["standard"] for m in MODES}
        rows.append(row)
        ratio = row.get("memory_ratio", dict.fromkeys(MODES, math.nan))
        cells = "".join(f"{row['speedup'][m]:>15.2f}x{ratio[m]:>13.2f}x" for m in MODES)
        print(f"{n:>5} {BATCH[n]:>5} {cells}{row['speedup_vs_materialised']:>16.2f}x{row['ceiling']:>8.2f}x")
    out = Path(__file__).parent / "results" / f"transevolve_{device.type}.json"
    out.parent.mkdir(exist_ok=True)
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    setup = {"dim": DIM, "heads": HEADS, "depth": DEPTH, "threads": torch.get_num_threads(), "device": device_name}
    out.write_text(json.dumps({"setup": setup, "targets": TARGETS, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
