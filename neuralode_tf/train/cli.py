"""``neuralode-tf train``: run a preset or a config file, with overrides, on one or many processes.

Examples::

    neuralode-tf train vit_digits
    neuralode-tf train vit_digits --set epochs=5 lr=3e-4 model.method=rk4 model.steps=2
    neuralode-tf train --config run.toml --resume
    torchrun --nproc_per_node 2 -m neuralode_tf train vit_digits --set device=cpu
    neuralode-tf train --list
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

from .config import TrainConfig, apply_overrides, load_config
from .loop import train
from .presets import PRESETS

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="neuralode-tf", description="neuralode_tf command line")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "train", help="train a preset", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run.add_argument("preset", nargs="?", help="preset name (see --list)")
    run.add_argument("--config", help="JSON or TOML file with TrainConfig fields")
    run.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, e.g. lr=3e-4 model.dim=64")
    run.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint.pt")
    run.add_argument("--out-dir", help="output folder (default runs/<preset>)")
    run.add_argument("--list", action="store_true", help="list the presets and exit")
    args = parser.parse_args(argv)

    if args.list:
        for name, preset in PRESETS.items():
            print(f"{name:<22} {preset.description}")
        return 0
    values = load_config(args.config) if args.config else {}
    name = args.preset or values.get("preset")
    if name not in PRESETS:
        parser.error(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    defaults = {f.name: getattr(PRESETS[name].config, f.name) for f in fields(TrainConfig)}
    values = apply_overrides({**defaults, **values, "preset": name}, args.set)
    if args.resume:
        values["resume"] = True
    values["out_dir"] = args.out_dir or values.get("out_dir") or f"runs/{name}"
    result = train(TrainConfig(**values))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
