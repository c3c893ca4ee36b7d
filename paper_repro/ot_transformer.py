# %% [markdown]
# # Reproducing the OT-Transformer (Kan et al. 2025)
#
# *OT-Transformer: A Continuous-time Transformer Architecture with Optimal Transport Regularization*
# composes all transformer blocks into **one** autonomous vector field $f = f_D \circ \dots \circ f_1$,
# integrates $\dot X = f(X)$ on $[0, 1]$ with explicit Euler, and adds the transport cost
# $\frac{\lambda}{2dn}\int_0^1 \|f(X(t))\|_F^2\,dt$ to the loss (eq. 8). It compares five models: the
# discrete transformer (baseline), the OT-Transformer with $\lambda = 0$ and with its $\lambda$, and the
# N-ODE Transformer (one ODE per block, without the block's outer skip; Baier-Reinio & De Sterck 2020)
# without and with the cost. In `neuralode_tf` these are the five entries of
# `neuralode_tf.train.OT_VARIANTS[preset]`: `baseline`, `ot_unregularized`, `ot`, `node`, `node_regularized`.
#
# Each claim is marked:
#
# * **exact**: checked here digit for digit (model construction, identities);
# * **reduced**: checked qualitatively at reduced scale on an offline stand-in (digits for MNIST,
#   tweets for IMDb, shapes3d for ModelNet40), from the recorded 3-seed comparisons in
#   `experiments/ot_transformer/` and a live run;
# * **not here**: needs the paper's data (downloads) or days of GPU time; the command is printed.
#
# | claim | paper | status here |
# |---|---|---|
# | §3: one Euler step with $T = 1$ is the discrete transformer | stated | **exact**: holds for one attention-only block without the blocks' inner residuals; not in the released code's convention (kept by the presets) |
# | Tables 1-4: parameter counts (transformer blocks) | 0.86M/0.65M, 93k/18k, 1.77M/1.48M, 4.74M/2.37M | **exact** for IMDb (4.74M / 2.37M); the others differ by architecture details (printed) |
# | Table 1 (ModelNet40): OT 89.9 > reg. N-ODE 87.5 ≈ baseline 87.4 | 5 trials | **reduced** (shapes3d): OT best continuous model, but only ties the baseline |
# | Table 2 (MNIST): OT 97.1 > unreg. OT 96.8 > baseline 93.0, with 18k vs 93k parameters | 5 trials | **reduced** (digits): reproduced in direction |
# | Table 3 (Cats & Dogs): OT 79.0 > unreg. OT 78.2 > baseline 77.6 > N-ODE 75.6 | 3 trials | **not here** (no offline data; `ot_catsdogs_vit` needs Kaggle's `train/`) |
# | Table 4 (IMDb): OT 84.6 > baseline 83.9 ≥ N-ODE; unreg. OT 82.7 | 5 trials | **reduced** (tweets): OT ≥ unreg. OT and N-ODE, but not above the baseline |
# | Table 5: accuracy with 1-20 Euler steps; 20 → 8 steps costs ~0.5 points; reg. ≥ unreg. | MNIST | **reduced** (all three stand-ins) |
# | §5.1, §5.3: unregularised models blow up (NaN) on ModelNet40 and IMDb; regularised never | all trials | **not reproduced**: 0 of 57 recorded runs became non-finite |
#
# Presets: `quick` (default, what CI runs; about 70 s on 2 CPU cores) counts the paper-size
# models, checks the identities, trains the five `ot_mnist_vit` models on digits for one seed and 8
# epochs with a step sweep, and reads the recorded 3-seed comparisons. `full`
# (`NEURALODE_TF_FULL=1`; roughly 2 hours on 2 CPU cores) re-runs those recorded comparisons live, three
# seeds at the presets' settings with the step sweep, plus the stress run, i.e.
# `neuralode-tf compare ot_mnist_vit --seeds 0 1 2 --sweep` (and `ot_imdb_text`, `ot_modelnet_set`),
# and checks the claims on them. The real-data commands for a GPU are printed at the end.

# %%
import json
import os
import shutil
import statistics
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)

FULL = os.environ.get("NEURALODE_TF_FULL", "0") == "1"
T_START = time.perf_counter()
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "repro_ot" / ("full" if FULL else "quick")
RECORDED = Path("..") / "experiments" / "ot_transformer"
assert RECORDED.is_dir(), f"run this notebook from paper_repro/ (no {RECORDED.resolve()})"

# %%
# NBVAL_IGNORE_OUTPUT
import torch

import neuralode_tf
from neuralode_tf.data import Splits, TensorSplit, Vocabulary
from neuralode_tf.train import (
    OT_VARIANTS,
    PRESETS,
    TrainConfig,
    build_task,
    compare_variants,
    markdown_table,
    step_sweep,
    summarize,
)

torch.set_num_threads(1)  # bit-for-bit reproducible reductions
print(f"neuralode_tf {neuralode_tf.__version__}, torch {torch.__version__}, FULL={FULL}")

