# %% [markdown]
# # 03 · OT-Transformer: one field for the whole stack, and a transport cost that straightens it
#
# Kan et al. (2025) read a whole transformer as **one** autonomous vector field,
# $\dot x = f(x) = B_D \circ \dots \circ B_1(x)$ on $[0, T]$, and add to the loss the transport cost
# $\frac{\lambda}{2dn}\int_0^T \|f(x(t))\|_F^2\,dt$ (their eq. 8): the kinetic energy of the tokens'
# motion. Among all flows that reach the same end point, the one with least kinetic energy moves in
# straight lines at constant speed, so the cost asks for simple, straight token trajectories.
#
# This tutorial:
#
# 1. builds the OT-Transformer on 8x8 digits with `neuralode_tf.models.ViT(field="composed",
#    transport_cost=λ)` and checks that the energy the library integrates is the Euler sum;
# 2. trains it with and without the transport cost through the library's training loop (the preset
#    `ot_mnist_digits`: one attention-only block with one head, 20 Euler steps on $[0, 1]$);
# 3. plots token trajectories (PCA) and the kinetic energy along depth-time, with and without the
#    blocks' inner residuals, and measures how straight the paths are;
# 4. plots the test accuracy against λ, and a step-count sweep: the trained models evaluated with
#    1 to 20 Euler steps (Kan et al., Table 5).
#
# Runtime: about 90 s on 2 CPU cores. `NEURALODE_TF_FULL=1` trains 3x longer over more values of λ
# (about 5 min).

# %%
# NBVAL_IGNORE_OUTPUT
import json
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from neuralode_tf import solve
from neuralode_tf.models import ViT
from neuralode_tf.notebook import setup
from neuralode_tf.train import OT_VARIANTS, TrainConfig, build_setup, step_sweep, train

NB = setup(versions=("matplotlib",), work="tutorial03")

# %% [markdown]
# ## 1. The model and its augmented state
#
# `field="composed"` makes the encoder one `ContinuousDepth` of a
# `ComposedField` (the blocks composed, each with its own skips as in the released code), and
# `transport_cost=λ` wraps that field in `KineticEnergy`: the state becomes $(x, e)$ with
# $\dot e = \|f(x)\|^2/(nd)$ per sample. The encoder starts from $e = 0$, returns $x(T)$ and keeps
# $\frac{\lambda}{2}\,\mathrm{mean}_b\, e_b(T)$ as its `regularization`, which the training loop adds
# to the loss. With Euler steps $h$, $e(T) = \sum_m h \|f(x_m)\|^2/(nd)$: the sum the released code
# accumulates.

# %%
torch.manual_seed(0)
model = ViT(8, 2, 1, 10, dim=32, depth=1, num_heads=1, attention_only=True, field="composed", steps=20, transport_cost=0.5)
images = torch.rand(4, 1, 8, 8)
logits = model(images)
encoder = model.encoder
print(encoder)

x0 = model.patch_embed(images).flatten(2).transpose(1, 2)
x0 = torch.cat([model.cls_token.expand(4, -1, -1), x0], dim=1) + model.pos_embed
field = encoder.field.field  # the ComposedField inside KineticEnergy
h, x, energy = 1 / 20, x0, torch.zeros(4)
with torch.no_grad():
    for _ in range(20):
        velocity = field(torch.tensor(0.0), x)
        energy = energy + h * velocity.pow(2).flatten(1).mean(1)
        x = x + h * velocity
gap = abs(encoder.regularization.item() - 0.5 / 2 * energy.mean().item())
print(f"transport cost {encoder.regularization.item():.4f}, hand-written Euler sum: gap {gap:.1e}")
assert gap <= 1e-6

# %% [markdown]
# ## 2. Training with and without the transport cost
#
# The preset `ot_mnist_digits` is Kan et al.'s MNIST model on the offline digits: $d = k = 64$, one
# block, one head, attention only, 20 Euler steps, $T = 1$, $\lambda = 0.01$. `OT_VARIANTS` holds the
# three models of their Table 2 as model overrides; here we train the OT-Transformer without the cost
# and with costs up to $\lambda = 10$, without gradient clipping (as Sinkformers' code, whose settings
# Kan et al. keep).

# %%
EPOCHS = 30 if NB.full else 10
LAMBDAS = [0.0, 0.01, 0.1, 1.0, 10.0] if NB.full else [0.0, 0.1, 1.0, 10.0]


