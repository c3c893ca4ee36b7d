# %% [markdown]
# # Reproducing the OT-Transformer (Kan et al. 2025)
#
# *OT-Transformer: A Continuous-time Transformer Architecture with Optimal Transport Regularization*
# composes all transformer blocks into **one** autonomous vector field $f = f_D \circ \dots \circ f_1$,
# integrates $\dot X = f(X)$ on $[0, 1]$ with explicit Euler, and adds the transport cost
# $\frac{\lambda}{2dn}\int_0^1 \|f(X(t))\|_F^2\,dt$ to the loss (eq. 8). It compares five models: the
# discrete transformer (baseline), the OT-Transformer with $\lambda = 0$ and with its $\lambda$, and the
# N-ODE Transformer (eq. 12: one ODE per block, whose fully-connected layer has no skip; Baier-Reinio &
# De Sterck 2020) without and with the cost. In `neuralode_tf` these are the entries of
# `neuralode_tf.train.OT_VARIANTS[preset]`: `baseline`, `ot_unregularized`, `ot`, `node`, `node_regularized`.
# On MNIST (one attention-only block, no fully-connected layer) the N-ODE Transformer is the OT-Transformer,
# as the paper says, so the MNIST presets have the first three only.
#
# Each claim is marked:
#
# * **exact**: checked here digit for digit (model construction, identities);
# * **reduced**: judged at reduced scale on an offline stand-in (digits for MNIST, tweets for IMDb,
#   shapes3d for ModelNet40), over the recorded 3-seed comparisons in `experiments/ot_transformer/`,
#   by the two-standard-error rule (agrees, disagrees or inconclusive);
# * **not here**: needs the paper's data (downloads) or days of GPU time; the command is printed.
#
# | claim | paper | status here |
# |---|---|---|
# | §3: one Euler step with $T = 1$ is the discrete transformer | stated | **exact**: holds for one attention-only block without the blocks' inner residuals; not in the released code's convention (kept by the presets) |
# | Tables 1-4: parameter counts (transformer blocks; MNIST: whole models) | 0.86M/0.65M, 93k/18k, 1.77M/1.48M, 4.74M/2.37M | **exact** for all four paper presets (MNIST's 93k includes a FeedForward that Sinkformers' baseline builds and never calls) |
# | §5.2: on MNIST the N-ODE Transformer and the OT-Transformer are one model | stated | **exact**: the same logits and cost (eq. 12) |
# | Table 1 (ModelNet40): OT 89.9 > reg. N-ODE 87.5 ≈ baseline 87.4 | 5 trials | **reduced** (shapes3d): verdicts computed below by the two-standard-error rule, once the recording for the rebuilt models is current |
# | Table 2 (MNIST): OT 97.1 > unreg. OT 96.8 > baseline 93.0, with 18k vs 93k parameters | 5 trials | **reduced** (digits): verdicts computed below (two-standard-error rule, 3 seeds) |
# | Table 3 (Cats & Dogs): OT 79.0 > unreg. OT 78.2 > baseline 77.6 > N-ODE 75.6 | 3 trials | **not here** (no offline data; `ot_catsdogs_vit` needs Kaggle's `train/`) |
# | Table 4 (IMDb): OT 84.6 > baseline 83.9 ≥ N-ODE; unreg. OT 82.7 | 5 trials | **reduced** (tweets): verdicts computed below, once the recording for the rebuilt models is current |
# | Table 5: accuracy with 1-20 Euler steps; reg. ≥ unreg. | MNIST | **reduced**: verdicts at 2, 4, 8 and 20 steps computed below |
# | §5.1, §5.3: unregularised models blow up (NaN) on ModelNet40 and IMDb; regularised never | all trials | counted below over the current recordings, stress run included |
#
# Presets: `quick` (default, what CI runs; about 2 minutes on 2 CPU cores) counts the paper presets'
# models, checks the identities, re-runs seed 0 of the recorded digits comparison (it must match the
# recording), and judges the claims on the current recorded 3-seed comparisons. `full`
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
from pathlib import Path

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
# (28x28 images, patch 7, one attention-only block with one head, Sinkformers' attention) with the
# paper preset `ot_mnist` and its `OT_VARIANTS`, at $d = 64$, give every model the baseline's weights,
# and compare logits in float64. The preset builders only need the data's shape, so the models are
# built on a one-image placeholder of MNIST's shape; no data is read.
#
# * Without the blocks' inner residuals (`inner_residuals=False`, field $G(x)$) one Euler step is
#   $x + G(x)$: the discrete block, exactly, and the transport cost does not change the forward pass.
# * With them (the released code's convention, which the presets keep: field $x + G(x)$) one step
#   is $2x + G(x)$, not the discrete block. The N-ODE Transformer (eq. 12) removes the skip of the
#   fully-connected layer only; this block has none, so its field is $x + G(x)$ too: the same model
#   as the OT-Transformer (§5.2).


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
V = OT_VARIANTS["ot_mnist"]
discrete = PRESETS["ot_mnist"].build_model(MNIST_SHAPE, {**V["baseline"], "dim": 64}).double().eval()
one_step = {
    "OT, no inner residuals, λ = 0": {**V["ot_unregularized"], "steps": 1, "inner_residuals": False},
    "OT, no inner residuals, λ = 0.01": {**V["ot"], "steps": 1, "inner_residuals": False},
    "OT, inner residuals (presets)": {**V["ot"], "steps": 1},
    "N-ODE Transformer (eq. 12)": {**V["ot"], "field": "node", "steps": 1},
}
gaps = {}
for label, overrides in one_step.items():
    model = PRESETS["ot_mnist"].build_model(MNIST_SHAPE, overrides).double().eval()
    copy_weights(model, discrete)
    with torch.no_grad():
        gaps[label] = (model(images) - discrete(images)).abs().max().item()
    print(f"{label:<34} one Euler step vs the discrete block: max |Δ logits| = {gaps[label]:.2g}")
