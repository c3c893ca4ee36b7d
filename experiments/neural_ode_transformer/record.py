"""Record the 30-epoch digits runs of ``paper_repro/neural_ode_transformer`` (Zhong et al. 2022) as JSON.

``OMP_NUM_THREADS=1 python experiments/neural_ode_transformer/record.py`` trains the notebook's models (its
``EXPERIMENTS`` with ``NEURALODE_TF_FULL=1``: 30 epochs, 50 warm-up steps, seeds 0 1 2) through
:func:`neuralode_tf.train.compare_variants` on the ``vit_digits`` preset, one run per worker process (two),
and writes one file of rows per comparison next to this script:

* ``parallel_vs_sequential.json``: ``sequential`` / ``parallel`` (the preset's 4-layer ViT) and
  ``sequential_12`` / ``parallel_12`` (12 layers, d = 32, patch 4);
* ``weight_sharing.json``: ``parallel_k``, 12 layers built from k = 12, 6, 4, 3, 2, 1 parameter sets;
* ``euler_vs_rk4.json``: ``parallel`` (Euler) / ``parallel_rk4`` (RK4), the preset's 4-layer ViT;
* ``dropout_stochastic_depth.json`` (Table 2): ``parallel_k`` with k = 12, 1 sets, without, with dropout 0.1
  (``_dropout``) and with stochastic depth 0.1 (``_drop_path``);
* ``norm_placement.json`` (Figure 2): ``sequential_12``, ``parallel_12`` (placement (a)) and the placements
  ``parallel_12_shared_norm`` and ``parallel_12_output_norm`` (the ViT's ``norm=``).

``--only FILE ...`` records those files alone (e.g. ``--only norm_placement``).

A run shared by two comparisons (``parallel``, ``parallel_12``) is trained once and written to both files.
Runs are independent and seeded with one thread each, so the rows do not depend on the number of workers.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

from neuralode_tf.train import compare_variants

HERE = Path(__file__).resolve().parent
SEEDS = (0, 1, 2)
EPOCHS = 30
SETS = (12, 6, 4, 3, 2, 1)
TABLE2_SETS = (12, 1)
FAMILY = dict(depth=12, dim=32, num_heads=4, patch_size=4)  # the notebook's 12-layer digits models
SETTINGS = dict(epochs=EPOCHS, progress=False, warmup_steps=50)  # the notebook's full preset
GROUPS = {  # group -> {variant: model overrides}, as the notebook's EXPERIMENTS
    "preset": {"sequential": {"field": "split"}, "parallel": {"field": "parallel"}, "parallel_rk4": {"method": "rk4"}},
    "table1": {
        "sequential_12": {**FAMILY, "field": "split"},
        **{f"parallel_{k}": {**FAMILY, "field": "parallel", "num_sets": k} for k in SETS},
        # Table 2 (rates: DeiT's default drop_path_rate 0.1, and the same for dropout; the paper gives none)
        **{
            f"parallel_{k}_{name}": {**FAMILY, "field": "parallel", "num_sets": k, name: 0.1}
            for name in ("dropout", "drop_path")
            for k in TABLE2_SETS
        },
        # Figure 2: the placements (b) and (c), in this library's reading (ViT's norm=)
        **{f"parallel_12_{norm}_norm": {**FAMILY, "field": "parallel", "norm": norm} for norm in ("shared", "output")},
    },
}
COMPARISONS = {  # file -> [(group, variant)]
    "parallel_vs_sequential": [
        ("preset", "sequential"),
        ("preset", "parallel"),
        ("table1", "sequential_12"),
        ("table1", "parallel_12"),
    ],
    "weight_sharing": [("table1", f"parallel_{k}") for k in SETS],
    "euler_vs_rk4": [("preset", "parallel"), ("preset", "parallel_rk4")],
    "dropout_stochastic_depth": [
        ("table1", f"parallel_{k}{regulariser}") for regulariser in ("", "_dropout", "_drop_path") for k in TABLE2_SETS
    ],
    "norm_placement": [
        ("table1", "sequential_12"),
        ("table1", "parallel_12"),
        ("table1", "parallel_12_shared_norm"),
        ("table1", "parallel_12_output_norm"),
    ],
}


def run(group: str, name: str, seed: int, out_dir: Path) -> list[dict]:
    return compare_variants("vit_digits", {name: GROUPS[group][name]}, (seed,), out_dir / group, **SETTINGS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default="runs/neural_ode_transformer", help="where the runs write")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=sorted(COMPARISONS), help="record these files only")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    comparisons = {file: pairs for file, pairs in COMPARISONS.items() if not args.only or file in args.only}
    needed = list(dict.fromkeys(pair for pairs in comparisons.values() for pair in pairs))
    jobs = [(group, name, seed) for group, name in needed for seed in SEEDS]
    jobs.sort(key=lambda job: "rk4" not in job[1])  # the RK4 runs (4x the evaluations) first
    start = time.perf_counter()
    context = get_context("spawn")  # fresh interpreters, one thread each
    with ProcessPoolExecutor(args.workers, mp_context=context, initializer=torch.set_num_threads, initargs=(1,)) as ex:
        futures = {job: ex.submit(run, *job, out_dir) for job in jobs}
        rows = {job: future.result() for job, future in futures.items()}
    for file, pairs in comparisons.items():
        selected = [row for group, name in pairs for seed in SEEDS for row in rows[group, name, seed]]
        (HERE / f"{file}.json").write_text(json.dumps(selected, indent=2) + "\n")
    print(f"{len(jobs)} runs in {time.perf_counter() - start:.0f} s on {args.workers} workers")


if __name__ == "__main__":
    main()