def run(weight: float, inner_residuals: bool = True, seed: int = 0) -> tuple[dict, str]:
    overrides = dict(OT_VARIANTS["ot_mnist_digits"]["ot"], transport_cost=weight, inner_residuals=inner_residuals)
    config = TrainConfig(
        preset="ot_mnist_digits",
        epochs=EPOCHS,
        batch_size=64,
        lr=2e-3,
        weight_decay=0.05,
        warmup_steps=50,
        grad_clip=0.0,
        seed=seed,
        out_dir=f"{NB.work}/lambda{weight}_inner{inner_residuals}",
        progress=False,
        model=overrides,
    )
    return train(config), config.out_dir


results = {weight: run(weight) for weight in LAMBDAS}
for weight, (result, _) in results.items():
    print(f"λ = {weight:<5}: test accuracy {100 * result['test_accuracy']:.1f}%  ({result['parameters']:,} parameters)")
# Every model with λ ≤ 1 learns the 10 digit classes: at least 75% after 10 epochs (seed 0).
assert all(result["test_accuracy"] >= 0.75 for weight, (result, _) in results.items() if weight <= 1.0)

# %% [markdown]
# ## 3. Token trajectories and kinetic energy, in both conventions
#
# The released code keeps each block's skips inside the field (`inner_residuals=True`, the default
# above), so for this one attention-only block $f(x) = x + G(x)$. Without them
# (`inner_residuals=False`) $f(x) = G(x)$: the setting in which the paper's "one Euler step is the
# discrete transformer" holds (the OT and N-ODE Transformers coincide in the first convention: eq. 12
# keeps the skip of a block without fully-connected layer). We train that
# convention too, with and without the cost, and for each model integrate the field on the 20-step
# grid for 64 test images. We look at (a) the 17 token trajectories of one image projected on their
# first two principal components, (b) the kinetic energy rate $\|f(x(t))\|^2/(nd)$ along $t$, and
# (c) the straightness of each token's path: its length divided by its end-to-end displacement
# (1 for a straight line), averaged over tokens and images.

# %%
without_skips = {weight: run(weight, inner_residuals=False) for weight in (0.0, 1.0)}
for weight, (result, _) in without_skips.items():
    print(f"inner_residuals=False, λ = {weight}: test accuracy {100 * result['test_accuracy']:.1f}%")