# %% [markdown]
# ## The paper's numbers
#
# Tables 1-4 (mean test accuracy in % ± standard deviation over the trials; parameters of the
# transformer blocks) and Table 5 (the MNIST models evaluated with fewer Euler steps than the 20 they
# were trained with). On IMDb (†) the "unregularised" rows were trained with a slight cost
# $\lambda = 0.01$, because $\lambda = 0$ gave NaN in every trial; on ModelNet40 the unregularised
# models gave NaN and are not reported. On MNIST (one block) the paper treats N-ODE and OT as the same
# model.

# %%
PAPER = {
    "ot_modelnet_set": {
        "title": "Table 1 · ModelNet40 (5 trials) | ours: shapes3d",
        "rows": {
            "baseline": ("0.86M", 87.4, 0.45),
            "ot_unregularized": ("0.65M", None, "NaN"),
            "ot": ("0.65M", 89.9, 0.42),
            "node": ("0.65M", None, "NaN"),
            "node_regularized": ("0.65M", 87.5, 0.51),
        },
    },
    "ot_mnist_vit": {
        "title": "Table 2 · MNIST (5 trials) | ours: digits",
        "rows": {
            "baseline": ("93k", 93.0, 0.69),
            "ot_unregularized": ("18k", 96.8, 0.23),
            "ot": ("18k", 97.1, 0.16),
            "node": ("18k", None, "= OT"),
            "node_regularized": ("18k", None, "= OT"),
        },
    },
    "ot_catsdogs_vit": {
        "title": "Table 3 · Cats & Dogs (3 trials, final accuracy) | ours: not here",
        "rows": {
            "baseline": ("1.77M", 77.6, 0.86),
            "ot_unregularized": ("1.48M", 78.2, 0.39),
            "ot": ("1.48M", 79.0, 0.31),
            "node": ("1.48M", 75.6, 0.48),
            "node_regularized": ("1.48M", 75.6, 0.03),
        },
    },
    "ot_imdb_text": {
        "title": "Table 4 · IMDb (5 trials; † λ = 0.01) | ours: tweets",
        "rows": {
            "baseline": ("4.74M", 83.9, 0.26),
            "ot_unregularized": ("2.37M", 82.7, 0.38),
            "ot": ("2.37M", 84.6, 0.55),
            "node": ("2.37M", 83.6, 0.40),
            "node_regularized": ("2.37M", 83.9, 0.48),
        },
    },
}
PAPER_TABLE5 = {  # MNIST, trained with 20 Euler steps
    "ot_unregularized": {1: 18.2, 2: 42.0, 4: 85.1, 8: 96.3, 16: 96.7, 20: 96.8},
    "ot": {1: 17.9, 2: 46.8, 4: 87.1, 8: 96.6, 16: 97.0, 20: 97.1},
}
STEPS = (1, 2, 4, 8, 16, 20)
VARIANTS = ("baseline", "ot_unregularized", "ot", "node", "node_regularized")
STAND_INS = {"ot_mnist_vit": "digits", "ot_imdb_text": "tweets", "ot_modelnet_set": "shapes3d"}
TABLE = {
    "ot_modelnet_set": "Table 1",
    "ot_mnist_vit": "Table 2",
    "ot_catsdogs_vit": "Table 3",
    "ot_imdb_text": "Table 4",
}
VERDICTS = []  # (source, claim, ours, status), printed at the end


def verdict(source: str, claim: str, ours: str, status: str) -> None:
    VERDICTS.append((source, claim, ours, status))
    print(f"[{status}] {source}: {claim} | ours: {ours}")


def f1(x: float, sign: bool = False) -> str:
    """One decimal, without a negative zero."""
    text = f"{x:+.1f}" if sign else f"{x:.1f}"
    return text.replace("-0.0", "0.0").replace("+0.0", "0.0")


# %% [markdown]
# ## §3: one Euler step on $[0, 1]$ is the discrete transformer (exact, with a caveat)
#
# The paper: "When $T = 1$ and a single step forward Euler integration scheme is used, our framework
# is identical to the original discrete transformer." We build the MNIST ViT at the paper's size
# (28x28 images, patch 7, one attention-only block with one head) with the preset `ot_mnist_vit` and
# its `OT_VARIANTS`, at $d = 64$, give every model the baseline's weights, and compare logits in
# float64. The preset builders only need the data's shape, so the models are built on a one-image
# placeholder of MNIST's shape; no data is read.
#
# * Without the blocks' inner residuals (`inner_residuals=False`, field $G(x)$) one Euler step is
#   $x + G(x)$: the discrete block, exactly; so is the N-ODE Transformer, and the transport cost does
#   not change the forward pass.
# * With them (the released code's convention, which the presets keep: field $x + G(x)$) one step
#   is $2x + G(x)$, not the discrete block.


