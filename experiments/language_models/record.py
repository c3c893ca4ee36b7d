"""Record the language-model comparisons of the claims ledgers as JSON, three seeds per model.

``OMP_NUM_THREADS=1 python experiments/language_models/record.py [PRESET ...]`` trains every variant of each preset
(default: both) with :func:`neuralode_tf.train.compare_variants`, one run at a time, and writes ``PRESET.json`` next
to this script: the rows of ``neuralode-tf compare`` with each run's final validation loss and perplexity
(``val_loss``, ``perplexity``, from its ``metrics.json``) and its validation loss after each epoch (``val_curve``).

* ``nanogpt_tweets_char``: nanoGPT (``baseline``), the OT-Transformer (``ot``) and the same without its transport cost
  (``ot_unregularized``), for Kan et al.'s text-generation comparison (``paper_repro/claims/ot_transformer.toml``);
* ``zhong_nanogpt_tweets_char``: sequential and parallel layers, dropout 0, 0.1 and 0.3, for Zhong et al.'s Table 4
  (``paper_repro/claims/neural_ode_transformer.toml``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path

from neuralode_tf.train import VARIANTS, compare_variants

HERE = Path(__file__).resolve().parent
PRESETS = ("nanogpt_tweets_char", "zhong_nanogpt_tweets_char")
SEEDS = (0, 1, 2)


def with_validation(row: dict) -> dict:
    """``row`` with its run's final validation loss and perplexity and its validation loss after each epoch."""
    if row["non_finite"]:
        return {**row, "val_loss": None, "perplexity": None, "val_curve": None}
    run = Path(row["out_dir"])
    result = json.loads((run / "metrics.json").read_text())
    with open(run / "metrics.csv", newline="") as handle:
        curve = [float(r["val_loss"]) for r in csv.DictReader(handle) if not math.isnan(float(r["val_loss"]))]
    return {**row, "val_loss": result["val_loss"], "perplexity": result["perplexity"], "val_curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="*", metavar="PRESET", help=f"default: {' '.join(PRESETS)}")
    parser.add_argument("--out-dir", default="runs/language_models", help="where the runs write")
    parser.add_argument(
        "--variants",
        nargs="+",
        help="rerun these variants only and replace their rows in the recording, keeping the others (one-thread "
        "runs are deterministic, so this gives the file a full run gives)",
    )
    args = parser.parse_args()
    unknown = set(args.presets) - set(PRESETS)
    if unknown:
        parser.error(f"unknown presets {sorted(unknown)}; choose from {', '.join(PRESETS)}")
    for preset in args.presets or PRESETS:
        variants = {name: VARIANTS[preset][name] for name in args.variants} if args.variants else VARIANTS[preset]
        start = time.perf_counter()
        rows = compare_variants(preset, variants, SEEDS, Path(args.out_dir) / preset, progress=False)
        rows = [with_validation(row) for row in rows]
        recording = HERE / f"{preset}.json"
        if args.variants:
            kept = [row for row in json.loads(recording.read_text()) if row["variant"] not in variants]
            rows = sorted(kept + rows, key=lambda row: list(VARIANTS[preset]).index(row["variant"]))
        recording.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"{preset}: {len(variants) * len(SEEDS)} runs in {time.perf_counter() - start:.0f} s")
        for row in rows:
            print(f"  {row['variant']:<20} seed {row['seed']}  val_loss {row['val_loss']}  ppl {row['perplexity']}")


if __name__ == "__main__":
    main()
