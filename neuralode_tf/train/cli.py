"""``neuralode-tf train``: run a preset or a config file, with overrides, on one or many processes.
``neuralode-tf compare``: train a preset's model variants over several seeds and print a table.
``neuralode-tf demo``: integrate a random transformer field with several solvers and print their errors.

Examples::

    neuralode-tf train vit_digits
    neuralode-tf train vit_digits --set epochs=5 lr=3e-4 model.method=rk4 model.steps=2
    neuralode-tf train vit_digits --describe
    neuralode-tf train --config run.toml --resume
    torchrun --nproc_per_node 2 -m neuralode_tf train vit_digits --set device=cpu
    neuralode-tf train --list
    neuralode-tf compare ot_mnist_digits --seeds 0 1 2 --sweep
    neuralode-tf demo --sets 4

A run is ``TrainConfig(preset, **settings)`` with the settings of the config file and of --set: from Python,
``train(TrainConfig("vit_digits", epochs=5))`` is ``neuralode-tf train vit_digits --set epochs=5``. --describe
prints the run's settings and the ``model.*`` and ``data.*`` keys its preset accepts, with their values.

Every setting is checked before anything is written (an unknown key, a wrong type or a value out of range is an
error naming it, and an earlier run in the output folder is left as it was). --resume refuses a change to a setting
the checkpoint was trained with (lr, seed, batch_size, model.*, data.*, ...), applies more epochs or
steps, and records in config.json what the resumed run used; with no checkpoint in the folder it says so on stderr
and trains from scratch. SIGTERM or Ctrl-C stops a run after the current step
with a checkpoint; --resume continues it. Exit codes: 0 done; 2 invalid settings (nothing written); 1 the output
folder cannot be written or a checkpoint is unreadable or unsafe to load; 130 (SIGINT) or 143 (SIGTERM) stopped
by that signal, checkpoint written.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from .._renamed import renamed
from . import demo
from ._checkpoint import CheckpointError, RunFolderError
from ._describe import describe
from ._signals import TrainingInterrupted
from .compare import compare_variants, markdown_table, step_sweep
from .config import RENAMED_PRESETS, ConfigError, TrainConfig, apply_overrides, load_config
from .loop import train
from .presets import PRESETS, VARIANTS
from .setup import ModelInputError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` and return its exit code (see the module docstring): invalid settings exit
    through ``argparse`` with 2, a run folder that cannot be written or a refused checkpoint return 1 with the
    error, and a run stopped by SIGINT or SIGTERM returns 128 + the signal's number once its checkpoint is written."""
    parser = argparse.ArgumentParser(prog="neuralode-tf", description="neuralode_tf command line")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "train", help="train a preset", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run.add_argument("preset", nargs="?", help="preset name (see --list)")
    run.add_argument("--config", help="JSON or TOML file with TrainConfig fields")
    run.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, e.g. lr=3e-4 model.dim=64")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue from out_dir/checkpoint.pt (none there: say so and train from scratch); settings that shape "
        "the checkpoint (lr, seed, batch_size, model.*, data.*, ...) cannot change, epochs and max_steps can",
    )
    run.add_argument("--out-dir", help="output folder (default runs/<preset>)")
    run.add_argument("--list", action="store_true", help="list the presets and exit")
    run.add_argument(
        "--describe", action="store_true", help="print the run's settings and its model.* and data.* keys, and exit"
    )
    versus = commands.add_parser("compare", help="train a preset's model variants over seeds (VARIANTS)")
    versus.add_argument("preset", type=_with_variants, help=f"a preset with variants: {', '.join(sorted(VARIANTS))}")
    versus.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    versus.add_argument("--variants", nargs="+", help="a subset of the variants (default: all)")
    versus.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every run")
    versus.add_argument("--out-dir", help="output folder (default runs/compare/<preset>)")
    versus.add_argument("--sweep", action="store_true", help="evaluate continuous runs with 1-20 Euler steps")
    versus.add_argument(
        "--workers", type=int, default=1, help="runs in parallel, one process and one thread each (default 1)"
    )
    demo.add_arguments(
        commands.add_parser(
            "demo",
            help="integrate a transformer field with several solvers",
            description=demo.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("default", DeprecationWarning)  # a former preset name is reported, and still runs
        return _run(parser, parser.parse_args(argv))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        if args.command == "demo":
            return demo.run(args)
        return _compare(args) if args.command == "compare" else _train(args, parser)
    except (ConfigError, ModelInputError) as error:  # a model that cannot take the data asked for: a usage error
        parser.error(str(error))
    except (RunFolderError, CheckpointError) as error:
        print(f"neuralode-tf {args.command}: error: {error}", file=sys.stderr)
        return 1
    except TrainingInterrupted as stop:
        print(f"neuralode-tf {args.command}: {stop}", file=sys.stderr)
        return stop.exit_code


def _train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Train the preset or config file with the overrides and print the result as JSON (or, with --describe,
    print the run's settings and keys)."""
    if args.list:
        width = max(map(len, PRESETS))
        for listed, preset in PRESETS.items():
            print(f"{listed:<{width}} {preset.description}")
        return 0
    values = load_config(args.config) if args.config else {}
    name = args.preset or values.get("preset")
    values = apply_overrides({**values, "preset": name}, args.set)
    if args.resume:
        values["resume"] = True
    if args.out_dir:
        values["out_dir"] = args.out_dir
    config = TrainConfig(**values)
    if args.describe:
        print(describe(config, PRESETS[config.preset]))
        return 0
    print(json.dumps(train(config)))
    return 0


def _with_variants(name: str) -> str:
    """The ``compare`` command's preset: one with variants (a former name is accepted with a warning)."""
    name = renamed("preset", name, RENAMED_PRESETS)
    if name not in VARIANTS:
        raise argparse.ArgumentTypeError(f"{name!r} has no variants; choose from {', '.join(sorted(VARIANTS))}")
    return name


def _compare(args: argparse.Namespace) -> int:
    """Train the variants, write ``rows.json`` and ``table.md`` to the output folder, print the table."""
    variants = VARIANTS[args.preset]
    unknown = [name for name in args.variants or () if name not in variants]
    if unknown:
        raise ConfigError(f"unknown --variants {unknown} for {args.preset}; valid: {', '.join(variants)}")
    chosen = {name: variants[name] for name in (args.variants or variants)}
    values = {**apply_overrides({}, args.set), "progress": False}  # the runs' bars would interleave
    out = Path(args.out_dir or f"runs/compare/{args.preset}")
    rows = compare_variants(args.preset, chosen, tuple(args.seeds), out, args.workers, **values)
    if args.sweep:
        for row in rows:  # the discrete baseline has no step count to vary
            continuous = chosen[row["variant"]].get("field") in ("composed", "node")
            row["sweep"] = step_sweep(row["out_dir"]) if continuous and not row["non_finite"] else None
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=2))
    table = markdown_table(rows)
    (out / "table.md").write_text(table)
    print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