# %%
def placeholder(name: str, kind: str, x: torch.Tensor | None, num_classes: int, vocab=None) -> Splits:
    """A dataset of the paper's shape with one example: enough for a preset to build its model."""
    if kind == "points":
        split = []
    else:
        tensors = {"x": x, "y": torch.zeros(len(x), dtype=torch.long)}
        if kind == "tokens":
            tensors["mask"] = torch.zeros_like(x, dtype=torch.bool)
        split = TensorSplit(**tensors)
    classes = tuple(str(c) for c in range(num_classes))
    return Splits(name, kind, split, split, "shape-only placeholder", classes=classes, vocab=vocab)


def copy_weights(target: torch.nn.Module, source: torch.nn.Module) -> None:
    """Copy parameters in registration order (the models differ only in how the encoder is wrapped)."""
    pairs = list(zip(target.named_parameters(), source.named_parameters(), strict=True))
    with torch.no_grad():
        for (name, p), (other, q) in pairs:
            assert p.shape == q.shape and name.rsplit(".", 1)[-1] == other.rsplit(".", 1)[-1], (name, other)
            p.copy_(q)


torch.manual_seed(0)
images = torch.rand(8, 1, 28, 28, dtype=torch.float64)
MNIST_SHAPE = placeholder("mnist", "image", images[:1].float(), 10)
V = OT_VARIANTS["ot_mnist_vit"]
discrete = PRESETS["ot_mnist_vit"].build_model(MNIST_SHAPE, {**V["baseline"], "dim": 64}).double().eval()
one_step = {
    "OT, no inner residuals, λ = 0": {**V["ot_unregularized"], "steps": 1, "inner_residuals": False},
    "OT, no inner residuals, λ = 0.01": {**V["ot"], "steps": 1, "inner_residuals": False},
    "N-ODE Transformer": {**V["node"], "steps": 1},
    "OT, inner residuals (presets)": {**V["ot"], "steps": 1},
}
gaps = {}
for label, overrides in one_step.items():
    model = PRESETS["ot_mnist_vit"].build_model(MNIST_SHAPE, overrides).double().eval()
    copy_weights(model, discrete)
    with torch.no_grad():
        gaps[label] = (model(images) - discrete(images)).abs().max().item()
    print(f"{label:<34} one Euler step vs the discrete block: max |Δ logits| = {gaps[label]:.2g}")
assert gaps["OT, no inner residuals, λ = 0"] == 0.0 and gaps["OT, no inner residuals, λ = 0.01"] == 0.0
assert gaps["N-ODE Transformer"] == 0.0
assert gaps["OT, inner residuals (presets)"] > 1e-3
verdict("§3", "one Euler step on [0, 1] = discrete transformer", "exact without inner residuals", "exact")
verdict("§3", "... in the released code's convention (inner residuals)", "2x + G(x), not the block", "differs")

# %% [markdown]
# ## Tables 1-4: parameter counts at the paper's sizes (exact for IMDb)
#
# Each preset's model builder, with the five `OT_VARIANTS` overrides, on a placeholder of the real
# dataset's shape: MNIST 28x28x1 (patch 7, $d$ 128 vs 64), Cats & Dogs 224x224x3 (patch 16, 6 vs 5
# blocks of $d = 128$), IMDb (20,000-word vocabulary, $d = 256$, 8 heads, 6 vs 3 blocks), ModelNet40
# (40 classes, ISAB width 256 vs 200). The paper counts the transformer blocks; we print the encoder
# (the blocks) and the whole model. All four continuous variants of a task have the same count.

# %%
PAPER_SIZE = {
    "ot_mnist_vit": MNIST_SHAPE,
    "ot_catsdogs_vit": placeholder("catsdogs", "image", torch.zeros(1, 3, 224, 224), 2),
    "ot_imdb_text": placeholder(
        "imdb", "tokens", torch.zeros(1, 4, dtype=torch.long), 2, Vocabulary(f"w{i}" for i in range(19_998))
    ),
    "ot_modelnet_set": placeholder("modelnet40_h5", "points", None, 40),
}
PAPER_COUNTS = {  # transformer blocks: (baseline, continuous)
    "ot_mnist_vit": (93e3, 18e3),
    "ot_catsdogs_vit": (1.77e6, 1.48e6),
    "ot_imdb_text": (4.74e6, 2.37e6),
    "ot_modelnet_set": (0.86e6, 0.65e6),
}
counts = {}
for preset, data in PAPER_SIZE.items():
    for variant in VARIANTS:
        model = PRESETS[preset].build_model(data, OT_VARIANTS[preset][variant])
        counts[preset, variant] = (
            sum(p.numel() for p in model.encoder.parameters()),
            sum(p.numel() for p in model.parameters()),
        )
    assert len({counts[preset, v] for v in VARIANTS[1:]}) == 1  # the continuous models share one count

print(f"{'preset':<16} {'model':<11} {'paper':>7} {'encoder':>10} {'whole':>10}   ratio continuous/baseline")
for preset, (paper_base, paper_cont) in PAPER_COUNTS.items():
    (enc_b, all_b), (enc_c, all_c) = counts[preset, "baseline"], counts[preset, "ot"]
    for label, paper_n, enc, whole in (
        ("baseline", paper_base, enc_b, all_b),
        ("continuous", paper_cont, enc_c, all_c),
    ):
        ratio = f"paper {paper_cont / paper_base:.2f}, ours {enc_c / enc_b:.2f}" if label == "continuous" else ""
        print(f"{preset:<16} {label:<11} {paper_n / 1e6:>6.3g}M {enc:>10,} {whole:>10,}   {ratio}")
    assert enc_c < enc_b  # the continuous models are the smaller ones

