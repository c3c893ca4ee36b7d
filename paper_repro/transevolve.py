# %% [markdown]
# # Reproducing TransEvolve (Dutta et al. 2021)
#
# *Redesigning the Transformer Architecture with Insights from Multi-particle Dynamical Systems*
# computes a block's query-key products once and evolves the attention with depth through a
# closed-form depth vector $T^l$ (eqs. 6-9), with random-rotation ("randomFF") or full feed-forward
# layers, in one block of depth 6 or two blocks of depth 3. Each claim below is marked:
#
# * **exact**: reproduced here digit for digit (counts, identities);
# * **approximate**: reproduced to within a stated gap, which is explained;
# * **reduced**: reproduced qualitatively at reduced scale on an offline stand-in;
# * **not here**: needs the paper's data or hardware; the full command is given.
#
# | claim | paper | status here |
# |---|---|---|
# | Table 2: parameters of Transformer-base and the four variants, $d=512$, 6+6 layers | 65M; 27 / 33 / 53 / 59M | **approximate**: 60.5M; 27.5 / 33.8 / 52.6 / 58.9M (no configuration gives all five) |
# | Table 2: BLEU on WMT En-De / En-Fr | fullFF-2 ≈ Transformer, randomFF lower | **reduced**: a sequence-reversal toy task |
# | Table 4: speed over Transformer at 1k-4k tokens | 1.0-1.2x | **reduced**: CPU, one block vs six SDPA blocks (`benchmarks/transevolve.py`) |
# | Table 4: ListOps accuracy | Transformer 36.4, rFF-1 43.2, rFF-2 39.1, fFF-1 42.2, fFF-2 37.8 | **reduced**: our ListOps generator, lengths 16-128 |
# | Table 3: AGnews / IMDb accuracy | 90.5-91.1 / 86.8-87.6 | **not here** (no offline copies) |
#
# Presets: `quick` (default, CI: about 2 minutes on 2 CPU cores) trains one seed for a few epochs;
# `full` (`NEURALODE_TF_FULL=1`) trains three seeds at the preset settings
# (`neuralode-tf compare transevolve_listops --seeds 0 1 2`, `... transevolve_reverse ...`). The
# paper-size runs need WMT/LRA data and a GPU: e.g.
# `neuralode-tf train transevolve_listops --set data.num_train=96000 data.max_length=2000 model.dim=256`.

# %%
import json
import os
import time
from pathlib import Path

FULL = os.environ.get("NEURALODE_TF_FULL", "0") == "1"
SEEDS = (0, 1, 2) if FULL else (0,)
T_START = time.perf_counter()
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "repro_transevolve"
RECORDED = Path("..") / "experiments" / "transevolve"

# %%
# NBVAL_IGNORE_OUTPUT
import torch

import neuralode_tf
from neuralode_tf import ContinuousDepth
from neuralode_tf.models import TRANSEVOLVE_VARIANTS, TransEvolveEncoder, table2_parameter_counts, transformer_field
from neuralode_tf.train import TRANSEVOLVE_LISTOPS_VARIANTS, compare_variants, summarize

torch.set_num_threads(1)
print(f"neuralode_tf {neuralode_tf.__version__}, torch {torch.__version__}, FULL={FULL}")

# %% [markdown]
# ## Table 2: parameter counts (approximate)
#
# $d = 512$, 8 heads, 6 + 6 layers, one 32k vocabulary tied three ways, the official code's shapes
# ($D = d + H t = 1024$). randomFF-1, fullFF-1 and fullFF-2 round to the paper's figures; randomFF-2
# (33.8M) does not, and no vocabulary, embedding tying, bias or LayerNorm fixes it: these add the same
# to every variant, and fullFF-1 exceeds randomFF-2 by 18.86M where 53M and 33M need more than 19M
# (derivation in `table2_parameter_counts`). The paper's 65M for the Transformer is Vaswani et al.'s,
# with a 37k vocabulary: with it, ours is 63.1M (-2.9%).

