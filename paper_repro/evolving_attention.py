# %% [markdown]
# # Reproducing Evolving Attention (Wang et al. 2021)
#
# *Evolving Attention with Residual Convolutions* carries each block's attention logits to the next
# block, mixing them with the new scores ($\alpha$) and refining the mix with a 3x3 convolution over
# the logit map ($\beta$), eq. 4. Its ablations remove the convolution ($\beta = 0$) or the skip
# ($\alpha = 0$), or change the kernel to 1x1 or 5x5 (Tables 2, 4, 6); Table 5 reports "a few extra
# parameters". Each claim below is marked:
#
# * **exact**: reproduced here digit for digit;
# * **reduced**: reproduced qualitatively at reduced scale on an offline stand-in;
# * **not here**: needs the paper's data or hardware; the full command is given.
#
# | claim | paper | status here |
# |---|---|---|
# | Table 5: parameters of Transformer-Lite / -Base and their EA versions | 2.48M → 2.49M; 44.14M → 44.15M | **exact** (EA convolutions in all three attentions, §4.3) |
# | Table 5: FLOPs on a 30 + 30-token pair | 158.31M → 163.46M; 2.68G → 2.70G | **exact** for vanilla Base (2.68G); vanilla Lite 157.82M, 0.31% under (HAT's profiler also counts norms and element-wise products); EA: **disagrees** (191.17M, 2.84G; the discrete network 176.49M, 2.69G) |
# | Table 2: ImageNet ablations (AA-ResNet-34) | EA +0.9; w/o conv, w/o skip ≈ vanilla; 1x1 < 5x5 < 3x3 (top-1) | **reduced**: ViT on digits (5x5 best here: disagrees) |
# | Table 4: GLUE ablations (BERT-Base, CoLA) | EA +3.2; w/o conv −6.3, w/o skip −5.5 vs vanilla | **reduced**: text classifier on tweets |
# | Table 6: translation ablations (IWSLT'14 De-En) | EA +0.6 BLEU; 1x1 below vanilla | **not here** (no offline parallel corpus) |
# | Fig. 4 / §5.1: EA attention maps are sharper | qualitative | **reduced**: mean row entropy (tutorial 05) |
#
# Presets: `quick` (default, CI: about 2 minutes on 2 CPU cores) reads the recorded 3-seed ablation
# tables and reruns a reduced ablation on digits (one seed, few epochs); `full`
# (`NEURALODE_TF_FULL=1`) reruns all six models with three seeds on digits
# (`neuralode-tf compare ea_digits_vit --seeds 0 1 2`; tweets: `... ea_tweets_text ...`).

# %%
import json
import os
import time
from pathlib import Path

FULL = os.environ.get("NEURALODE_TF_FULL", "0") == "1"
T_START = time.perf_counter()
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "repro_evolving"
RECORDED = Path("..") / "experiments" / "evolving_attention"

# %%
# NBVAL_IGNORE_OUTPUT
import torch

import neuralode_tf
from neuralode_tf.models import evolving_table5_costs
from neuralode_tf.train import EA_VARIANTS, compare_variants, summarize

torch.set_num_threads(1)
print(f"neuralode_tf {neuralode_tf.__version__}, torch {torch.__version__}, FULL={FULL}")

# %% [markdown]
# ## Table 5: extra parameters and FLOPs (exact)
#
# Parameters without embeddings and the output softmax; FLOPs of one 30-token source and target pair,
# matrix products, attention and convolutions counted by `neuralode_tf.flops.seq2seq_flops` from explicit
# formulas (2 per multiply-add, the same on every torch build), the
# output projection left out. The EA models are the paper's (§4.3): 3x3 convolutions over the 8 heads'
# maps in the encoder self-attention, the decoder self-attention and the encoder-decoder attention,
# β = 0.1; skip connections in the encoder only, α = 0.1 (Lite) or 0.5 (Base), α = 0 in the decoder.


# %%
paper = {"Lite": (2.48e6, 2.49e6, 158.31e6, 163.46e6), "Base": (44.14e6, 44.15e6, 2.68e9, 2.70e9)}
table5 = evolving_table5_costs()
print(f"{'model':<5} {'params: ours':>24} {'paper':>16} {'FLOPs: ours':>24} {'paper':>18}")
for name, (p0, p1, f0, f1) in table5.items():
    q0, q1, g0, g1 = paper[name]
    print(
        f"{name:<5} {p0 / 1e6:>9.3f}M -> {p1 / 1e6:.3f}M {q0 / 1e6:>6.2f}M -> {q1 / 1e6:.2f}M"
        f" {f0 / 1e6:>9.1f}M -> {f1 / 1e6:.1f}M {g0 / 1e6:>7.1f}M -> {g1 / 1e6:.1f}M"
    )
    print(
        f"      EA adds {p1 - p0:,} parameters and {100 * (f1 / f0 - 1):.1f}% FLOPs (paper: +{100 * (g1 / g0 - 1):.1f}%)"
    )
    assert p1 - p0 == 18 * (8 * 8 * 9 + 8)  # 18 convolutions (3 attentions x 6 layers), 8 -> 8 channels, 3x3
    assert (round(p0 / 1e6, 2), round(p1 / 1e6, 2)) == (q0 / 1e6, q1 / 1e6)  # the paper's counts, as it prints them