assert gaps["OT, no inner residuals, λ = 0"] == 0.0 and gaps["OT, no inner residuals, λ = 0.01"] == 0.0
assert gaps["OT, inner residuals (presets)"] > 1e-3
assert gaps["N-ODE Transformer (eq. 12)"] == gaps["OT, inner residuals (presets)"]  # the same model
verdict("§3", "one Euler step on [0, 1] = discrete transformer", "exact without inner residuals", "exact")
verdict("§3", "... in the released code's convention (inner residuals)", "2x + G(x), not the block", "differs")
verdict("§5.2", "MNIST: N-ODE and OT-Transformer share one formulation", "the same model (eq. 12)", "exact")

# %% [markdown]
# ## Tables 1-4: parameter counts of the paper presets (exact)
#
# Each paper preset's model builder, with its `OT_VARIANTS` overrides, on a placeholder of the real
# dataset's shape: MNIST 28x28x1 (patch 7, $d = k$ 128 vs 64), Cats & Dogs 224x224x3 (patch 16, 6 vs 5
# blocks of $d = 128$ with 8 heads of 64), IMDb (Sinkformers' 16,000-token vocabulary, $d = 256$, 8
# heads, post-LN, 6 vs 3 blocks), ModelNet40 (40 classes, Lee et al.'s ISABs of width 256 vs 200). Tables
# 1, 3 and 4 count the transformer blocks (the encoder; for ModelNet40 its four MABs, without the
# inducing points), Table 2 the whole models. All continuous variants of a task have the same count.

# %%
PAPER_SIZE = {
    "ot_mnist": MNIST_SHAPE,
    "ot_catsdogs_vit": placeholder("catsdogs", "image", torch.zeros(1, 3, 224, 224), 2),
    "ot_imdb": placeholder(
        "imdb", "tokens", torch.zeros(1, 4, dtype=torch.long), 2, Vocabulary(f"w{i}" for i in range(15_998))
    ),
    "ot_modelnet40": placeholder("modelnet40_h5", "points", None, 40),
}
PAPER_COUNTS = {  # (table, baseline, continuous) as printed
    "ot_mnist": ("Table 2", "93k", "18k"),
    "ot_catsdogs_vit": ("Table 3", "1.77M", "1.48M"),
    "ot_imdb": ("Table 4", "4.74M", "2.37M"),
    "ot_modelnet40": ("Table 1", "0.86M", "0.65M"),
}
UNUSED_FEED_FORWARD = 33_280  # FeedForward(128, 128) that Sinkformers' MNIST ViT builds and never calls


