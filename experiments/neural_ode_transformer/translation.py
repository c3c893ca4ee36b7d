"""Store the runs of Zhong et al.'s (2022) Table 3 on the translation stand-in as ``translation.json``, with each
run's test loss.

First ``OMP_NUM_THREADS=1 neuralode-tf compare zhong_seq2seq_reverse --seeds 0 1 2 --out-dir
runs/compare/zhong_seq2seq_reverse --workers 1`` trains the four variants (sequential and parallel layers, dropout 0
and 0.1) and writes their rows; then ``OMP_NUM_THREADS=1 python experiments/neural_ode_transformer/translation.py``
reads those rows, rebuilds each finite run's model from its ``config.json`` and ``checkpoint.pt``, scores the test
split in eval mode as the training loop does, checks that the test accuracy it gets is the recorded one, and writes
the rows next to this script with ``val_loss``: the test split's mean cross-entropy per target token (the stand-in
has no separate validation split; the paper reports Fairseq's validation loss). ``compare`` records no test loss,
hence this step.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from neuralode_tf.train import TrainConfig, build_setup, load_checkpoint
from neuralode_tf.train._checkpoint import CHECKPOINT
from neuralode_tf.train._evaluation import scores

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def with_test_loss(row: dict) -> dict:
    """``row`` with ``val_loss``, the test loss of its run's final model (None for a non-finite run)."""
    if row["non_finite"]:
        return {**row, "val_loss": None}
    run = ROOT / row["out_dir"]  # relative to the repository, or absolute
    config = TrainConfig(**json.loads((run / "config.json").read_text()))
    setup = build_setup(config)
    setup.model.load_state_dict(load_checkpoint(run / CHECKPOINT, "cpu")["model"])
    test = scores(setup.model, setup, torch.device("cpu"), config.eval_batch_size)
    if abs(test["accuracy"] - row["test_accuracy"]) > 1e-9:
        raise RuntimeError(f"{run}: test accuracy {test['accuracy']} is not the recorded {row['test_accuracy']}")
    return {**row, "val_loss": test["loss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs/compare/zhong_seq2seq_reverse", help="the compare command's out-dir")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = json.loads((ROOT / args.runs / "rows.json").read_text())
    for row in rows:  # an absolute --out-dir is stored relative to the repository
        if Path(row["out_dir"]).is_absolute():
            row["out_dir"] = str(Path(row["out_dir"]).relative_to(ROOT))
    rows = [with_test_loss(row) for row in rows]
    (HERE / "translation.json").write_text(json.dumps(rows, indent=2) + "\n")
    for row in rows:
        print(f"{row['variant']:<20} seed {row['seed']}  accuracy {row['test_accuracy']}  test loss {row['val_loss']}")


if __name__ == "__main__":
    main()
