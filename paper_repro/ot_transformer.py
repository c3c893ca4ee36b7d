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
# Every claim of the paper's tables and figures is an entry of the ledger
# [`claims/ot_transformer.toml`](claims/ot_transformer.toml), with its class and a verdict computed by
# one rule (`claims/_rule.py`):
#
# * **exact**: the same number at the paper's printed precision (parameter counts, Appendix B's settings,
#   identities), recomputed from the library;
# * **qualitative**: "a beats b" on an offline stand-in (digits for MNIST, tweets for IMDb, shapes3d for
#   ModelNet40), over the recorded 3-seed comparisons in `experiments/ot_transformer/`, by the
#   two-standard-error rule: agrees, disagrees or inconclusive (within noise);
# * **not here**: needs the paper's data or days of GPU time; the command is given.
#
# This notebook shows the evidence behind the entries (identities, counts, the side-by-side tables and
# figures), reruns part of it live, and ends with the ledger recomputed.
#
# Presets: `quick` (default, what CI runs; about 2 minutes on 2 CPU cores) checks the identities and
# counts, re-runs seed 0 of the recorded digits comparison (it must agree with the recording), and
# recomputes the ledger from the recorded 3-seed comparisons. `full` (`NEURALODE_TF_FULL=1`; roughly
# 2 hours on 2 CPU cores) re-runs all three recorded comparisons and the stress run live, three seeds
# at the presets' settings with the step sweep and the test split evaluated after every epoch
# (`neuralode-tf compare ot_mnist_digits --seeds 0 1 2 --sweep --set eval_every=1`, and `ot_imdb_tweets`,
# `ot_modelnet40_shapes3d`), and judges the ledger's claims on the live runs instead.

# %%
# NBVAL_IGNORE_OUTPUT
import json
import time
from pathlib import Path

import claims
import matplotlib.pyplot as plt
import torch
from claims import _ot_transformer as ot_claims

from neuralode_tf.notebook import setup
from neuralode_tf.train import (
    OT_VARIANTS,
    PRESETS,
    TrainConfig,
    build_setup,
    compare_variants,
    markdown_table,
    step_sweep,
    summarize,
)