# %%
counts = table2_parameter_counts()
paper_counts = {"Transformer-base": 65, "randomFF-1": 27, "randomFF-2": 33, "fullFF-1": 53, "fullFF-2": 59}
print(f"{'model':<17} {'ours':>8} {'paper':>6} {'gap':>7}")
for name, count in counts.items():
    gap = 100 * (count / 1e6 - paper_counts[name]) / paper_counts[name]
    print(f"{name:<17} {count / 1e6:>7.2f}M {paper_counts[name]:>5}M {gap:>+6.1f}%")
with_37k = table2_parameter_counts(37000)["Transformer-base"]
print(f"Transformer-base with Vaswani et al.'s 37k vocabulary: {with_37k / 1e6:.2f}M")
assert all(abs(counts[name] / 1e6 - paper_counts[name]) <= 1 for name in TRANSEVOLVE_VARIANTS)
rounded_apart = [name for name in counts if round(counts[name] / 1e6) != paper_counts[name]]
assert rounded_apart == ["Transformer-base", "randomFF-2"]
assert counts["fullFF-1"] - counts["randomFF-2"] < 19e6  # why no single vocabulary rounds both to 53M and 33M
assert (
    counts["randomFF-1"] < counts["randomFF-2"] < counts["fullFF-1"] < counts["fullFF-2"] < counts["Transformer-base"]
)

# %% [markdown]
# ## Table 4: speed (reduced)
#
# The paper times TransEvolve against a Transformer whose attention materialises the $n \times n$
# weights, on TPUs. `benchmarks/transevolve.py` times one depth-6 TransEvolve block (full FF, mode
# `auto`) against six pre-norm SDPA blocks, $d = 256$, 8 heads, forward + backward, on 2 CPU cores,
# and also against the same six blocks with SDPA forced to materialise the weights (the paper's
# baseline). The recorded run:

# %%
bench = json.loads((Path("..") / "benchmarks" / "results" / "transevolve_cpu.json").read_text())
paper_speed = {1024: 1.1, 2048: 1.1, 4096: 1.1}  # fullFF-2 at 1k / 2k / 4k (fullFF-1: 1.2 / 1.2 / 1.1)
print(f"{'n':>5} {'vs materialised (paper baseline)':>34} {'vs fused SDPA':>15} {'paper (fullFF-2)':>18}")
for row in bench["rows"]:
    paper = f"{paper_speed[row['n']]:.1f}x" if row["n"] in paper_speed else "-"
    print(f"{row['n']:>5} {row['speedup_vs_materialised']:>33.2f}x {row['speedup']['auto']:>14.2f}x {paper:>18}")
long = [row for row in bench["rows"] if row["n"] >= 1024]
assert all(row["speedup_vs_materialised"] >= 1.1 for row in long)  # the paper's claim, against its baseline
assert all(row["speedup"]["auto"] >= 1.0 for row in long)  # and never slower than fused SDPA from 1k

# %% [markdown]
# Against the paper's baseline TransEvolve is faster than the paper reports (2-5x from 1k tokens):
# materialising the weights costs more on a CPU than on a TPU. Against fused SDPA, the stronger
# baseline, the margin is the paper's size (1.0-1.2x). A live check at 1k tokens (batch 1, medians
# of 3 forward + backward passes; timings vary from machine to machine):