def counted(preset: str, model: torch.nn.Module) -> int:
    """What the paper counts: the whole model for MNIST, else the blocks (for ModelNet40 the MABs)."""
    if preset == "ot_mnist":
        return sum(p.numel() for p in model.parameters())
    return sum(p.numel() for name, p in model.encoder.named_parameters() if not name.endswith("inducing"))


def printed(n: int, paper: str) -> str:
    return f"{n / 1e3:.0f}k" if paper.endswith("k") else f"{n / 1e6:.2f}M"


counts = {}
for preset, data in PAPER_SIZE.items():
    for variant, overrides in OT_VARIANTS[preset].items():
        counts[preset, variant] = counted(preset, PRESETS[preset].build_model(data, overrides))
    assert len({counts[preset, v] for v in OT_VARIANTS[preset] if v != "baseline"}) == 1  # continuous: one count

print(f"{'preset':<16} {'model':<11} {'paper':>7} {'ours':>10}")
for preset, (table, paper_base, paper_cont) in PAPER_COUNTS.items():
    base, cont = counts[preset, "baseline"], counts[preset, "ot"]
    for label, paper_n, ours in (("baseline", paper_base, base), ("continuous", paper_cont, cont)):
        print(f"{preset:<16} {label:<11} {paper_n:>7} {ours:>10,}")
    unused = UNUSED_FEED_FORWARD * (preset == "ot_mnist")
    assert (printed(base + unused, paper_base), printed(cont, paper_cont)) == (paper_base, paper_cont)
    ours = f"{base:,}{f' (+ {unused:,} unused)' if unused else ''} / {cont:,}"
    verdict(table, f"parameters {paper_base} / {paper_cont}", ours, "exact")

# %% [markdown]
# Where the counts come from: the paper presets build Sinkformers' blocks. Their ViT attention has no
# `qkv` biases and 64-wide heads (Cats & Dogs: 8 heads of 64 on $d = 128$; MNIST: one head of width
# $k = d$ and then no output projection); the IMDb encoder is post-LN with ReLU and $d_{ff} = 1024$;
# ModelNet40 uses Lee et al.'s MAB (query-projection skip, one-layer ReLU rFF, no output projection), and
# the continuous models lift the points to $d = 200$ first, so their four MABs are $200 \to 200$. On MNIST
# the paper's 93k for the baseline is Sinkformers' `sum(numel)`, which includes a `FeedForward(128, 128)`
# (33,280 parameters) that `ViT_only_Att` builds and never calls: 59,658 + 33,280 = 92,938.

# %% [markdown]
# ## The recorded 3-seed comparisons on the stand-ins
#
# `experiments/ot_transformer/PRESET.json` holds one row per run (variant, seed, parameters, test
# accuracy, non-finite flag, step sweep) of
# `OMP_NUM_THREADS=1 neuralode-tf compare PRESET --seeds 0 1 2 --sweep` on 2 CPU cores, at the presets'
# defaults, and the stress run `neuralode-tf compare ot_mnist_vit --variants ot_unregularized ot --seeds 0 1 2
# --set lr=0.02` (10x the learning rate). A recording counts only if it was made with today's stand-in
# models (`recordings.json` there tags each one) and its parameter counts are what the presets build today. The stand-ins were rebuilt with the paper's blocks (eq. 12, Sinkformers' post-LN
# ReLU encoder, Lee et al.'s Set Transformer, no gradient clipping), and a recording made with the earlier
# models is listed as **stale**, with the command that regenerates it, and left out of every verdict.


# %%
def load_rows(path: Path) -> list[dict]:
    rows = json.loads(path.read_text())
    for row in rows:  # JSON keys are strings; step_sweep returns int keys
        if row.get("sweep"):
            row["sweep"] = {int(k): v for k, v in row["sweep"].items()}
    return rows


