"""TransEvolve's variants against a standard Transformer stack, forward + backward, with per-round samples.

**Competitors.** The paper's four variants (Dutta et al. 2021, §7.1; ``TRANSEVOLVE_VARIANTS``), as
encoders of six layers: fullFF-1 and randomFF-1 (one block of depth 6), fullFF-2 and randomFF-2 (two
blocks of depth 3), with the full (eq. 3) or random-rotation (eq. 11) feed-forward. Each is timed with
the paper's literal attention path (``fidelity``: eq. 6 with every term, an ``n × n`` product per
layer) and with ours (``auto``); fullFF-1 also with ``factored`` and ``fused``. A competitor is named
``"<variant> <mode>"``, e.g. ``"fullFF-2 auto"``. They run against two baselines of six pre-norm
encoder blocks (``AttentionBranch`` + ``MLPBranch``, a hand-written loop) of the same width, heads
and batch:

* ``standard``: attention through ``scaled_dot_product_attention`` (its fused kernels);
* ``materialised``: the same stack with SDPA forced onto its math backend, which builds the ``n × n``
  weights like the attention the paper timed against (Table 4: 1.0-1.3x at 1k-4k tokens, on TPUs);

and a reference row, ``floor``: the standard stack with its query/key/value projections and attention
removed (each block keeps LayerNorm, ``W_O`` and the MLP, which TransEvolve-fullFF also runs at every
layer). ``ceiling = time(standard) / time(floor)``: no fullFF path can beat that ratio. A second reference
row, ``limit``, is the limit TransEvolve itself has (:class:`_LimitStack`): the floor plus, at each layer, one
attention of the block's queries and keys over that layer's values at the best kernel torch offers
(``scaled_dot_product_attention``). ``limit = time(standard) / time(limit)``, and each fullFF-1 path's
``fraction_of_limit = time(limit) / time(path)``.

**Timing.** d = 256, 8 heads, lengths 256, 1k, 2k, 3k and 4k (batch :data:`BATCH`). At each length all
competitors run in one process, one warm-up step each, then ``--repeats`` rounds (default 5) of one step
of each in a shuffled order (:func:`benchmarks.harness.rounds`). ``paper_repro/claims`` judges the
speed claims on these per-round seconds. Peak memory of one step (a fresh process per case on CPU) is
measured for ``standard`` and the fullFF-1 modes.

**Output** (``--out``, default ``benchmarks/results/transevolve_<device>.json``): ``date``, ``command``,
``setup``, ``targets`` and ``rows``, one per length: ``n``, ``batch``, ``repeats``, ``rounds``
(competitor: seconds per round) and ``seconds`` (competitor: median); the ratios of fullFF-1 as in
earlier results, keyed by mode: ``speedup`` (``time(standard) / time(mode)``, above 1: TransEvolve is
faster), ``speedup_vs_materialised`` (``time(materialised) / time(auto)``); ``ceiling``; ``limit`` and
``fraction_of_limit`` (fullFF-1 mode: ``time(limit) / time(mode)``); and, unless
``--no-memory``, ``peak_bytes`` (competitor: bytes) and ``memory_ratio`` (fullFF-1 mode: over standard).

Run: ``OMP_NUM_THREADS=2 python -m benchmarks.transevolve`` (``--quick`` for 256 and 1k only).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.harness import cuda_peak_of, peak_rss_in_subprocess, provenance, rounds, rss_growth_of
from neuralode_tf.models import TRANSEVOLVE_VARIANTS, TransEvolveEncoder
from neuralode_tf.nn import AttentionBranch, MLPBranch

DIM, HEADS, DEPTH = 256, 8, 6
BATCH = {256: 8, 1024: 2, 2048: 1, 3072: 1, 4096: 1}
QUICK = (256, 1024)
MODES = ("fidelity", "factored", "fused", "auto")
REFERENCE = "fullFF-1"  # the variant whose ratios (speedup, memory_ratio, ...) keep the keys of earlier results
VARIANT_MODES = {name: MODES if name == REFERENCE else ("fidelity", "auto") for name in TRANSEVOLVE_VARIANTS}
COMPETITORS = (
    "standard",
    "materialised",
    "floor",
    "limit",
    *(f"{v} {m}" for v, modes in VARIANT_MODES.items() for m in modes),
)
TARGETS = "fullFF-1 auto: >= 1.3x at n=256, >= 1.0x at 1k-4k; fullFF-1 fused: memory <= standard"


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


class _LimitStack(nn.Module):
    """TransEvolve-fullFF-1's own limit: the floor plus, at each of the six layers, one attention at the best kernel.

    Queries and keys are projected once, from the block input (as TransEvolve does, eq. 6); each layer attends
    with them over its values ``LN(x)`` (eq. 9 without the depth bias) through ``scaled_dot_product_attention``,
    then applies ``W_O`` and the MLP as the floor does. It bounds the paths that compute a softmax at every depth
    (``fidelity``, ``fused``); ``factored`` computes its exponentials once per block and can beat it.
    """

    def __init__(self):
        super().__init__()
        self.query_key = nn.Sequential(nn.LayerNorm(DIM), nn.Linear(DIM, 2 * DIM))
        self.values = nn.ModuleList(nn.LayerNorm(DIM) for _ in range(DEPTH))
        self.outputs = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(DEPTH))
        self.mlps = nn.ModuleList(MLPBranch(DIM) for _ in range(DEPTH))

    def _heads(self, z: torch.Tensor) -> torch.Tensor:
        return z.unflatten(-1, (HEADS, -1)).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries, keys = map(self._heads, self.query_key(x).chunk(2, dim=-1))
        for values, output, mlp in zip(self.values, self.outputs, self.mlps):
            attended = F.scaled_dot_product_attention(queries, keys, self._heads(values(x)))
            x = x + output(attended.transpose(1, 2).flatten(-2))
            x = x + mlp(x)
        return x


def _model(name: str) -> nn.Module:
    if name in ("standard", "materialised"):
        return _StandardStack()
    if name == "floor":
        return _StandardStack(attention=False)
    if name == "limit":
        return _LimitStack()
    variant, mode = name.split()
    return TransEvolveEncoder(DIM, HEADS, mode=mode, **TRANSEVOLVE_VARIANTS[variant])


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


def _row(n: int, device: torch.device, repeats: int, memory: bool) -> dict:
    """Time every competitor at length ``n`` (and measure memory): one row of the results."""
    steps = {name: _step(*_case(name, n, device)) for name in COMPETITORS}
    samples = rounds(steps, repeats=repeats, warmup=1)
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    reference = {mode: seconds[f"{REFERENCE} {mode}"] for mode in MODES}
    row = {"n": n, "batch": BATCH[n], "repeats": repeats, "rounds": samples, "seconds": seconds}
    row["speedup"] = {mode: seconds["standard"] / t for mode, t in reference.items()}
    row["speedup_vs_materialised"] = seconds["materialised"] / reference["auto"]
    row["ceiling"] = seconds["standard"] / seconds["floor"]
    row["limit"] = seconds["standard"] / seconds["limit"]
    row["fraction_of_limit"] = {mode: seconds["limit"] / t for mode, t in reference.items()}
    if memory:
        peaks = {name: _memory(name, n, device) for name in ("standard", *(f"{REFERENCE} {m}" for m in MODES))}
        row["peak_bytes"] = peaks
        row["memory_ratio"] = {mode: peaks[f"{REFERENCE} {mode}"] / peaks["standard"] for mode in MODES}
    return row


def _print(row: dict) -> None:
    seconds, peaks = row["seconds"], row.get("peak_bytes", {})
    print(
        f"\nn = {row['n']}, batch {row['batch']}, {row['repeats']} rounds; "
        f"ceiling {row['ceiling']:.2f}x, TransEvolve limit {row['limit']:.2f}x"
    )
    print(f"  {'competitor':<20}{'median s':>10}{'vs standard':>13}{'vs materialised':>17}{'memory':>9}")
    for name, t in seconds.items():
        memory = f"{peaks[name] / peaks['standard']:>8.2f}x" if name in peaks else f"{'-':>9}"
        vs_standard, vs_materialised = seconds["standard"] / t, seconds["materialised"] / t
        print(f"  {name:<20}{t:>10.3f}{vs_standard:>12.2f}x{vs_materialised:>16.2f}x{memory}")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only n = 256 and 1k")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds at every length (at least 3)")
    parser.add_argument("--no-memory", action="store_true", help="time only")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/transevolve_<device>.json)")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:  # one step in this fresh process; print the bytes it needed
        case = json.loads(args.memory_case)
        print(rss_growth_of(_step(*_case(case["name"], case["n"], torch.device("cpu")))))
        return
    if args.repeats < 3:
        parser.error("--repeats must be at least 3: the claims ledger judges speed on >= 3 rounds per competitor")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or Path(__file__).parent / "results" / f"transevolve_{device.type}.json"
    lengths = QUICK if args.quick else tuple(BATCH)
    print(f"TransEvolve variants vs {DEPTH} pre-norm SDPA blocks; d={DIM}, {HEADS} heads, {device}; forward + backward")
    print(f"speed-up = time(baseline) / time(competitor), above 1: the competitor is faster; targets: {TARGETS}")
    rows = []
    for n in lengths:
        rows.append(_row(n, device, args.repeats, memory=not args.no_memory))
        _print(rows[-1])
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    setup = {"dim": DIM, "num_heads": HEADS, "depth": DEPTH, "threads": torch.get_num_threads(), "device": device_name}
    setup.update(torch=torch.__version__, warmup=1, competitors=list(COMPETITORS))
    results = {**provenance("benchmarks.transevolve"), "setup": setup}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**results, "targets": TARGETS, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