imdb_base, imdb_cont = counts["ot_imdb_text", "baseline"][0], counts["ot_imdb_text", "ot"][0]
assert (round(imdb_base / 1e6, 2), round(imdb_cont / 1e6, 2)) == (4.74, 2.37)
verdict("Table 4", "IMDb blocks 4.74M (baseline) / 2.37M (continuous)", f"{imdb_base:,} / {imdb_cont:,}", "exact")
for preset, table in (("ot_mnist_vit", "Table 2"), ("ot_catsdogs_vit", "Table 3"), ("ot_modelnet_set", "Table 1")):
    paper_base, paper_cont = PAPER_COUNTS[preset]
    (enc_b, _), (enc_c, _) = counts[preset, "baseline"], counts[preset, "ot"]
    ours = f"{enc_b / 1e6:.3g}M / {enc_c / 1e6:.3g}M"
    verdict(table, f"blocks {paper_base / 1e6:.3g}M / {paper_cont / 1e6:.3g}M", ours, "differs")

# %% [markdown]
# Why the other counts differ (architecture details, not the continuous-time formulation):
#
# * MNIST: Sinkformers' attention has no biases and a 64-wide inner dimension; ours has biases and is
#   $d$ wide. The paper's "reduces the number of parameters by over 80%" is 75% for our encoders.
# * Cats & Dogs: Sinkformers' attention is 512 wide (8 heads of 64), ours $d = 128$ wide; the ratio
#   5/6 = 0.83 is the paper's (1.48/1.77 = 0.84).
# * ModelNet40: the Set Transformer of Lee et al. has a one-layer rFF and feeds the 3-d points
#   straight into the first ISAB; ours has a two-layer MLP in every attention block and a linear
#   embedding first, so the counts are larger and the ratio is $(200/256)^2 = 0.61$ instead of 0.76.

# %% [markdown]
# ## The recorded 3-seed comparisons on the stand-ins
#
# `experiments/ot_transformer/PRESET.json` holds one row per run (variant, seed, parameters, test
# accuracy, non-finite flag, step sweep) of
# `OMP_NUM_THREADS=1 neuralode-tf compare PRESET --seeds 0 1 2 --sweep` on 2 CPU cores, at the presets'
# defaults (digits: 30 epochs; tweets: 2 epochs; shapes3d: 10 epochs; see the README there), and the
# stress run `neuralode-tf compare ot_mnist_vit --variants ot_unregularized ot node node_regularized
# --seeds 0 1 2 --set lr=0.02 grad_clip=0` (10x the learning rate, no gradient clipping). First we
# check that the recorded parameter counts are what the presets build today.


# %%
def load_rows(path: Path) -> list[dict]:
    rows = json.loads(path.read_text())
    for row in rows:  # JSON keys are strings; step_sweep returns int keys
        if row.get("sweep"):
            row["sweep"] = {int(k): v for k, v in row["sweep"].items()}
    return rows


recorded = {preset: load_rows(RECORDED / f"{preset}.json") for preset in STAND_INS}
recorded["stress"] = load_rows(RECORDED / "ot_mnist_vit_stress.json")
for preset in STAND_INS:
    task = build_task(TrainConfig(preset=preset, model=OT_VARIANTS[preset]["baseline"]))
    models = {"baseline": task.model, "ot": PRESETS[preset].build_model(task.data, OT_VARIANTS[preset]["ot"])}
    for variant, model in models.items():
        built = sum(p.numel() for p in model.parameters())
        stored = {row["parameters"] for row in recorded[preset] if row["variant"] == variant}
        assert stored == {built}, (preset, variant, stored, built)
    seeds = sorted({row["seed"] for row in recorded[preset]})
    print(
        f"{preset:<16} on {STAND_INS[preset]:<8}: {len(recorded[preset])} runs, seeds {seeds}, counts match the preset"
    )

# %% [markdown]
# ## Live run
#
# `quick`: the five `ot_mnist_vit` models on digits, seed 0, 8 epochs instead of 30 (everything else
# as in the preset: $d$ 128 vs 64, one attention-only block with one head, 20 Euler steps, $\lambda =
# 0.01$), then every continuous model evaluated with 1-20 Euler steps (`step_sweep`).
# `full`: the three recorded comparisons (3 seeds, the presets' settings) and the stress run, live.

# %%
if WORK.exists():
    shutil.rmtree(WORK)
LIVE_PRESETS = tuple(STAND_INS) if FULL else ("ot_mnist_vit",)
SEEDS = (0, 1, 2) if FULL else (0,)
SETTINGS = {"device": "cpu"} if FULL else {"device": "cpu", "epochs": 8}  # the recorded runs are CPU runs