def trajectories(out_dir: str, count: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    config = TrainConfig(**json.loads(Path(out_dir, "config.json").read_text()))
    built = build_setup(config)
    built.model.load_state_dict(torch.load(f"{out_dir}/checkpoint.pt", weights_only=True)["model"])
    vit = built.model.eval()
    with torch.no_grad():
        x = vit.patch_embed(built.data.test.x[:count]).flatten(2).transpose(1, 2)
        x = torch.cat([vit.cls_token.expand(count, -1, -1), x], dim=1) + vit.pos_embed
        composed = vit.encoder.field.field  # the ComposedField inside KineticEnergy (every run here has one)
        path = solve(composed, x, torch.linspace(0, 1, 21).tolist(), method="euler", steps=20).ys
        rates = torch.stack([composed(torch.tensor(0.0), xt).pow(2).flatten(1).mean(1) for xt in path[:-1]])
    return path, rates


def straightness(path: torch.Tensor) -> float:
    length = (path[1:] - path[:-1]).norm(dim=-1).sum(0)
    return (length / (path[-1] - path[0]).norm(dim=-1)).mean().item()


MODELS = [(0.0, True), (1.0, True), (0.0, False), (1.0, False)]
paths, rates = {}, {}
for key in MODELS:
    weight, inner = key
    out_dir = (results if inner else without_skips)[weight][1]
    paths[key], rates[key] = trajectories(out_dir)
    print(
        f"inner_residuals={key[1]!s:<5}, λ = {key[0]}: path length / displacement {straightness(paths[key]):.3f}, "
        f"kinetic energy ∫||f||²/(nd) {rates[key].mean().item():.3g}"
    )

fig, axes = plt.subplots(1, 5, figsize=(21, 3.8))
for ax, key in zip(axes[:4], MODELS):
    tokens_ = paths[key][:, 0]  # (time, tokens, d) of the first test image
    flat = tokens_.reshape(-1, tokens_.shape[-1])
    _, _, v = torch.pca_lowrank(flat, q=2, center=True)
    projected = ((tokens_ - flat.mean(0)) @ v).numpy()
    for j in range(projected.shape[1]):
        ax.plot(projected[:, j, 0], projected[:, j, 1], "-", lw=1, color="C0" if j else "C3")
        ax.plot(projected[-1, j, 0], projected[-1, j, 1], "o", ms=3, color="C0" if j else "C3")
    ax.set_title(f"inner residuals {key[1]}, λ = {key[0]}", fontsize=10)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
t = np.linspace(0, 1, 21)[:-1]
for key in MODELS:
    axes[4].plot(t, rates[key].mean(1).numpy(), "o-", ms=3, label=f"inner {key[1]}, λ = {key[0]}")
axes[4].set_xlabel("depth-time t")
axes[4].set_ylabel("||f(x(t))||² / (nd)")
axes[4].set_yscale("log")
axes[4].set_title("kinetic energy rate along depth")
axes[4].legend(fontsize=8)
fig.suptitle("token trajectories of one test image (PCA; red: class token) and kinetic energy")
fig.tight_layout()
plt.show()

# %% [markdown]
# What the numbers say (and the cell below checks):
#
# * In both conventions the cost lowers the kinetic energy the flow spends.
# * Without inner residuals it also **straightens** the token paths, as the paper intends: the
#   minimum-energy flow between two configurations moves in straight lines.
# * With the released code's inner residuals the velocity is $x + G(x)$, dominated by the identity;
#   the cost shrinks it (mostly by making $G(x)$ cancel part of $x$) but, in this run, does not make
#   the paths straighter: their straightness is printed above, not claimed.

# %%
energy = {key: rates[key].mean().item() for key in MODELS}
ratio = {key: straightness(paths[key]) for key in MODELS}
for inner in (True, False):
    print(f"inner_residuals={inner}: energy ratio λ=1 / λ=0 {energy[(1.0, inner)] / energy[(0.0, inner)]:.3g}")
assert energy[(1.0, True)] < 0.5 * energy[(0.0, True)] and energy[(1.0, False)] < 0.5 * energy[(0.0, False)]
assert ratio[(1.0, False)] < ratio[(0.0, False)]

# %% [markdown]
# ## 4. Accuracy against λ, and the step-count sweep
#
# Kan et al. (Table 5) evaluate a model trained with 20 Euler steps with fewer steps. `step_sweep`
# rebuilds a run from its folder and evaluates it with 1, 2, 4, 8, 16 and 20 Euler steps.

# %%
STEPS = (1, 2, 4, 8, 16, 20)
sweeps = {weight: step_sweep(results[weight][1], STEPS) for weight in LAMBDAS}  # inner residuals, as released
print("test accuracy (%) by inference steps")
print("λ       " + "".join(f"{k:>7}" for k in STEPS))
for weight, sweep in sweeps.items():
    print(f"{weight:<8}" + "".join(f"{100 * sweep[k]:7.1f}" for k in STEPS))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
axes[0].plot(range(len(LAMBDAS)), [100 * results[w][0]["test_accuracy"] for w in LAMBDAS], "o-")
axes[0].set_xticks(range(len(LAMBDAS)), [str(w) for w in LAMBDAS])
axes[0].set_xlabel("λ")
axes[0].set_ylabel("test accuracy (%)")
axes[0].set_title("accuracy against the transport-cost weight")
for weight, sweep in sweeps.items():
    axes[1].plot(STEPS, [100 * sweep[k] for k in STEPS], "o-", label=f"λ = {weight}")
axes[1].set_xscale("log", base=2)
axes[1].set_xlabel("Euler steps at inference")
axes[1].set_ylabel("test accuracy (%)")
axes[1].set_title("step-count sweep (trained with 20)")
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# A straighter flow should be integrated accurately by fewer Euler steps, so one might expect the
# regularised models to lose less accuracy than the unregularised one when evaluated with fewer steps
# than they were trained with. One seed cannot decide that: a qualitative comparison needs at least three
# seeds and the two-standard-error rule (`paper_repro/ot_transformer` judges Table 5 that way over the
# recorded 3-seed runs, and finds it inconclusive on digits). The points lost are printed here, not claimed.

# %%
drop = {weight: 100 * (sweeps[weight][20] - sweeps[weight][4]) for weight in LAMBDAS}
print("accuracy lost going from 20 to 4 steps (points): " + ", ".join(f"λ={w}: {d:.1f}" for w, d in drop.items()))

# %%
# NBVAL_IGNORE_OUTPUT
print(f"tutorial ran in {time.perf_counter() - NB.start:.0f} s")