NB = setup(work="repro_ot", experiment="ot_transformer")
LEDGER = claims.load("ot_transformer")
print(f"ledger: {len(LEDGER.claims)} claims")

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
    "ot_modelnet40_shapes3d": {
        "title": "Table 1 · ModelNet40 (5 trials) | ours: shapes3d",
        "rows": {
            "baseline": ("0.86M", 87.4, 0.45),
            "ot_unregularized": ("0.65M", None, "NaN"),
            "ot": ("0.65M", 89.9, 0.42),
            "node": ("0.65M", None, "NaN"),
            "node_regularized": ("0.65M", 87.5, 0.51),
        },
    },
    "ot_mnist_digits": {
        "title": "Table 2 · MNIST (5 trials) | ours: digits",
        "rows": {
            "baseline": ("93k", 93.0, 0.69),
            "ot_unregularized": ("18k", 96.8, 0.23),
            "ot": ("18k", 97.1, 0.16),
            "node": ("18k", None, "= OT"),
            "node_regularized": ("18k", None, "= OT"),
        },
    },
    "ot_catsdogs": {
        "title": "Table 3 · Cats & Dogs (3 trials, final accuracy) | ours: not here",
        "rows": {
            "baseline": ("1.77M", 77.6, 0.86),
            "ot_unregularized": ("1.48M", 78.2, 0.39),
            "ot": ("1.48M", 79.0, 0.31),
            "node": ("1.48M", 75.6, 0.48),
            "node_regularized": ("1.48M", 75.6, 0.03),
        },
    },
    "ot_imdb_tweets": {
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
STAND_INS = {"ot_mnist_digits": "digits", "ot_imdb_tweets": "tweets", "ot_modelnet40_shapes3d": "shapes3d"}
TABLE = {
    "ot_modelnet40_shapes3d": "Table 1",
    "ot_mnist_digits": "Table 2",
    "ot_catsdogs": "Table 3",
    "ot_imdb_tweets": "Table 4",
}


# %% [markdown]
# ## §3: one Euler step on $[0, 1]$ is the discrete transformer (exact, with a caveat)
#
# The paper: "When $T = 1$ and a single step forward Euler integration scheme is used, our framework
# is identical to the original discrete transformer." We build the MNIST ViT at the paper's size
# (28x28 images, patch 7, one attention-only block with one head, Sinkformers' attention) with the
# paper preset `ot_mnist` and its `OT_VARIANTS`, at $d = 64$, give every model the baseline's weights,
# and compare logits in float64 (`claims/_ot_transformer.py`, `one_step_gaps`). The preset builders
# only need the data's shape, so the models are built on a one-image placeholder of MNIST's shape.
#
# * Without the blocks' inner residuals (`inner_residuals=False`, field $G(x)$) one Euler step is
#   $x + G(x)$: the discrete block, exactly, and the transport cost does not change the forward pass.
# * With them (the released code's convention, which the presets keep: field $x + G(x)$) one step
#   is $2x + G(x)$, not the discrete block. The N-ODE Transformer (eq. 12) removes the skip of the
#   fully-connected layer only; this block has none, so its field is $x + G(x)$ too: the same model
#   as the OT-Transformer (§5.2).

# %%
gaps = ot_claims.one_step_gaps()
for label, gap in gaps.items():
    print(f"{label:<34} one Euler step vs the discrete block: max |Δ logits| = {gap:.2g}")
assert gaps["OT, no inner residuals, λ = 0"] == 0.0 and gaps["OT, no inner residuals, λ = 0.01"] == 0.0
assert gaps["OT, inner residuals (presets)"] > 1e-3
assert gaps["N-ODE Transformer (eq. 12)"] == gaps["OT, inner residuals (presets)"]  # the same model
assert ot_claims.mnist_node_is_ot() == "identical"

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
PAPER_COUNTS = {"ot_mnist": "93k / 18k", "ot_catsdogs": "1.77M / 1.48M", "ot_imdb": "4.74M / 2.37M"}
PAPER_COUNTS["ot_modelnet40"] = "0.86M / 0.65M"
COUNTED = {
    "ot_mnist": ot_claims.mnist_parameters,
    "ot_catsdogs": ot_claims.catsdogs_parameters,
    "ot_imdb": ot_claims.imdb_parameters,
    "ot_modelnet40": ot_claims.modelnet40_parameters,
}
print(f"{'preset':<16} {'baseline':>10} {'continuous':>11} {'printed':>14} {'paper':>14}")
for preset, paper in PAPER_COUNTS.items():
    counts = ot_claims.parameter_counts(preset)
    printed = COUNTED[preset]()
    print(f"{preset:<16} {counts['baseline']:>10,} {counts['ot']:>11,} {printed:>14} {paper:>14}")
    assert printed == paper

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
# defaults, and the stress run `neuralode-tf compare ot_mnist_digits --variants ot_unregularized ot --seeds 0 1 2
# --set lr=0.02` (10x the learning rate). The learning curves of Figures 2 and 5 come from runs with a test
# evaluation after every epoch (`--set eval_every=1`): `PRESET_curves.json`, the two models each figure's claims
# compare (`--variants baseline ot` on shapes3d, `--variants ot ot_slight` on tweets), recorded apart because the
# rows of `PRESET.json` were made on another machine, whose float rounding this one does not reproduce bit for bit;
# on digits the `ot` and `ot_unregularized` rows of `ot_mnist_digits.json` were re-recorded in place (the same
# accuracies, sweeps and training curves, with the test curves added). A recording counts only if it was made with today's stand-in
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
    data = build_setup(TrainConfig(preset=preset, model=OT_VARIANTS[preset]["baseline"])).data
    return {
        variant: sum(p.numel() for p in PRESETS[preset].build_model(data, settings).parameters())
        for variant, settings in OT_VARIANTS[preset].items()
    }


CURVES = {"ot_modelnet40_shapes3d": "ot_modelnet40_shapes3d_curves", "ot_imdb_tweets": "ot_imdb_tweets_curves"}
"""The recordings with the test curves of Figures 2 and 5, by stand-in (digits: the comparison's own)."""
recorded = {preset: load_rows(NB.recorded / f"{preset}.json") for preset in STAND_INS}
recorded["stress"] = load_rows(NB.recorded / "ot_mnist_digits_stress.json")
recorded |= {name: load_rows(NB.recorded / f"{name}.json") for name in CURVES.values()}
counts = {preset: built_counts(preset) for preset in STAND_INS}
counts["stress"] = counts["ot_mnist_digits"]
counts |= {name: counts[preset] for preset, name in CURVES.items()}
tags = json.loads((NB.recorded / "recordings.json").read_text())
CURRENT = []
for preset, rows in recorded.items():
    stored = {(row["variant"], row["parameters"]) for row in rows}
    made_with = tags["recordings"]["ot_mnist_digits_stress" if preset == "stress" else preset]
    current = made_with == tags["models"] and all(counts[preset].get(variant) == n for variant, n in stored)
    seeds = sorted({row["seed"] for row in rows})
    if current:
        CURRENT.append(preset)
        print(f"{preset:<16}: {len(rows)} runs, seeds {seeds}, counts match the preset: current")
    else:
        name = "ot_mnist_digits" if preset == "stress" else preset.removesuffix("_curves")
        print(
            f"{preset:<16}: STALE (recorded with earlier models); regenerate with "
            f"`OMP_NUM_THREADS=1 neuralode-tf compare {name} --seeds 0 1 2 --sweep`"
        )
assert set(CURRENT) == set(recorded), "the ledger's qualitative entries need every recording current"
STANDS = [preset for preset in STAND_INS if preset in CURRENT]

# %% [markdown]
# ## Live run
#
# `quick`: seed 0 of the recorded digits comparison, re-run at the preset's settings (the three
# `ot_mnist_digits` models, 30 epochs, the test split evaluated after every epoch, which changes nothing of the
# training, then every continuous model evaluated with 1-20 Euler steps). Single-threaded
# CPU runs are deterministic, so on the machine that made the recording it gives the recorded accuracies bit
# for bit; elsewhere it must agree within 2 points. `full`: the three
# recorded comparisons (3 seeds) and the stress run, live.

# %%
torch.set_num_threads(1)  # as the recordings (OMP_NUM_THREADS=1)
LIVE_PRESETS = tuple(STAND_INS) if NB.full else ("ot_mnist_digits",)
SEEDS = (0, 1, 2) if NB.full else (0,)


def with_sweeps(preset: str, rows: list[dict]) -> list[dict]:
    """Add the step sweep to the finite runs of the continuous models, as `neuralode-tf compare --sweep` does."""
    for row in rows:
        continuous = OT_VARIANTS[preset][row["variant"]]["field"] in ("composed", "node")
        row["sweep"] = step_sweep(row["out_dir"], STEPS) if continuous and not row["non_finite"] else None
    return rows


t_live = time.perf_counter()
live = {}
for preset in LIVE_PRESETS:
    rows = compare_variants(
        preset, OT_VARIANTS[preset], SEEDS, NB.work / preset, progress=False, device="cpu", eval_every=1
    )
    live[preset] = with_sweeps(preset, rows)
    print(f"{preset} on {STAND_INS[preset]}, seeds {list(SEEDS)}:")
    print(markdown_table(live[preset]))
if NB.full:
    stress_variants = {name: v for name, v in OT_VARIANTS["ot_mnist_digits"].items() if name != "baseline"}
    live["stress"] = compare_variants(
        "ot_mnist_digits", stress_variants, SEEDS, NB.work / "stress", progress=False, device="cpu", lr=0.02
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
if NB.full:
    STANDS = list(STAND_INS)
OURS = {preset: live[preset] if NB.full else recorded[preset] for preset in (*STANDS, "stress")}
OURS |= {name: live[preset] if NB.full else recorded[name] for preset, name in CURVES.items() if preset in STANDS}
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


for preset in ("ot_modelnet40_shapes3d", "ot_mnist_digits", "ot_catsdogs", "ot_imdb_tweets"):
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
# ## Figures
#
# Left: test accuracy per model, the paper's (Tables 1, 2 and 4; best accuracy, with its standard
# deviation) next to ours (final accuracy on the stand-in, mean ± standard deviation over the seeds).
# Middle: Table 5, every continuous model trained with 20 Euler steps and tested with fewer. Right: the
# learning curves behind Figures 2, 3 and 5 (means over the seeds): the training (data-fitting) loss per epoch,
# and, for the models the figures' claims compare (recorded with `--set eval_every=1`), the test accuracy after
# every epoch (solid) with the training accuracy (dotted).

# %%
COLOURS = {"baseline": "tab:gray", "ot_unregularized": "tab:orange", "ot": "tab:blue"}
COLOURS |= {"node": "tab:red", "node_regularized": "tab:purple", "ot_slight": "tab:green"}


def mean_curve(recording: str, variant: str, key: str) -> list[float]:
    """The mean over the seeds of a learning curve (empty if the runs did not record it)."""
    curves = [row["curve"].get(key) for row in OURS[recording] if row["variant"] == variant and row.get("curve")]
    if not curves or not all(curves) or any(None in curve for curve in curves):
        return []
    return [sum(curve[e] for curve in curves) / len(curves) for e in range(len(curves[0]))]


fig, axes = plt.subplots(3, len(STANDS), figsize=(4.2 * len(STANDS), 10), squeeze=False)
for column, preset in enumerate(STANDS):
    ax = axes[0, column]
    names = [v for v in VARIANTS if v in S[preset]]
    for i, variant in enumerate(names):
        _, mean, std = PAPER[preset]["rows"][variant]
        if mean is not None:
            ax.bar(i - 0.2, mean, 0.4, yerr=std, color=COLOURS[variant], alpha=0.4, capsize=3)
        ours = S[preset][variant]
        ax.bar(i + 0.2, ours["mean"], 0.4, yerr=ours["std"], color=COLOURS[variant], capsize=3)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_title(f"{TABLE[preset]}: paper (light) vs {STAND_INS[preset]} (dark)", fontsize=9)
    ax.set_ylabel("test accuracy (%)")
    ax = axes[1, column]
    for variant in names:
        loss = mean_curve(preset, variant, "loss")
        ax.plot(range(1, len(loss) + 1), loss, color=COLOURS[variant], label=variant)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (mean over seeds)")
    ax.legend(fontsize=7)
    ax = axes[2, column]
    with_tests = CURVES.get(preset, preset)
    for variant in dict.fromkeys(row["variant"] for row in OURS[with_tests]):
        test = mean_curve(with_tests, variant, "test_accuracy")
        train_accuracy = mean_curve(with_tests, variant, "accuracy")
        if test:
            epochs = range(1, len(test) + 1)
            ax.plot(epochs, [100 * a for a in test], color=COLOURS[variant], label=f"{variant}: test")
            ax.plot(
                epochs, [100 * a for a in train_accuracy], ":", color=COLOURS[variant], label=f"{variant}: training"
            )
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy (%, mean over seeds)")
    ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

fig, ax = plt.subplots(figsize=(5, 3.5))
for variant, paper_sweep in PAPER_TABLE5.items():
    ax.plot(STEPS, list(paper_sweep.values()), "--", color=COLOURS[variant], label=f"paper (MNIST): {variant}")
    runs = [r for r in OURS["ot_mnist_digits"] if r["variant"] == variant and not r["non_finite"]]
    ours = [sum(100 * r["sweep"][k] for r in runs) / len(runs) for k in STEPS]
    ax.plot(STEPS, ours, "-o", color=COLOURS[variant], label=f"ours (digits): {variant}")
ax.set_xscale("log", base=2)
ax.set_xlabel("Euler steps at test time (trained with 20)")
ax.set_ylabel("test accuracy (%)")
ax.legend(fontsize=7)
ax.set_title("Table 5")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The ledger
#
# Every entry recomputed: exact claims from the library, qualitative ones by the two-standard-error rule
# on the recordings (`quick`) or on this notebook's live runs (`full`). In `quick`, every recomputed
# entry must be the stored one (what `python -m paper_repro.claims --check` checks in CI too).

# %%
claims.notebook_report(LEDGER, OURS if NB.full else None)

# %% [markdown]
# ## Not here: the real datasets (commands for a GPU)
#
# The paper presets `ot_mnist`, `ot_catsdogs`, `ot_imdb` and `ot_modelnet40` read the papers'
# datasets with `data.root=...` and carry Appendix B's models, steps, $\lambda$, epochs, batch sizes,
# learning rates and step decays, with Adam and without gradient clipping, as Sinkformers' code (the
# `appb-*` entries of the ledger check them). Differences that remain: no dropout inside the IMDb blocks
# (Sinkformers: 0.1), a word vocabulary of 16,000 for Sinkformers' sentencepiece one, the softmax of
# Lee et al. for Sinkformers' one-iteration Sinkhorn (whose rows sum to $1/n_q$ in their MAB), and
# seeded splits.

# %%
for entry in LEDGER.claims:
    if entry.kind == "not here":
        print(f"{entry.where}: {entry.claim}\n  {entry.command}")
        assert entry.command.split()[2] in PRESETS

# %%
# NBVAL_IGNORE_OUTPUT
print(f"live runs took {LIVE_SECONDS:.0f} s; notebook ran in {time.perf_counter() - NB.start:.0f} s")