def with_sweeps(preset: str, rows: list[dict]) -> list[dict]:
    """Add the step sweep to the finite runs of the continuous models, as `neuralode-tf compare --sweep` does."""
    for row in rows:
        continuous = OT_VARIANTS[preset][row["variant"]]["field"] in ("composed", "node")
        row["sweep"] = step_sweep(row["out_dir"], STEPS) if continuous and not row["non_finite"] else None
    return rows


t_live = time.perf_counter()
live = {}
for preset in LIVE_PRESETS:
    rows = compare_variants(preset, OT_VARIANTS[preset], SEEDS, WORK / preset, progress=False, **SETTINGS)
    live[preset] = with_sweeps(preset, rows)
    print(f"{preset} on {STAND_INS[preset]}, seeds {list(SEEDS)}, {SETTINGS}:")
    print(markdown_table(live[preset]))
if FULL:
    stress_variants = {name: OT_VARIANTS["ot_mnist_vit"][name] for name in VARIANTS[1:]}
    live["stress"] = compare_variants(
        "ot_mnist_vit", stress_variants, SEEDS, WORK / "stress", progress=False, device="cpu", lr=0.02, grad_clip=0
    )
    print("stress run (lr=0.02, grad_clip=0):")
    print(markdown_table(live["stress"]))
LIVE_SECONDS = time.perf_counter() - t_live

# %% [markdown]
# What the live run shows (checked below): all four continuous models, with 27% of the baseline's
# parameters, beat the discrete baseline (one attention step of width 128) by a wide margin, no run
# became non-finite, and the models lose much of their accuracy with 1-2 Euler steps but little with 8.
# Whether the transport cost helps is not decided by one seed of 8 epochs: see the recorded 3-seed runs.

# %%
digits_live = {entry["variant"]: entry for entry in summarize(live["ot_mnist_vit"])}
live_sweep = {
    name: {k: statistics.mean(100 * r["sweep"][k] for r in live["ot_mnist_vit"] if r["variant"] == name) for k in STEPS}
    for name in VARIANTS[1:]
}
for name in VARIANTS[1:]:
    margin = digits_live[name]["mean"] - digits_live["baseline"]["mean"]
    print(
        f"live digits: {name:<17} {digits_live[name]['mean']:.1f}% vs baseline {digits_live['baseline']['mean']:.1f}%"
        f" ({f1(margin, True)}); 20 -> 8 steps {f1(live_sweep[name][8] - live_sweep[name][20], True)}, "
        f"20 -> 1 step {f1(live_sweep[name][1] - live_sweep[name][20], True)} points"
    )
    assert margin >= 5.0
    assert live_sweep[name][20] - live_sweep[name][8] <= 2.0 and live_sweep[name][20] - live_sweep[name][1] >= 20.0
assert digits_live["ot"]["parameters"] < 0.3 * digits_live["baseline"]["parameters"]
assert all(not row["non_finite"] for rows in live.values() for row in rows)
print(f"live run: {sum(len(rows) for rows in live.values())} runs, none non-finite")

# %% [markdown]
# ## Side by side: the paper's tables and ours
#
# Ours are the recorded 3-seed comparisons (`quick`) or their live re-run (`full`). The stand-ins are
# smaller than the paper's data and models and trained for minutes, so compare the models with each
# other, not the absolute accuracies with the paper's.

# %% [markdown]
# In `full` the live rows replace the recorded ones below, after printing how far apart they are
# (single-threaded CPU runs are deterministic: re-running the recorded seed-0 `ot` digits run on 2 CPU
# cores gave its recorded accuracy and step sweep bit for bit).

# %%
if FULL:  # the live re-run replaces the recorded rows; how far apart are they?
    for preset in (*STAND_INS, "stress"):
        old = {(r["variant"], r["seed"]): r["test_accuracy"] for r in recorded[preset]}
        new = {(r["variant"], r["seed"]): r["test_accuracy"] for r in live[preset]}
        run_gaps = [abs(100 * (new[k] - old[k])) for k in old if k in new and None not in (new[k], old[k])]
        print(f"{preset}: live vs recorded, largest per-run gap {max(run_gaps, default=float('nan')):.2f} points")
OURS = {preset: live[preset] if FULL else recorded[preset] for preset in (*STAND_INS, "stress")}
S = {preset: {entry["variant"]: entry for entry in summarize(OURS[preset])} for preset in OURS}
SWEEP = {
    preset: {
        name: {k: statistics.mean(100 * r["sweep"][k] for r in OURS[preset] if r["variant"] == name) for k in STEPS}
        for name in VARIANTS[1:]
    }
    for preset in STAND_INS
}


def paper_cell(mean, std) -> str:
    return f"{std}" if mean is None else f"{mean:.1f} ± {std:.2f}"