assert round(table5["Base"][2] / 1e9, 2) == 2.68  # the paper's 2.68G, at its printed precision
assert round(100 * (158.31e6 - table5["Lite"][2]) / 158.31e6, 2) == 0.31  # Lite: 0.31% under 158.31M
convolutions = 18 * 2 * 8 * 30 * 30 * 8 * 9  # on the 30 x 30 maps
discrete = {name: f0 + convolutions for name, (_, _, f0, _) in table5.items()}  # without the initial maps A^0
print(
    f"disagrees: EA FLOPs {table5['Lite'][3] / 1e6:.2f}M and {table5['Base'][3] / 1e9:.2f}G, against the paper's "
    f"163.46M and 2.70G. The discrete network's are {discrete['Lite'] / 1e6:.2f}M and {discrete['Base'] / 1e9:.2f}G: "
    f"its convolutions add {100 * convolutions / table5['Lite'][2]:.1f}% to Lite (paper +3.3%) and "
    f"{100 * convolutions / table5['Base'][2]:.1f}% to Base (paper +0.7%); the ODE form also computes the initial "
    "logit maps of the first layers' evolving branches once more"
)

# %% [markdown]
# ## Ablations (reduced): recorded, 3 seeds
#
# `ea_digits_vit` is the digits ViT (16 patches, d = 48, 4 heads, 4 blocks) with the paper's image
# setting α = 0.5, β = 1; `ea_tweets_text` the tweets classifier (d = 64, 4 blocks) with α = β = 0.4.
# Test accuracy, mean ± std over seeds 0-2 (`experiments/evolving_attention/README.md`), next to the
# paper's ImageNet top-1 (Table 2) and CoLA (Table 4) columns.

# %%
paper_ablations = {  # (ImageNet top-1, CoLA Matthews corr.)
    "vanilla": (74.33, 58.4),
    "ea": (75.23, 61.6),
    "no_convolution": (74.34, 52.1),
    "no_skip": (74.29, 52.9),
    "kernel_1x1": (74.99, 57.5),
    "kernel_5x5": (75.12, 59.2),
}
recorded = {
    preset: {row["variant"]: row for row in summarize(json.loads((RECORDED / f"{preset}.json").read_text()))}
    for preset in EA_VARIANTS
}
print(f"{'variant':<15} {'digits (ours)':>14} {'ImageNet (paper)':>17} {'tweets (ours)':>14} {'CoLA (paper)':>13}")
for variant, (imagenet, cola) in paper_ablations.items():
    digits, tweets = recorded["ea_digits_vit"][variant], recorded["ea_tweets_text"][variant]
    print(
        f"{variant:<15} {digits['mean']:>7.1f} ± {digits['std']:.1f} {imagenet:>17.2f}"
        f" {tweets['mean']:>7.1f} ± {tweets['std']:.1f} {cola:>13.1f}"
    )
assert all(row["runs"] == 3 and row["non_finite"] == 0 for table in recorded.values() for row in table.values())
digits = {variant: row["mean"] for variant, row in recorded["ea_digits_vit"].items()}
tweets = {variant: row["mean"] for variant, row in recorded["ea_tweets_text"].items()}
# Digits follow the paper's ordering except for 5x5: EA above vanilla; no convolution, no skip and 1x1 below EA.
assert digits["ea"] > digits["vanilla"]
assert all(digits[v] < digits["ea"] for v in ("no_convolution", "no_skip", "kernel_1x1"))
assert min(digits, key=digits.get) == "no_convolution"  # as CoLA (Table 4); ImageNet has w/o skip 0.05 lower
assert digits["kernel_5x5"] > digits["ea"]
print(
    f"disagrees with the paper: 5x5 kernels are best on digits ({digits['kernel_5x5']:.1f}% against 3x3's "
    f"{digits['ea']:.1f}%); the paper has 3x3 above 5x5 (ImageNet top-1 75.23 vs 75.12, CoLA 61.6 vs 59.2)"
)
spread = recorded["ea_digits_vit"]["ea"]["std"]
print(f"digits: EA - vanilla = {digits['ea'] - digits['vanilla']:+.1f} points, within one std ({spread:.1f})")
print(
    f"disagrees with the paper: on tweets vanilla attention is best ({tweets['vanilla']:.1f}%), every EA "
    f"variant {min(tweets.values()):.1f}-{max(v for k, v in tweets.items() if k != 'vanilla'):.1f}%"
)
assert max(tweets, key=tweets.get) == "vanilla"

# %% [markdown]
# ## Ablations (reduced): a live run
#
# The six digits models, retrained here at the quick size (one seed, 10 epochs; `full`: three seeds,
# 30 epochs).

# %%
settings = dict(epochs=30 if FULL else 10)
rows = compare_variants(
    "ea_digits_vit", EA_VARIANTS["ea_digits_vit"], (0, 1, 2) if FULL else (0,), WORK, progress=False, **settings
)
live = {row["variant"]: row for row in summarize(rows)}
for variant, row in live.items():
    print(f"{variant:<15} {row['mean']:>6.1f}%  ({row['parameters']:,} parameters)")
extra = live["ea"]["parameters"] - live["vanilla"]["parameters"]
print(f"EA adds {extra} parameters to the {live['vanilla']['parameters']:,} of the vanilla ViT")
assert extra == 4 * (4 * 4 * 9 + 4)  # 4 blocks, 4 heads, 3x3
assert all(row["non_finite"] == 0 and row["mean"] > 70 for row in live.values())

# %%
# NBVAL_IGNORE_OUTPUT
print(f"notebook ran in {time.perf_counter() - T_START:.0f} s")
