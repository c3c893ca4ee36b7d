# %% [markdown]
# # Reproduction · Zhong et al. (2022), *A Neural ODE Interpretation of Transformer Layers*
#
# Zhong, Zhang, Chakraborty and Dey read a pre-norm transformer layer, $x + G(x)$ then $+F(\cdot)$ with
# attention $G$ and MLP $F$, as one Lie-Trotter Euler step of
#
# $$\frac{dx}{dt} = F(x) + G(x, X) \qquad \text{(their eq. 3)},$$
#
# and propose the **parallel** layer $x^{m+1} = x^m + G(x^m) + F(x^m)$ (eq. 4): one plain Euler step of
# the same ODE. Sharing weights over depth turns a 12-layer stack into fewer independent layers, and
# the Euler step can be replaced by RK4. Their image-classification evidence is Table 1 (CIFAR-100,
# 12-layer DeiT-Ti-sized models, no dropout or stochastic depth):
#
# | model | layers | independent layers | parameters | top-1 |
# |---|---|---|---|---|
# | DeiT-Ti (sequential) | 12 | 12 | 5.5M | 66.02% |
# | proposed (parallel) | 12 | 12 | 5.5M | 70.92% |
# | | 12 | 6 | 2.9M | 67.42% |
# | | 12 | 4 | 2.0M | 66.40% |
# | | 12 | 3 | 1.5M | 63.68% |
# | | 12 | 2 | 1.1M | 61.05% |
# | | 12 | 1 | 0.7M | 53.33% |
#
# and, in the text of §3.1, RK4 instead of Euler raises the 12-layer parallel model from 70.92% to 72.66%.
#
# ## The claims and where this notebook addresses them
#
# | claim | here | how | outcome |
# |---|---|---|---|
# | C1. the parameter counts of Table 1 | **exactly** | `vit_preset("deit_tiny", num_classes=100, field=..., num_sets=k)` (§1) | all six match (224x224 inputs; the 32x32 `deit_tiny_cifar100` is 0.16M smaller) |
# | C2. sequential layer = Lie-Trotter Euler step of eq. 3; parallel layer = Euler step (eq. 4); sharing spreads $k$ sets over 12 layers; RK4 integrates the same ODE | **exactly** | the library's encoders against the hand-written layers (§2) | equal to float precision |
# | C3. parallel beats sequential (66.02% → 70.92%) | **qualitatively**, reduced scale | scikit-learn digits, 3 seeds (§3a) | the paper's direction, within noise |
# | C4. fewer independent layers: fewer parameters and lower accuracy (70.92% → 53.33%) | **qualitatively**, reduced scale | 12 layers from 12, 6, 4, 3, 2, 1 sets on digits, 3 seeds (§3b) | parameters: yes; accuracy: after 10 epochs yes, after 30 no (digits saturates) |
# | C5. RK4 beats Euler (70.92% → 72.66%) | **qualitatively**, reduced scale | the same model trained with either solver on digits, 3 seeds (§3c) | not reproduced: RK4 behind (12 epochs) or level (30) |
# | the CIFAR-100 accuracies themselves | **not here** (needs CIFAR-100 and a GPU) | the exact `neuralode-tf train` commands, smoke-tested on a fake CIFAR folder (§5) | not run |
# | Table 2 (dropout, stochastic depth), Fig. 2 (norm placement), Tables 3-4 (WMT-14, WikiText-103) | **not addressed** | the library's ViT has neither dropout nor stochastic depth inside the ODE; no WMT/WikiText data here | |
#
# Everything runs through the public API: `neuralode_tf.models` (`vit_preset`, `VIT_PRESETS`) and
# `neuralode_tf.train` (`TrainConfig`, `train`, `compare_variants`, `summarize`, `apply_overrides`, `PRESETS`). The training runs use
# the `vit_digits` preset (scikit-learn's 8x8 digits, 1,438 train / 359 test images) with model
# overrides. Runs are independent and seeded and each uses one thread, so they are spread over two worker
# processes; the numbers do not depend on the number of workers.
#
# Runtime: about 2.5 min on 2 CPU cores (quick preset, the default, what CI runs). `NEURALODE_TF_FULL=1`
# trains every model 30 epochs instead of 10-12 (6-8 min on 2 CPU cores); neither preset touches
# CIFAR-100, whose commands (§5) are meant for a GPU.