for preset in ("ot_modelnet_set", "ot_mnist_vit", "ot_catsdogs_vit", "ot_imdb_text"):
    print(PAPER[preset]["title"])
    print(
        f"  {'model':<17} {'paper params':>12} {'paper acc (%)':>14} | {'ours params':>11} {'ours acc (%)':>13} {'non-finite':>10}"
    )
    for variant in VARIANTS:
        params, mean, std = PAPER[preset]["rows"][variant]
        if preset in S:
            e = S[preset][variant]
            ours = f"{e['parameters']:>11,} {e['mean']:>6.1f} ± {e['std']:<4.1f} {e['non_finite']:>5}/{e['runs']}"
        else:
            ours = f"{'not here':>11}"
        print(f"  {variant:<17} {params:>12} {paper_cell(mean, std):>14} | {ours}")
    print()

print("Table 5 · accuracy (%) by number of Euler steps at inference (trained with 20 on MNIST/digits, 8 otherwise)")
print(f"  {'':<30}" + "".join(f"{k:>7}" for k in STEPS))
for name in ("ot_unregularized", "ot"):
    print(f"  {'paper MNIST ' + name:<30}" + "".join(f"{PAPER_TABLE5[name][k]:7.1f}" for k in STEPS))
for preset in STAND_INS:
    for name in VARIANTS[1:]:
        label = f"{STAND_INS[preset]} {name}"
        print(f"  {label:<30}" + "".join(f"{SWEEP[preset][name][k]:7.1f}" for k in STEPS))

# %% [markdown]
# ## The claims, checked
#
# Each claim is asserted where it holds on our data and printed as **differs** where it does not.
# `m(x)` is the mean accuracy of model `x` over the seeds, `s(x)` its standard deviation.


# %%
def m(preset: str, variant: str) -> float:
    return S[preset][variant]["mean"]


def s(preset: str, variant: str) -> float:
    return S[preset][variant]["std"]


def fmt(preset: str, *variants: str) -> str:
    return ", ".join(f"{v} {m(preset, v):.1f} ± {s(preset, v):.1f}" for v in variants)


# Table 2: the OT-Transformer, with and without the cost, beats the larger discrete baseline on MNIST.
assert m("ot_mnist_vit", "ot") > m("ot_mnist_vit", "baseline") + 5
assert m("ot_mnist_vit", "ot_unregularized") > m("ot_mnist_vit", "baseline") + 5
assert S["ot_mnist_vit"]["ot"]["parameters"] < 0.3 * S["ot_mnist_vit"]["baseline"]["parameters"]
verdict(
    "Table 2",
    "OT (reg. and unreg.) > baseline with ~20% of its parameters",
    "digits: " + fmt("ot_mnist_vit", "ot", "ot_unregularized", "baseline"),
    "reduced",
)

# Tables 1-4: the transport cost improves the OT-Transformer (mean accuracy), on every task.
for preset in STAND_INS:
    assert m(preset, "ot") > m(preset, "ot_unregularized")
    verdict(
        TABLE[preset], "reg. OT > unreg. OT", f"{STAND_INS[preset]}: {fmt(preset, 'ot', 'ot_unregularized')}", "reduced"
    )
print(
    f"  (tweets: gap {m('ot_imdb_text', 'ot') - m('ot_imdb_text', 'ot_unregularized'):.1f} points, "
    f"within one standard deviation of the unregularised model)"
)

# The OT-Transformer is the best continuous model on every task.
for preset in STAND_INS:
    assert m(preset, "ot") > max(m(preset, v) for v in ("ot_unregularized", "node", "node_regularized"))
verdict(
    "Tables 1, 3, 4",
    "OT is the best continuous-time model",
    "; ".join(
        f"{STAND_INS[p]}: OT {m(p, 'ot'):.1f} vs best other {max(m(p, v) for v in VARIANTS[1:] if v != 'ot'):.1f}"
        for p in STAND_INS
    ),
    "reduced",
)

# §5.2-5.3: the cost helps the OT-Transformer more than the N-ODE Transformer.
gain = {p: (m(p, "ot") - m(p, "ot_unregularized"), m(p, "node_regularized") - m(p, "node")) for p in STAND_INS}
assert all(ot_gain > node_gain for ot_gain, node_gain in gain.values())
verdict(
    "§5.2-5.3",
    "the cost helps OT more than N-ODE",
    "; ".join(f"{STAND_INS[p]}: {f1(g[0], True)} vs {f1(g[1], True)}" for p, g in gain.items()),
    "reduced",
)

# Tables 2-4: the regularised OT-Transformer varies less over seeds than the baseline ...
for preset in STAND_INS:
    assert s(preset, "ot") < s(preset, "baseline")
verdict(
    "Tables 2-3",
    "OT's spread over seeds < baseline's",
    "; ".join(f"{STAND_INS[p]}: {s(p, 'ot'):.2f} vs {s(p, 'baseline'):.2f}" for p in STAND_INS),
    "reduced",
)
# ... and less than the unregularised one: on tweets and shapes3d, not on digits.
for preset in ("ot_imdb_text", "ot_modelnet_set"):
    assert s(preset, "ot") < s(preset, "ot_unregularized")