def built_counts(preset: str) -> dict[str, int]:
    data = build_task(TrainConfig(preset=preset, model=OT_VARIANTS[preset]["baseline"])).data
    return {
        variant: sum(p.numel() for p in PRESETS[preset].build_model(data, settings).parameters())
        for variant, settings in OT_VARIANTS[preset].items()
    }


recorded = {preset: load_rows(RECORDED / f"{preset}.json") for preset in STAND_INS}
recorded["stress"] = load_rows(RECORDED / "ot_mnist_vit_stress.json")
counts = {preset: built_counts(preset) for preset in STAND_INS}
counts["stress"] = counts["ot_mnist_vit"]
tags = json.loads((RECORDED / "recordings.json").read_text())
CURRENT = []
for preset, rows in recorded.items():
    stored = {(row["variant"], row["parameters"]) for row in rows}
    made_with = tags["recordings"]["ot_mnist_vit_stress" if preset == "stress" else preset]
    current = made_with == tags["models"] and all(counts[preset].get(variant) == n for variant, n in stored)
    seeds = sorted({row["seed"] for row in rows})
    if current:
        CURRENT.append(preset)
        print(f"{preset:<16}: {len(rows)} runs, seeds {seeds}, counts match the preset: current")
    else:
        name = "ot_mnist_vit" if preset == "stress" else preset
        print(
            f"{preset:<16}: STALE (recorded with earlier models); regenerate with "
            f"`OMP_NUM_THREADS=1 neuralode-tf compare {name} --seeds 0 1 2 --sweep`"
        )
assert "ot_mnist_vit" in CURRENT and "stress" in CURRENT
STANDS = [preset for preset in STAND_INS if preset in CURRENT]

# %% [markdown]
# ## Live run
#
# `quick`: seed 0 of the recorded digits comparison, re-run at the preset's settings (the three
# `ot_mnist_vit` models, 30 epochs, then every continuous model evaluated with 1-20 Euler steps). Single-threaded
# CPU runs are deterministic, so on the machine that made the recording it gives the recorded accuracies bit
# for bit; elsewhere it must agree within 2 points. `full`: the three
# recorded comparisons (3 seeds) and the stress run, live.

# %%
if WORK.exists():
    shutil.rmtree(WORK)
torch.set_num_threads(1)  # as the recordings (OMP_NUM_THREADS=1)
LIVE_PRESETS = tuple(STAND_INS) if FULL else ("ot_mnist_vit",)
SEEDS = (0, 1, 2) if FULL else (0,)


def with_sweeps(preset: str, rows: list[dict]) -> list[dict]:
    """Add the step sweep to the finite runs of the continuous models, as `neuralode-tf compare --sweep` does."""
    for row in rows:
        continuous = OT_VARIANTS[preset][row["variant"]]["field"] in ("composed", "node")
        row["sweep"] = step_sweep(row["out_dir"], STEPS) if continuous and not row["non_finite"] else None
    return rows


t_live = time.perf_counter()
live = {}
for preset in LIVE_PRESETS:
    rows = compare_variants(preset, OT_VARIANTS[preset], SEEDS, WORK / preset, progress=False, device="cpu")
    live[preset] = with_sweeps(preset, rows)
    print(f"{preset} on {STAND_INS[preset]}, seeds {list(SEEDS)}:")
    print(markdown_table(live[preset]))
if FULL:
    stress_variants = {name: v for name, v in OT_VARIANTS["ot_mnist_vit"].items() if name != "baseline"}
    live["stress"] = compare_variants(
        "ot_mnist_vit", stress_variants, SEEDS, WORK / "stress", progress=False, device="cpu", lr=0.02
    )
    print("stress run (lr=0.02):")
    print(markdown_table(live["stress"]))
LIVE_SECONDS = time.perf_counter() - t_live

# %%
for preset in live:
    if preset not in CURRENT:
        continue
    old = {(r["variant"], r["seed"]): r["test_accuracy"] for r in recorded[preset]}
    gaps = [abs(100 * (r["test_accuracy"] - old[r["variant"], r["seed"]])) for r in live[preset]]
    print(f"{preset}: live vs recorded, largest per-run gap {max(gaps):.2f} points over {len(gaps)} runs")
    # 0.00 on the machine that recorded them; another CPU's kernels may round differently, and training
    # amplifies that, so the check allows 2 points.
    assert max(gaps) <= 2.0