# %%
import csv
import math
import os
import pickle
import shutil
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path

FULL = os.environ.get("NEURALODE_TF_FULL", "0") == "1"
T_START = time.perf_counter()

# %%
# NBVAL_IGNORE_OUTPUT
import numpy as np
import torch

import neuralode_tf
from neuralode_tf.models import VIT_PRESETS, vit_preset
from neuralode_tf.train import (
    PRESETS,
    ScheduleWarning,
    TrainConfig,
    apply_overrides,
    compare_variants,
    summarize,
    train,
)

torch.set_num_threads(1)  # bit-for-bit reproducible reductions
WORKERS = min(2, os.cpu_count() or 1)
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "repro_zhong"
shutil.rmtree(WORK, ignore_errors=True)
print(f"neuralode_tf {neuralode_tf.__version__}, torch {torch.__version__}, numpy {np.__version__}")
print(f"FULL={FULL}, {WORKERS} worker processes, runs under {WORK}")

# %% [markdown]
# ## 1. Parameter counts of Table 1 (exact)
#
# `vit_preset("deit_tiny", ...)` is DeiT-Ti ($d = 192$, 12 layers, 3 heads, MLP ratio 4, 224x224 inputs,
# patch 16); `num_classes=100` gives the CIFAR-100 head. The sequential and the parallel layer have the same
# parameters, and `num_sets=k` builds the 12 layers from $k$ sets. Each set has $4d^2 + 6d$ attention and
# $2dh + h + 3d$ MLP parameters ($h = 4d$); the rest (patch embedding, class token, positions, final norm,
# head) does not depend on $k$.
#
# The paper's counts are those of the **224x224** model, i.e. CIFAR-100 resized to DeiT's input size. At
# CIFAR's own 32x32 with patch 4 (`deit_tiny_cifar100`, 64 patches) the patch embedding is 138,240 and the
# positions 25,344 parameters smaller, so every count is 0.16M lower and none of the six rounds to the paper's.

# %%
PAPER = {  # independent layers -> (parameters in M, top-1 %) of Table 1, parallel model
    12: (5.5, 70.92),
    6: (2.9, 67.42),
    4: (2.0, 66.40),
    3: (1.5, 63.68),
    2: (1.1, 61.05),
    1: (0.7, 53.33),
}
PAPER_SEQUENTIAL, PAPER_RK4 = 66.02, 72.66
SETS = list(PAPER)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


counts = {}  # (preset, field, k) -> parameters
for preset, options in [("deit_tiny", dict(num_classes=100)), ("deit_tiny_cifar100", {})]:
    for field in ("split", "parallel"):
        for k in SETS:
            counts[preset, field, k] = count(vit_preset(preset, field=field, num_sets=k, **options))

d, h = 192, 768
per_set = (4 * d * d + 6 * d) + (2 * d * h + h + 3 * d)
print(f"parameters per independent layer: {per_set:,}")
print(f"{'sets':>4} {'paper':>7} {'deit_tiny 224x224':>19} {'deit_tiny_cifar100 32x32':>25}")
for k in SETS:
    ours224, ours32 = counts["deit_tiny", "parallel", k], counts["deit_tiny_cifar100", "parallel", k]
    flag = "" if round(ours32 / 1e6, 1) == PAPER[k][0] else "  (differs from the paper)"
    print(f"{k:>4} {PAPER[k][0]:>6}M {ours224:>11,} = {ours224 / 1e6:.1f}M {ours32:>13,} = {ours32 / 1e6:.1f}M{flag}")

for preset in ("deit_tiny", "deit_tiny_cifar100"):
    for k in SETS:
        assert counts[preset, "split", k] == counts[preset, "parallel", k]  # same parameters, other wiring
        assert counts[preset, "parallel", k] - counts[preset, "parallel", 1] == (k - 1) * per_set
    assert all(counts[preset, "parallel", a] > counts[preset, "parallel", b] for a, b in zip(SETS, SETS[1:]))
assert all(round(counts["deit_tiny", "parallel", k] / 1e6, 1) == PAPER[k][0] for k in SETS)
assert counts["deit_tiny", "parallel", 12] - counts["deit_tiny_cifar100", "parallel", 12] == 138_240 + 25_344