spread = "; ".join(f"{STAND_INS[p]}: {s(p, 'ot'):.2f} vs {s(p, 'ot_unregularized'):.2f}" for p in STAND_INS)
holds = s("ot_mnist_vit", "ot") < s("ot_mnist_vit", "ot_unregularized")
verdict("Tables 2-3", "OT's spread over seeds < unreg. OT's", spread, "reduced" if holds else "differs on digits")

# %% [markdown]
# Against the discrete baseline the paper reports a gain on every task (Tables 1, 3, 4: +2.5, +1.4,
# +0.7 points). Here it is reproduced on digits only: on shapes3d the OT model ties the baseline
# (within the baseline's spread over seeds) and on tweets it is slightly below it. The N-ODE
# Transformer does not beat the baseline on tweets and shapes3d, as in the paper's Tables 1, 3 and 4.

# %%
for preset in ("ot_imdb_text", "ot_modelnet_set"):
    diff = m(preset, "ot") - m(preset, "baseline")
    assert abs(diff) < max(s(preset, "baseline"), 1.0)  # a tie: within the baseline's spread over seeds
    status = "tie, not a gain" if diff > 0 else "differs"
    ours = f"{STAND_INS[preset]}: {fmt(preset, 'ot', 'baseline')} ({f1(diff, True)})"
    verdict(TABLE[preset], "OT > baseline", ours, status)
for preset in ("ot_imdb_text", "ot_modelnet_set"):
    assert max(m(preset, "node"), m(preset, "node_regularized")) < m(preset, "baseline")
verdict(
    "Tables 1, 3, 4",
    "N-ODE Transformer not better than the baseline",
    "; ".join(
        f"{STAND_INS[p]}: {fmt(p, 'node', 'node_regularized', 'baseline')}" for p in ("ot_imdb_text", "ot_modelnet_set")
    ),
    "reduced",
)

# %% [markdown]
# ### Table 5: fewer Euler steps at inference
#
# The paper (MNIST): going from 20 to 8 steps costs about 0.5 points, the regularised model is more
# accurate than the unregularised one at every step count from 2 to 20 (at 1 step it is 0.3 points
# below), and 1-2 steps lose most of the accuracy. Here the trained models are evaluated with 1-20
# steps on all three stand-ins (digits were trained with 20 steps, the others with 8).

# %%
for preset in STAND_INS:
    ot_sweep, unreg_sweep = SWEEP[preset]["ot"], SWEEP[preset]["ot_unregularized"]
    assert all(ot_sweep[k] >= unreg_sweep[k] for k in STEPS)
    assert ot_sweep[20] - ot_sweep[8] <= 1.0
verdict("Table 5", "reg. OT ≥ unreg. OT at every step count", "all three stand-ins, 1-20 steps", "reduced")
verdict(
    "Table 5 / App. A",
    "20 -> 8 steps costs ~0.5 points",
    "; ".join(f"{STAND_INS[p]}: {f1(SWEEP[p]['ot'][20] - SWEEP[p]['ot'][8])}" for p in STAND_INS),
    "reduced",
)
for preset in ("ot_mnist_vit", "ot_modelnet_set"):
    assert SWEEP[preset]["ot"][20] - SWEEP[preset]["ot"][1] > 10
drop_1 = "; ".join(f"{STAND_INS[p]}: {f1(SWEEP[p]['ot'][20] - SWEEP[p]['ot'][1])}" for p in STAND_INS)
verdict("Table 5", "1 step loses much accuracy (paper: 79 points)", drop_1, "reduced; differs on tweets")
print("  (tweets: the trained flow is close to the identity, so one Euler step is nearly as good as eight)")

# %% [markdown]
# A stronger reading of Table 5, that the cost makes the models lose *fewer* points when the steps
# are cut, is not what the data say, in the paper or here: in the paper the regularised model loses
# fewer points at 2 and 4 steps but more at 1; here the comparison goes both ways too. It is printed,
# not asserted.

# %%
print("points lost going from 20 steps to k steps, reg. OT vs unreg. OT")
print(f"  {'':<20}" + "".join(f"{'k=' + str(k):>14}" for k in (1, 2, 4, 8)))
paper_lost = {name: {k: PAPER_TABLE5[name][20] - PAPER_TABLE5[name][k] for k in STEPS} for name in PAPER_TABLE5}
print(
    f"  {'paper MNIST':<20}"
    + "".join(f"{f1(paper_lost['ot'][k]):>7}{f1(paper_lost['ot_unregularized'][k]):>7}" for k in (1, 2, 4, 8))
)
fewer = []
for preset in STAND_INS:
    lost = {n: {k: SWEEP[preset][n][20] - SWEEP[preset][n][k] for k in STEPS} for n in ("ot", "ot_unregularized")}
    print(
        f"  {STAND_INS[preset]:<20}"
        + "".join(f"{f1(lost['ot'][k]):>7}{f1(lost['ot_unregularized'][k]):>7}" for k in (1, 2, 4, 8))
    )
    fewer += [lost["ot"][k] < lost["ot_unregularized"][k] for k in (1, 2, 4)]