if FULL:
    STANDS = list(STAND_INS)
OURS = {preset: live[preset] if FULL else recorded[preset] for preset in (*STANDS, "stress")}
S = {preset: {entry["variant"]: entry for entry in summarize(OURS[preset])} for preset in OURS}

# %% [markdown]
# ## Side by side: the paper's tables and ours
#
# Ours are the current recorded 3-seed comparisons (`quick`) or their live re-run (`full`). The stand-ins
# are smaller than the paper's data and models and trained for minutes, so compare the models with each
# other, not the absolute accuracies with the paper's.


# %%
def paper_cell(mean, std) -> str:
    return f"{std}" if mean is None else f"{mean:.1f} ± {std:.2f}"


for preset in ("ot_modelnet_set", "ot_mnist_vit", "ot_catsdogs_vit", "ot_imdb_text"):
    print(PAPER[preset]["title"])
    print(
        f"  {'model':<17} {'paper params':>12} {'paper acc (%)':>14} | {'ours params':>11} {'ours acc (%)':>13} {'non-finite':>10}"
    )
    for variant in VARIANTS:
        params, mean, std = PAPER[preset]["rows"][variant]
        if preset in S and variant in S[preset]:
            e = S[preset][variant]
            ours = f"{e['parameters']:>11,} {e['mean']:>6.1f} ± {e['std']:<4.1f} {e['non_finite']:>5}/{e['runs']}"
        elif preset in S:
            ours = f"{'the OT-Transformer on this task (eq. 12)':>11}"
        else:
            ours = f"{'stale' if preset in STAND_INS else 'not here':>11}"
        print(f"  {variant:<17} {params:>12} {paper_cell(mean, std):>14} | {ours}")
    print()

# %% [markdown]
# ## The claims, judged by one rule
#
# A qualitative claim "A > B" is judged over the seeds by the two-standard-error rule: with the mean
# difference $\Delta = \bar a - \bar b$ and its standard error $se = \sqrt{s_a^2/n_a + s_b^2/n_b}$, it
# **agrees** if $\Delta > 2\,se$, **disagrees** if $\Delta < -2\,se$, and is **inconclusive (within noise)**
# otherwise. The verdicts below are computed, not written by hand.


# %%
def accuracies(preset: str, variant: str, k: int | None = None) -> list[float]:
    """Test accuracies (%) of the finite runs, or with ``k`` Euler steps at inference (the step sweep)."""
    rows = [r for r in OURS[preset] if r["variant"] == variant and not r["non_finite"]]
    return [100 * (r["test_accuracy"] if k is None else r["sweep"][k]) for r in rows]