# %% [markdown]
# ## 2. The layers are steps of one ODE (exact)
#
# The library builds a ViT's encoder as one `ContinuousDepth` module: a `WeightSharedField` over depth-time
# $[0, 12]$ whose pieces are `SplitField(G, F)` (`field="split"`) or `ParallelField(G, F)`
# (`field="parallel"`). We capture the encoder's input and output with a forward hook and recompute them
# by hand from the branches $G$, $F$ of the set that layer $m$ uses:
#
# * sequential, the default `lie_trotter` step of size 1: $\hat x = x + G(x)$, $x \leftarrow \hat x + F(\hat x)$ (eqs. 1-2);
# * parallel, the default `euler` step of size 1: $x \leftarrow x + G(x) + F(x)$ (eq. 4);
# * parallel with `method="rk4"`: the classical RK4 step of size 1 of $G + F$ (four evaluations per layer).
#
# With `num_sets=3`, layers 0-3 use set 0, layers 4-7 set 1 and layers 8-11 set 2. The model is the
# 12-layer digits model of §3b ($d = 32$, 4 heads, patch 4), untrained.

# %%
FAMILY = dict(depth=12, dim=32, heads=4, patch_size=4)  # the 12-layer digits models of §3


def encoder_io(model: torch.nn.Module, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    captured = {}
    hook = model.encoder.register_forward_hook(lambda module, args, out: captured.update(x0=args[0], x1=out))
    with torch.no_grad():
        model(images)
    hook.remove()
    return captured["x0"], captured["x1"]


def branches(model: torch.nn.Module, layer: int) -> list[torch.nn.Module]:
    """``[G, F]`` of the parameter set that ``layer`` uses."""
    field = model.encoder.field
    return [term.branch for term in field.layers[field.index(layer)].terms]


images = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
gaps, nfe = {}, {}
for name, options in [("sequential", {"field": "split"}), ("parallel", {}), ("parallel + rk4", {"method": "rk4"})]:
    torch.manual_seed(1)
    model = vit_preset("deit_tiny_digits", **FAMILY, num_sets=3, **options).eval()
    x0, x1 = encoder_io(model, images)
    x = x0
    with torch.no_grad():
        for m in range(12):
            G, F = branches(model, m)
            if name == "sequential":
                x = x + G(x)
                x = x + F(x)
            elif name == "parallel":
                x = x + G(x) + F(x)
            else:
                k1 = G(x) + F(x)
                k2 = G(x + k1 / 2) + F(x + k1 / 2)
                k3 = G(x + k2 / 2) + F(x + k2 / 2)
                k4 = G(x + k3) + F(x + k3)
                x = x + (k1 + 2 * k2 + 2 * k3 + k4) / 6
    gaps[name] = (x - x1).abs().max().item() / x1.abs().max().item()
    nfe[name] = model.encoder.stats.nfe
    print(
        f"{name:<15} {model.encoder.solve_kwargs['method']:>11}: relative gap {gaps[name]:.0e}, {nfe[name]} evaluations"
    )
layer_sets = [model.encoder.field.index(m) for m in range(12)]
print("parameter set of layers 0-11 with num_sets=3:", layer_sets)
assert max(gaps.values()) < 1e-5
assert nfe == {"sequential": 24, "parallel": 12, "parallel + rk4": 48}  # RK4: 4 evaluations of G + F per layer
assert layer_sets == [m // 4 for m in range(12)] and len(model.encoder.field.layers) == 3

# %% [markdown]
# ## 3. Training at reduced scale
#
# All runs use the `vit_digits` training preset (AdamW, lr 2e-3, weight decay 0.05, batch 64, warm-up then
# cosine decay) on scikit-learn's digits, with seeds 0, 1, 2 (model initialisation and data order):
#
# * **preset model** (§3a, §3c): the preset's own ViT, patch 2 (16 patches), $d = 48$, 4 heads, **4** layers;
#   sequential vs parallel, and the parallel model trained with Euler vs RK4;
# * **Table 1 family** (§3a, §3b): the paper's 12 layers at reduced size, $d = 32$, 4 heads, patch 4
#   (4 patches of 4x4 pixels): sequential with 12 sets, parallel with 12, 6, 4, 3, 2, 1 sets. Patch 4 instead
#   of the preset's 2: with 16 patches, these 12-layer models stayed near chance for several epochs and
#   then landed anywhere between chance and 80% after 8-10 epochs (development runs with $d = 16$ and 32),
#   which no sweep can be read from at this budget.
#
# The quick preset trains for 12 (preset model) and 10 (Table 1 family) epochs: short of convergence for the
# preset model (30 epochs reach about 97%), so §3a/§3c compare how fast the variants learn as much as where
# they end. `NEURALODE_TF_FULL=1` trains all of them 30 epochs.

# %%
SEEDS = (0, 1, 2)
PRESET_EPOCHS = 30 if FULL else 12
FAMILY_EPOCHS = 30 if FULL else 10
LOOP = dict(progress=False, warmup_steps=50 if FULL else 20)

EXPERIMENTS = {  # group -> (settings, {variant: model overrides})
    "preset": (
        dict(epochs=PRESET_EPOCHS, **LOOP),
        {"sequential": {"field": "split"}, "parallel": {"field": "parallel"}, "parallel_rk4": {"method": "rk4"}},
    ),
    "table1": (
        dict(epochs=FAMILY_EPOCHS, **LOOP),
        {
            "sequential_12": {**FAMILY, "field": "split"},
            **{f"parallel_{k}": {**FAMILY, "field": "parallel", "num_sets": k} for k in SETS},
        },
    ),
}
# one job per (group, variant, seed); the RK4 runs (3-4x the cost of an Euler run) go first
jobs = [(group, name, seed) for group, (_, variants) in EXPERIMENTS.items() for name in variants for seed in SEEDS]
jobs.sort(key=lambda job: "rk4" not in job[1])


def submit(run, group: str, name: str, seed: int):
    settings, variants = EXPERIMENTS[group]
    return run(compare_variants, "vit_digits", {name: variants[name]}, (seed,), WORK / group, **settings)


t_train = time.perf_counter()
if WORKERS > 1:
    context = get_context("spawn")  # fresh interpreters: no state shared with this kernel
    with ProcessPoolExecutor(WORKERS, mp_context=context, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = [(job, submit(pool.submit, *job)) for job in jobs]
        rows = [dict(row, group=job[0]) for job, future in futures for row in future.result()]
else:
    rows = [dict(row, group=job[0]) for job in jobs for row in submit(lambda fn, *a, **k: fn(*a, **k), *job)]
train_seconds = time.perf_counter() - t_train
assert not any(row["non_finite"] for row in rows)
results = {
    group: {entry["variant"]: entry for entry in summarize([r for r in rows if r["group"] == group])}
    for group in EXPERIMENTS
}
for group, (_, variants) in EXPERIMENTS.items():
    for name in variants:
        entry = results[group][name]
        per_seed = sorted(
            (r["seed"], 100 * r["test_accuracy"]) for r in rows if r["variant"] == name and r["group"] == group
        )
        seeds_text = ", ".join(f"{a:.1f}" for _, a in per_seed)
        print(
            f"{group:<7} {name:<14} {entry['parameters']:>8,} parameters  {entry['mean']:5.1f} ± {entry['std']:3.1f}%  ({seeds_text})"
        )

# %% [markdown]
# How we read a comparison: the difference of the means $\Delta$ against its standard error
# $s = \sqrt{(\sigma_a^2 + \sigma_b^2)/3}$ over the 3 seeds. $|\Delta| > 2s$ counts as an observed ordering;
# otherwise the two are indistinguishable at this scale and we say so instead of asserting an order.


# %%
def compare(a: dict, b: dict) -> tuple[float, float, str]:
    """Mean difference a - b (points), its standard error, and a verdict against the paper's a > b."""
    delta = a["mean"] - b["mean"]
    error = math.sqrt((a["std"] ** 2 + b["std"] ** 2) / len(SEEDS))
    if delta > 2 * error:
        verdict = "agrees with the paper"
    elif delta > 0:
        verdict = "same direction as the paper, within noise"
    elif delta >= -2 * error:
        verdict = "opposite direction to the paper, within noise"
    else:
        verdict = "DISAGREES with the paper"
    return delta, error, verdict


def spearman(x: list[float], y: list[float]) -> float:
    rank = lambda v: np.argsort(np.argsort(v)).astype(float)
    return float(np.corrcoef(rank(x), rank(y))[0, 1])


# %% [markdown]
# ### 3a. Parallel vs sequential (C3)

# %%
preset, table1 = results["preset"], results["table1"]
verdicts = {}
for label, seq, par in [
    ("preset model, 4 layers", preset["sequential"], preset["parallel"]),
    ("Table 1 family, 12 layers", table1["sequential_12"], table1["parallel_12"]),
]:
    delta, error, verdict = compare(par, seq)
    verdicts["C3 " + label] = verdict
    print(
        f"{label}: sequential {seq['mean']:.1f} ± {seq['std']:.1f}%, parallel {par['mean']:.1f} ± {par['std']:.1f}%"
        f"  -> parallel - sequential = {delta:+.1f} ± {error:.1f} points: {verdict}"
    )
print(f"paper (CIFAR-100, 12 layers): sequential {PAPER_SEQUENTIAL}%, parallel {PAPER[12][1]}% -> +4.9 points")
assert preset["sequential"]["parameters"] == preset["parallel"]["parameters"]
assert table1["sequential_12"]["parameters"] == table1["parallel_12"]["parameters"]

# %% [markdown]
# ### 3b. Weight sharing over 12 layers (C4)

# %%
sweep = [table1[f"parallel_{k}"] for k in SETS]
print(f"{'sets':>4} {'params':>8} {'ours':>13}   paper (CIFAR-100)")
for k, entry in zip(SETS, sweep):
    print(
        f"{k:>4} {entry['parameters']:>8,} {entry['mean']:5.1f} ± {entry['std']:3.1f}%   {PAPER[k][0]}M  {PAPER[k][1]:.2f}%"
    )
rho = spearman(SETS, [entry["mean"] for entry in sweep])
delta, error, verdict = compare(table1["parallel_12"], table1["parallel_1"])
verdicts["C4 12 sets vs 1 set"] = verdict
inversions = [(a, b) for (a, ea), (b, eb) in zip(zip(SETS, sweep), zip(SETS[1:], sweep[1:])) if eb["mean"] > ea["mean"]]
print(
    f"Spearman correlation of sets and mean accuracy: ours {rho:.2f}, paper {spearman(SETS, [PAPER[k][1] for k in SETS]):.2f}"
)
print(f"12 sets - 1 set: {delta:+.1f} ± {error:.1f} points ({verdict}); paper {PAPER[12][1] - PAPER[1][1]:+.1f}")
print("neighbours where fewer sets scored higher:", ", ".join(f"{b} over {a}" for a, b in inversions) or "none")
params = [entry["parameters"] for entry in sweep]
assert all(a > b for a, b in zip(params, params[1:]))  # fewer sets, fewer parameters (exact)

# %% [markdown]
# ### 3c. Euler vs RK4 (C5)
#
# The same parallel preset model (same parameters, same initialisation per seed), trained with one Euler
# step per layer or one RK4 step per layer (four evaluations of $G + F$, so 3-4x the training time).

# %%
euler, rk4 = preset["parallel"], preset["parallel_rk4"]
delta, error, verdict = compare(rk4, euler)
verdicts["C5 RK4 vs Euler"] = verdict


def steps_nfe(group: str, name: str) -> float:
    """Function evaluations of one training step, from the first seed's metrics.csv."""
    path = WORK / group / name / f"seed{SEEDS[0]}" / "metrics.csv"
    with path.open() as f:
        return float(next(csv.DictReader(f))["nfe"])


nfe_ratio = steps_nfe("preset", "parallel_rk4") / steps_nfe("preset", "parallel")
print(
    f"Euler {euler['mean']:.1f} ± {euler['std']:.1f}%, RK4 {rk4['mean']:.1f} ± {rk4['std']:.1f}% ({nfe_ratio:.0f}x the evaluations)"
)
print(f"RK4 - Euler = {delta:+.1f} ± {error:.1f} points: {verdict}; paper {PAPER_RK4 - PAPER[12][1]:+.2f} points")
assert euler["parameters"] == rk4["parameters"] and nfe_ratio == 4

# %% [markdown]
# ## 4. Paper vs ours
#
# One table: the paper's CIFAR-100 numbers next to ours on digits (mean ± std over seeds 0-2). The absolute
# accuracies are not comparable (10 easy classes vs 100 hard ones, 10-30 epochs on CPU); the orderings are
# what we compare.

# %%
lines = [
    ("C3 sequential, 12 layers, 12 sets", f"{PAPER_SEQUENTIAL:.2f}%", "5.5M", table1["sequential_12"]),
    *[
        (
            f"C3/C4 parallel, 12 layers, {k} set{'s' * (k > 1)}",
            f"{PAPER[k][1]:.2f}%",
            f"{PAPER[k][0]}M",
            table1[f"parallel_{k}"],
        )
        for k in SETS
    ],
    ("C3 sequential, preset (4 layers)", f"{PAPER_SEQUENTIAL:.2f}%", "5.5M", preset["sequential"]),
    ("C3/C5 parallel Euler, preset", f"{PAPER[12][1]:.2f}%", "5.5M", preset["parallel"]),
    ("C5 parallel RK4, preset", f"{PAPER_RK4:.2f}%", "5.5M", preset["parallel_rk4"]),
]
print(f"{'model':<38} {'paper':>8} {'params':>7}   {'ours':>13} {'params':>8}")
for label, paper_accuracy, paper_params, entry in lines:
    ours = f"{entry['mean']:.1f} ± {entry['std']:.1f}%"
    print(f"{label:<38} {paper_accuracy:>8} {paper_params:>7}   {ours:>13} {entry['parameters']:>8,}")
print()
for claim, verdict in verdicts.items():
    print(f"{claim:<36} {verdict}")

# %% [markdown]
# What we assert, and what we only report. Asserted in both presets:
#
# * C1 and C2 exactly (§1, §2), and the parameter side of C4: fewer sets, strictly fewer parameters;
# * C5's cost: RK4 takes 4x the evaluations of Euler;
# * C3 and C5 in the form we observe them: the parallel layer is never significantly worse than the
#   sequential one, and RK4 is never significantly better than Euler.
#
# Only in the quick preset (10 epochs): 12 independent layers beat 1 by more than $2s$, and accuracy rises
# with the number of sets (Spearman $\rho \ge 0.6$). Only in the full preset (30 epochs): every model
# reaches 95%.
#
# Reported, not asserted (numbers of the full preset recorded with `NEURALODE_TF_FULL=1`, 2 CPU cores):
#
# * **C3, parallel vs sequential: the paper's direction, not its size.** The parallel layer is ahead in the
#   mean in every configuration we ran, but by at most about $2s$: quick +4.0 ± 2.8 points (4 layers) and
#   +1.3 ± 0.7 (12 layers); full +0.5 ± 0.5 and +0.4 ± 0.2 (97.4 vs 96.9%, 98.1 vs 97.8%). The paper's
#   +4.9 points is not reproduced as a clear gain at this scale.
# * **C4, weight sharing: here a short-budget effect.** After 10 epochs accuracy falls from 96.7% (12 sets)
#   to 92.0% (1 set), with one inversion (4 sets over 6); after 30 epochs every sharing level reaches
#   96.6-98.1% (12 sets 98.1 ± 0.3%, 1 set 98.0 ± 0.4%). Digits does not need the capacity that CIFAR-100
#   does (the paper: 70.92% → 53.33%), so the accuracy side of C4 is not reproduced at convergence.
# * **C5, RK4 vs Euler: not reproduced.** After 12 epochs RK4 is clearly behind (it learns more slowly
#   from the same initialisation), after 30 epochs the two are within noise (97.0 ± 0.4% vs
#   97.4 ± 0.9%). The paper's +1.74 points does not appear at this scale.

# %%
assert verdicts["C5 RK4 vs Euler"] != "agrees with the paper"  # the paper's RK4 gain is not observed here
assert all(verdict != "DISAGREES with the paper" for claim, verdict in verdicts.items() if claim.startswith("C3"))
if FULL:  # trained to convergence, every model learns digits; the sharing levels are within about 1.5 points
    assert min(entry["mean"] for table in results.values() for entry in table.values()) >= 95
else:  # a 10-epoch budget separates the sharing levels
    assert verdicts["C4 12 sets vs 1 set"] == "agrees with the paper" and rho >= 0.6

# %% [markdown]
# ## 5. The paper-size runs (CIFAR-100, GPU)
#
# Table 1 itself needs CIFAR-100 (the python version, `cifar-100-python/`) and a GPU. The `vit_digits`
# preset's model builder takes every `ViT` argument as an override, so the commands below build exactly
# `vit_preset("deit_tiny_cifar100", field=..., num_sets=k, method=...)` (checked below) and train it on
# CIFAR-100 with `data.name=cifar100`. The paper gives no training recipe; the settings are DeiT's
# (Touvron et al. 2021: AdamW, lr 5e-4 per 512 images, weight decay 0.05, 5 warm-up epochs, cosine decay)
# for 300 epochs at batch 256.
#
# What the library does not provide for a faithful rerun: DeiT's data augmentation (RandAugment, Mixup,
# CutMix, random erasing, label smoothing) and resizing CIFAR-100 to 224x224 (which the paper's parameter
# counts point to, §1). Without augmentation, ViTs trained from scratch on CIFAR-100 are expected to stay
# well below the paper's 66-73%, so these commands test the orderings rather than the absolute numbers.

# %%
CIFAR_MODEL = dict(img_size=32, patch_size=4, in_chans=3, dim=192, depth=12, heads=3)
CIFAR_LOOP = dict(epochs=300, batch_size=256, lr=2.5e-4, weight_decay=0.05, warmup_steps=5 * (50_000 // 256))
ROWS = {
    "sequential": {"field": "split"},
    **{f"parallel_{k}": {"field": "parallel", "num_sets": k} for k in SETS},
    "parallel_rk4": {"field": "parallel", "method": "rk4"},
}


def overrides(row: dict) -> list[str]:
    model = {**CIFAR_MODEL, **row}
    return (
        [f"{key}={value}" for key, value in CIFAR_LOOP.items()]
        + ["device=cuda", "data.name=cifar100", "data.root=PATH/TO/cifar-100-python"]
        + [f"model.{key}={value}" for key, value in model.items()]
    )


for name, row in ROWS.items():
    print(f"neuralode-tf train vit_digits --out-dir runs/zhong2022/{name} --set {' '.join(overrides(row))}")

# the overrides build the deit_tiny_cifar100 preset (plus the row's field, sets, method)
for row in ROWS.values():
    built = {**VIT_PRESETS["deit_tiny_digits"], **CIFAR_MODEL, **row, "num_classes": 100}
    assert built == {**VIT_PRESETS["deit_tiny_cifar100"], "field": "split", **row}

# %% [markdown]
# A smoke test of the parallel 12-set command, as the command line would parse it (`apply_overrides`), on a
# fake `cifar-100-python/` folder of 64 random 32x32 images (one training step on CPU, batch 16): the data
# loader, the model and the loop accept the configuration, and the model has the 5,380,132 parameters of
# `vit_preset("deit_tiny_cifar100", field="parallel")`. The library's `ScheduleWarning` about the warm-up is
# expected there, and shown.

# %%
fake = WORK / "fake_cifar" / "cifar-100-python"
fake.mkdir(parents=True)
rng = np.random.default_rng(0)
for split, n in [("train", 48), ("test", 16)]:
    content = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"fine_labels": [i % 100 for i in range(n)]}
    with (fake / split).open("wb") as f:
        pickle.dump(content, f, protocol=2)
values = apply_overrides(asdict(PRESETS["vit_digits"].config), overrides(ROWS["parallel_12"]))  # as the CLI does
config = TrainConfig(**values)
print(f"parsed: epochs={config.epochs}, batch_size={config.batch_size}, lr={config.lr}, model={config.model}")
smoke = replace(
    config,
    device="cpu",
    batch_size=16,
    max_steps=1,
    out_dir=str(WORK / "smoke"),
    progress=False,
    data={**config.data, "root": str(fake.parent)},
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", ScheduleWarning)
    result = train(smoke)
print(f"one step on fake CIFAR-100: {result['parameters']:,} parameters, {result['steps']} step")
# On the fake folder an epoch is 3 steps, so the warm-up meant for CIFAR-100's 50,000 images outlasts the
# 300 epochs, and the library says so; on the real data it fits.
schedule = [str(w.message) for w in caught if issubclass(w.category, ScheduleWarning)]
print("ScheduleWarning:", *schedule)
assert len(schedule) == 1 and "longer than the run" in schedule[0]
assert result["parameters"] == counts["deit_tiny_cifar100", "parallel", 12] == 5_380_132

# %%
# NBVAL_IGNORE_OUTPUT
print(f"training runs took {train_seconds:.0f} s; notebook ran in {time.perf_counter() - T_START:.0f} s")