# %%
# NBVAL_IGNORE_OUTPUT
def median_seconds(model: torch.nn.Module, x: torch.Tensor, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        model(x).square().mean().backward()
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[repeats // 2]


torch.manual_seed(0)
x = torch.randn(1, 1024, 256, requires_grad=True)
standard = ContinuousDepth(transformer_field(256, 6, 8), t1=6, method="lie_trotter")
transevolve = TransEvolveEncoder(256, 8, num_blocks=1, layers_per_block=6, feed_forward="full", mode="auto")
live = median_seconds(standard, x) / median_seconds(transevolve, x)
print(f"n = 1024: TransEvolve auto is {live:.2f}x the speed of six SDPA blocks on this machine")

# %% [markdown]
# ## Table 4: ListOps (reduced)
#
# The paper trains on LRA ListOps (500-2000 tokens). Our generator draws expressions of 16-128 tokens
# (10 classes); the recorded comparison trained the five models for 20 epochs on 2,000 expressions,
# seeds 0-2 (`experiments/transevolve/README.md`).

# %%
recorded = summarize(json.loads((RECORDED / "transevolve_listops.json").read_text()))
paper_listops = {"transformer": 36.4, "randomFF-1": 43.2, "randomFF-2": 39.1, "fullFF-1": 42.2, "fullFF-2": 37.8}
print(f"{'model':<12} {'ours (3 seeds)':>16} {'paper':>7}")
ours = {}
for row in recorded:
    ours[row["variant"]] = row["mean"]
    print(f"{row['variant']:<12} {row['mean']:>8.1f} ± {row['std']:.1f} {paper_listops[row['variant']]:>7.1f}")
assert max(ours, key=ours.get) == max(paper_listops, key=paper_listops.get) == "randomFF-1"  # best model
assert ours["randomFF-1"] > ours["randomFF-2"] and ours["fullFF-1"] > ours["fullFF-2"]  # 1 block of 6 > 2 of 3
print(
    "disagrees with the paper: fullFF-2 is below the Transformer here "
    f"({ours['fullFF-2']:.1f} vs {ours['transformer']:.1f}), above it in the paper"
)

# %% [markdown]
# With `NEURALODE_TF_FULL=1` the comparison is rerun here (five models, three seeds, about 17 minutes
# per seed on 2 cores); the quick preset relies on the recorded rows above, since a few epochs on a
# few hundred expressions leave every model near the majority class.

# %%
if FULL:
    rows = compare_variants(
        "transevolve_listops", TRANSEVOLVE_LISTOPS_VARIANTS, SEEDS, WORK / "listops", progress=False
    )
    rerun = {row["variant"]: row["mean"] for row in summarize(rows)}
    print({name: round(value, 1) for name, value in rerun.items()})
    assert max(rerun, key=rerun.get) in ("randomFF-1", "fullFF-1")

# %% [markdown]
# ## Table 2: translation (reduced)
#
# The paper's finding: randomFF variants translate worse than fullFF ones, and fullFF-2 is on par
# with the Transformer. Our stand-in is `transevolve_reverse`: encoder-decoders (d = 64, 4 heads)
# reversing sequences of symbols, scored by token accuracy on held-out sequences.

# %%
reverse_settings = dict(epochs=20 if FULL else 6)
rows = compare_variants(
    "transevolve_reverse", TRANSEVOLVE_LISTOPS_VARIANTS, SEEDS, WORK / "reverse", progress=False, **reverse_settings
)
translation = {row["variant"]: row for row in summarize(rows)}
paper_bleu = {"transformer": 27.3, "randomFF-1": 23.1, "randomFF-2": 23.8, "fullFF-1": 25.8, "fullFF-2": 27.2}
print(f"{'model':<12} {'token accuracy':>15} {'parameters':>11} {'paper BLEU (WMT14 En-De)':>26}")
for name, row in translation.items():
    print(f"{name:<12} {row['mean']:>14.1f}% {row['parameters']:>11,} {paper_bleu[name]:>26.1f}")
best_random = max(translation[v]["mean"] for v in ("randomFF-1", "randomFF-2"))
best_full = max(translation[v]["mean"] for v in ("fullFF-1", "fullFF-2"))
print(f"best fullFF {best_full:.1f}% vs best randomFF {best_random:.1f}%")
assert best_full > best_random  # the paper's ordering: full feed-forward layers translate better
gap = translation["transformer"]["mean"] - translation["fullFF-2"]["mean"]
print(f"disagrees with the paper: fullFF-2 is {gap:.1f} points below the Transformer here, on par in the paper")

# %%
# NBVAL_IGNORE_OUTPUT
print(f"notebook ran in {time.perf_counter() - T_START:.0f} s")