def judge(a: list[float], b: list[float]) -> tuple[str, float, float]:
    """The two-standard-error verdict on "a > b", the mean difference and its standard error."""
    assert len(a) >= 3 and len(b) >= 3, "a qualitative verdict needs at least 3 seeds per model"
    diff = statistics.mean(a) - statistics.mean(b)
    se = (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5
    verdict_ = "agrees" if diff > 2 * se else "disagrees" if diff < -2 * se else "inconclusive (within noise)"
    return verdict_, diff, se


def claim(source: str, preset: str, better: str, worse: str, k: int | None = None) -> str:
    outcome, diff, se = judge(accuracies(preset, better, k), accuracies(preset, worse, k))
    steps = "" if k is None else f" at {k} steps"
    verdict(source, f"{better} > {worse}{steps}", f"{STAND_INS[preset]}: {f1(diff, True)} ± {se:.1f} (se)", outcome)
    return outcome


for preset in STANDS:
    for better, worse in (("ot", "baseline"), ("ot_unregularized", "baseline"), ("ot", "ot_unregularized")):
        claim(TABLE[preset], preset, better, worse)
    if "node_regularized" in OT_VARIANTS[preset]:
        claim(TABLE[preset], preset, "ot", "node_regularized")
for preset in STANDS:
    for k in (2, 4, 8, 20):
        claim("Table 5", preset, "ot", "ot_unregularized", k)
digits = S["ot_mnist_vit"]
assert digits["ot"]["parameters"] < 0.3 * digits["baseline"]["parameters"]
verdict(
    "Table 2",
    "the continuous model has ~20% of the baseline's parameters",
    f"digits: {digits['ot']['parameters']:,} vs {digits['baseline']['parameters']:,}",
    "exact",
)

# %% [markdown]
# ### Non-finite training without the transport cost
#
# The paper: on IMDb every unregularised trial (N-ODE and OT) hit exploding gradients and NaN, and on
# ModelNet40 the unregularised models gave NaN even with a slight cost; with enough cost no trial did.
# `compare_variants` counts such runs instead of crashing. The count below is over the current recordings,
# including the stress run at 10x the learning rate (no gradient clipping, as in the OT presets).

# %%
all_runs = [row for preset in OURS for row in OURS[preset]]
non_finite = sum(row["non_finite"] for row in all_runs)
print(f"non-finite runs: {non_finite} of {len(all_runs)} ({', '.join(OURS)})")
print(
    "stress run (lr=0.02): "
    + ", ".join(f"{v} {S['stress'][v]['mean']:.1f} ± {S['stress'][v]['std']:.1f}" for v in S["stress"])
)
verdict(
    "§5.1, §5.3",
    "unregularised models blow up (NaN); regularised never do",
    f"{non_finite} of {len(all_runs)} runs non-finite",
    "not reproduced" if non_finite == 0 else "see the runs",
)

# %% [markdown]
# ## Not here: the real datasets (commands for a GPU)
#
# The paper presets `ot_mnist`, `ot_catsdogs_vit`, `ot_imdb` and `ot_modelnet40` read the papers'
# datasets with `data.root=...` and carry Appendix B's models, steps, $\lambda$ (N-ODE: 0.1 on ModelNet40,
# 0.005 on Cats & Dogs), epochs, batch sizes, learning rates and step decays, with Adam and without
# gradient clipping, as Sinkformers' code. Differences that remain: no dropout inside the IMDb blocks
# (Sinkformers: 0.1), a word vocabulary of 16,000 for Sinkformers' sentencepiece one, the softmax of
# Lee et al. for Sinkformers' one-iteration Sinkhorn (whose rows sum to $1/n_q$ in their MAB), and
# seeded splits.

# %%
COMMANDS = {
    "Table 2 + Table 5 (MNIST)": "neuralode-tf compare ot_mnist --seeds 0 1 2 3 4 --sweep --set data.root=PATH/TO/MNIST",
    "Table 3 (Cats & Dogs)": "neuralode-tf compare ot_catsdogs_vit --seeds 0 1 2 --sweep "
    "--set data.root=PATH/TO/dogs-vs-cats/train",
    "Table 4 (IMDb; ot_slight and node_slight are its † rows, λ = 0.01)": "neuralode-tf compare ot_imdb "
    "--seeds 0 1 2 3 4 --sweep --set data.root=PATH/TO/aclImdb",
    "Table 1 (ModelNet40)": "neuralode-tf compare ot_modelnet40 --seeds 0 1 2 3 4 --sweep "
    "--set data.root=PATH/TO/ModelNet40_cloud.h5",
}
for table, command in COMMANDS.items():
    print(f"{table}:\n  {command}")
    assert command.split()[2] in OT_VARIANTS

# %% [markdown]
# ## Summary

# %%
print(f"{'status':<26} {'source':<16} claim  ->  ours")
for source, claim, ours, status in VERDICTS:
    print(f"{status:<26} {source:<16} {claim}  ->  {ours}")
statuses = [v[3] for v in VERDICTS]
tally = {status: statuses.count(status) for status in dict.fromkeys(statuses)}
print(f"\n{len(VERDICTS)} claims: " + ", ".join(f"{n} {status}" for status, n in tally.items()))

# %%
# NBVAL_IGNORE_OUTPUT
print(f"live runs took {LIVE_SECONDS:.0f} s; notebook ran in {time.perf_counter() - T_START:.0f} s")
