"""``neuralode-tf demo``: integrate a transformer field with several solvers; print errors and function evaluations.

A random 4-layer pre-norm transformer whose layers share one parameter set (a weight-shared stack of split
fields, as in Zhong et al. 2022, Table 1, last row) is integrated over depth ``[0, 4]``. With ``--sets 4`` every
layer has its own parameters and the field jumps at integer times: adaptive solvers then pay for the jumps
(torchdiffeq steps onto them; torchode rejects steps across them). Errors are max-abs differences at ``t = 4``
from a float64 dopri5 reference at ``rtol = atol = 1e-10``. The first row, Lie-Trotter with Euler and unit
steps, is the discrete transformer itself: one step of size 1 is the block ``x + G(x)``, then ``+ F(.)``
(Zhong et al. 2022, eqs. 1-3), so its error is that of the discrete network.

Examples::

    neuralode-tf demo
    neuralode-tf demo --sets 4 --dim 64
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from torch import Tensor

from .._typing import State
from ..fields import SplitField, WeightSharedField
from ..nn import AttentionBranch, MLPBranch
from ..numerics import solve
from ._threads import cpu_threads
from .config import ConfigError

__all__ = ["RUNS", "add_arguments", "problem", "run"]

RUNS: list[tuple[str, dict[str, Any]]] = [
    ("lie_trotter", dict(step_size=1.0)),
    ("lie_trotter", dict(steps=64)),
    ("strang", dict(steps=64, substep="midpoint")),
    ("euler", dict(steps=64)),
    ("midpoint", dict(steps=16)),
    ("rk4", dict(steps=8)),
    ("dopri5", dict(rtol=1e-6, atol=1e-6)),
    ("tsit5", dict(rtol=1e-6, atol=1e-6)),
]
"""The rows of the table: a method of :func:`~neuralode_tf.solve` and its settings."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options: the size of the transformer and of its input, its parameter sets and the seed."""
    parser.add_argument("--dim", type=int, default=32, help="token width (default 32)")
    parser.add_argument("--num-heads", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--tokens", type=int, default=16, help="tokens per sequence (default 16)")
    parser.add_argument("--batch", type=int, default=4, help="sequences (default 4)")
    parser.add_argument("--depth", type=int, default=4, help="layers, the length of depth-time (default 4)")
    parser.add_argument("--sets", type=int, default=1, help="independent parameter sets (divides depth; default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the parameters and the input (default 0)")
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: torch's, bounded by the CPUs available)"
    )


def _check_arguments(args: argparse.Namespace) -> None:
    """Raise :class:`~neuralode_tf.train.ConfigError` (the command line's usage error, exit code 2) unless ``--depth``
    is a positive integer and ``--sets`` one of its divisors, so that every parameter set covers as many layers."""
    if args.depth < 1:
        raise ConfigError(f"--depth must be a positive integer (the number of layers), got {args.depth}")
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be a positive integer, got {args.threads}")
    divisors = [k for k in range(1, args.depth + 1) if args.depth % k == 0]
    if args.sets not in divisors:
        raise ConfigError(
            f"--sets {args.sets} must divide --depth {args.depth}, so that every parameter set covers as many layers; "
            f"valid: {', '.join(map(str, divisors))}"
        )


def problem(args: argparse.Namespace) -> tuple[WeightSharedField, Tensor]:
    """The float64 field (``depth`` layers of attention then MLP from ``sets`` parameter sets) and the initial
    tokens ``(batch, tokens, dim)``, drawn after ``torch.manual_seed(seed)``."""
    torch.manual_seed(args.seed)
    layers = [SplitField(AttentionBranch(args.dim, args.num_heads), MLPBranch(args.dim)) for _ in range(args.sets)]
    field = WeightSharedField(layers, depth=args.depth).double()
    return field, torch.randn(args.batch, args.tokens, args.dim, dtype=torch.float64)


def run(args: argparse.Namespace) -> int:
    """Print the table of :data:`RUNS` for the options ``args`` (see :func:`add_arguments`); return 0. A ``sets``
    that does not divide ``depth`` raises :class:`~neuralode_tf.train.ConfigError` (exit code 2 on the command line)."""
    _check_arguments(args)
    with cpu_threads(args.threads):
        return _table(args)


@torch.no_grad()
def _table(args: argparse.Namespace) -> int:
    field, x = problem(args)
    t = [0.0, float(args.depth)]
    reference = _tensor(solve(field, x, t, method="dopri5", rtol=1e-10, atol=1e-10).y1)
    print(
        f"{args.depth}-layer transformer field ({args.sets} parameter sets), d={args.dim}, {args.num_heads} heads, "
        f"{args.tokens} tokens, batch {args.batch}; error at t={args.depth} vs dopri5 (rtol=atol=1e-10)\n"
    )
    print(f"{'method':<12} {'settings':<28} {'backend':<12} {'max |error|':>12} {'evals':>6} {'steps':>6} {'ms':>7}")
    for method, settings in RUNS:
        start = time.perf_counter()
        solution = solve(field, x, t, method=method, **settings)
        elapsed = 1e3 * (time.perf_counter() - start)
        error = (_tensor(solution.y1) - reference).abs().max().item()
        described = ", ".join(f"{k}={v}" for k, v in settings.items())
        stats = solution.stats
        print(
            f"{method:<12} {described:<28} {stats.backend:<12} {error:>12.3e} {stats.nfe:>6} "
            f"{stats.n_accepted:>6} {elapsed:>7.1f}"
        )
    print("\nevals of splitting methods count evaluations of one part (attention or MLP).")
    return 0


def _tensor(state: State) -> Tensor:
    """A state of a solve from the tensor ``x``: a tensor too."""
    if not isinstance(state, Tensor):
        raise TypeError(f"expected a tensor state, got {type(state).__name__}")
    return state