verdict(
    "Table 5",
    "the cost reduces the points lost at 1-4 steps",
    f"fewer points lost in {sum(fewer)} of {len(fewer)} (task, k) pairs",
    "mixed, as in the paper",
)

# %% [markdown]
# ### Non-finite training without the transport cost
#
# The paper: on IMDb every unregularised trial (N-ODE and OT) hit exploding gradients and NaN, and on
# ModelNet40 the unregularised models gave NaN even with a slight cost; with enough cost no trial
# did. `compare_variants` counts such runs instead of crashing (a non-finite loss or ODE state stops
# the run and marks it). None of our runs became non-finite, not even the stress run at 10x the
# learning rate without gradient clipping, where training degrades for every model instead (with and
# without the cost). The claim is therefore **not reproduced** at this scale: nothing blew up for the
# cost to prevent.

# %%
all_runs = [row for preset in OURS for row in OURS[preset]]
non_finite = sum(row["non_finite"] for row in all_runs)
print(f"non-finite runs: {non_finite} of {len(all_runs)} (3 stand-ins x 5 models x 3 seeds, and the stress run)")
print(
    "stress run (lr=0.02, grad_clip=0): "
    + ", ".join(f"{v} {S['stress'][v]['mean']:.1f} ± {S['stress'][v]['std']:.1f}" for v in VARIANTS[1:])
)
assert non_finite == 0
assert all(S["stress"][v]["mean"] < 60 for v in VARIANTS[1:])  # training degrades, it does not diverge
verdict(
    "§5.1, §5.3",
    "unregularised models blow up (NaN); regularised never do",
    f"{non_finite} of {len(all_runs)} runs non-finite, also at 10x lr without clipping",
    "not reproduced",
)

# %% [markdown]
# ## Not here: the real datasets (commands for a GPU)
#
# The presets read the papers' datasets with `data.name=... data.root=...` and pick the paper's model
# sizes for them (`ot_mnist_vit`: patch 7 on 28x28; `ot_imdb_text`: $d = 256$, 8 heads;
# `ot_modelnet_set`: ISAB width 256/200). The epochs, batch sizes and learning rates below are
# Appendix B's; the schedule is the library's (linear warm-up, cosine decay), not the paper's step
# decays. Differences that remain: the N-ODE cost on ModelNet40 is $\lambda = 1$ here (paper 0.1) and
# on Cats & Dogs 0.01 (paper 0.005); pass your own variants to `compare_variants` to change them.

# %%
COMMANDS = {
    "Table 2 + Table 5 (MNIST)": "neuralode-tf compare ot_mnist_vit --seeds 0 1 2 3 4 --sweep "
    "--set data.name=mnist data.root=PATH/TO/MNIST epochs=45 batch_size=100 lr=5e-4",
    "Table 3 (Cats & Dogs)": "neuralode-tf compare ot_catsdogs_vit --seeds 0 1 2 --sweep "
    "--set data.root=PATH/TO/dogs-vs-cats/train epochs=250 batch_size=64 lr=3e-5",
    "Table 4 (IMDb)": "neuralode-tf compare ot_imdb_text --seeds 0 1 2 3 4 --sweep "
    "--set data.name=imdb data.root=PATH/TO/aclImdb epochs=15 batch_size=64 lr=1e-4",
    "Table 1 (ModelNet40)": "neuralode-tf compare ot_modelnet_set --seeds 0 1 2 3 4 --sweep "
    "--set data.name=modelnet40_h5 data.root=PATH/TO/ModelNet40_cloud.h5 data.num_points=5000 "
    "epochs=200 batch_size=64 lr=1e-3",
}
for table, command in COMMANDS.items():
    print(f"{table}:\n  {command}")
    assert command.split()[2] in OT_VARIANTS
print("Table 4's † rows (λ = 0.01 instead of 0), from Python:")
print(
    '  compare_variants("ot_imdb_text", {"ot_slight": {**OT_VARIANTS["ot_imdb_text"]["ot"], "transport_cost": 0.01},\n'
    '                   "node_slight": {**OT_VARIANTS["ot_imdb_text"]["node"], "transport_cost": 0.01}},\n'
    '                   seeds=(0, 1, 2, 3, 4), data={"name": "imdb", "root": "PATH/TO/aclImdb"}, epochs=15, lr=1e-4)'
)

# %% [markdown]
# ## Summary

# %%
print(f"{'status':<26} {'source':<16} claim  ->  ours")
for source, claim, ours, status in VERDICTS:
    print(f"{status:<26} {source:<16} {claim}  ->  {ours}")
statuses = [v[3] for v in VERDICTS]
print(
    f"\n{len(VERDICTS)} claims: {sum(st == 'exact' for st in statuses)} exact, "
    f"{sum(st.startswith('reduced') for st in statuses)} reduced (some with exceptions), "
    f"{sum(st != 'exact' and not st.startswith('reduced') for st in statuses)} differ, tie, mixed or not reproduced"
)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"live runs took {LIVE_SECONDS:.0f} s; notebook ran in {time.perf_counter() - T_START:.0f} s")
