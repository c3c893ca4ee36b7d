# %% [markdown]
# # Reproducing TransEvolve (Dutta et al. 2021)
#
# *Redesigning the Transformer Architecture with Insights from Multi-particle Dynamical Systems*
# computes a block's query-key products once and evolves the attention with depth through a
# closed-form depth vector $T^l$ (eqs. 6-9), with random-rotation ("randomFF") or full feed-forward
# layers, in one block of depth 6 or two blocks of depth 3.
#
# Every claim of the paper's tables and figure is an entry of the ledger
# [`claims/transevolve.toml`](claims/transevolve.toml), with its class and a verdict computed by one rule
# (`claims/_rule.py`):
#
# * **exact**: the same number at the paper's printed precision (parameter counts, identities), recomputed
#   from the library;
# * **qualitative**: "a beats b" at reduced scale, judged by the two-standard-error rule over at least 3
#   seeds (or timed rounds): agrees, disagrees or inconclusive (within noise). The stand-ins: our ListOps
#   generator (16-128 tokens) for LRA ListOps, sequence reversal for WMT translation, and 2 CPU cores for
#   the paper's TPUs;
# * **not here**: needs the paper's data or hardware; the command is given.
#
# This notebook shows the evidence behind the entries, reruns part of each recording live and checks it
# against the recording, and ends with the ledger recomputed.
#
# Presets: `quick` (default, CI: about 2 minutes on 2 CPU cores) reruns the first epoch of seed 0 of one
# ListOps model, one reversal run and one speed comparison. `full` (`NEURALODE_TF_FULL=1`) reruns the
# ListOps and reversal comparisons, three seeds each (about an hour on 2 cores), and judges the ledger
# on them.

# %%
# NBVAL_IGNORE_OUTPUT
import json
import statistics
import time
from pathlib import Path

import claims
import matplotlib.pyplot as plt
import torch
from claims import _transevolve as te_claims
from claims._transevolve_counts import table2_parameter_counts
from torch.nn.attention import SDPBackend, sdpa_kernel

from neuralode_tf import ContinuousDepth
from neuralode_tf.models import TRANSEVOLVE_VARIANTS, TransEvolveEncoder, transformer_field
from neuralode_tf.notebook import setup
from neuralode_tf.train import PRESETS, TRANSEVOLVE_LISTOPS_VARIANTS, compare_variants, summarize

NB = setup(work="repro_transevolve", experiment="transevolve")
LEDGER = claims.load("transevolve")
ENTRIES = {entry.id: entry for entry in LEDGER.claims}
print(f"ledger: {len(LEDGER.claims)} claims")

# %% [markdown]
# ## Figure 1, §4 and §6: the identities (exact)
#
# A TransEvolve block is a Lie-Trotter Euler step of its ODE; the decoder block is eq. 13; and the
# library's fast attention paths (attention from $A^0$'s exponentials, reweighted per depth) give eq. 9
# with every term of eq. 6 as written (the `fidelity` path), in outputs and gradients. Each is checked in
# float64 on a small instance by the ledger's compute function.

# %%
for name in ("fig1-block-is-euler-lie-trotter", "s6-decoder-block-is-eq13", "s4-fast-paths-are-eq9"):
    entry = ENTRIES[name]
    ours = getattr(te_claims, entry.compute)()
    print(f"{entry.where:<22} {entry.paper:<32} ours: {ours}")
    assert ours == entry.paper

# %% [markdown]
# ## Table 2: parameter counts (exact where they match)
#
# $d = 512$, 8 heads, 6 + 6 layers, one 32k vocabulary tied three ways, the official code's shapes
# ($D = d + H t = 1024$). randomFF-1, fullFF-1 and fullFF-2 round to the paper's figures; randomFF-2
# (33.8M) does not, and no vocabulary, embedding tying, bias or LayerNorm fixes it: these add the same
# to every variant, and fullFF-1 exceeds randomFF-2 by 18.86M where 53M and 33M need more than 19M. The
# paper's 65M for the Transformer is Vaswani et al.'s, with a 37k vocabulary.

# %%
table2 = [e for e in LEDGER.claims if e.id.startswith("t2-parameters")]
print(f"{'entry':<32} {'paper':>6} {'ours':>6}  verdict")
for entry in table2:
    ours = getattr(te_claims, entry.compute)()
    verdict = claims.exact_verdict(entry.paper, ours)
    print(f"{entry.id:<32} {entry.paper:>6} {ours:>6}  {verdict}")
    assert (ours, verdict) == (entry.ours, entry.verdict)
counts = table2_parameter_counts()
assert counts["fullFF-1"] - counts["randomFF-2"] < 19e6  # why no single vocabulary rounds both to 53M and 33M

# %% [markdown]
# ## Table 4: speed
#
# The paper times TransEvolve against a Transformer whose attention materialises the $n \times n$
# weights, on TPUs (1.0-1.3x at 1k-4k tokens). `benchmarks/transevolve.py` times each variant (six
# layers, $d = 256$, 8 heads, forward + backward) with the paper's literal attention path (`fidelity`)
# and ours (`auto`), against six SDPA blocks forced onto the math backend (`materialised`, the paper's
# baseline) and with SDPA's fused kernels (`standard`), on 2 CPU cores, 5 rounds per length. The
# ledger's timing claims compare with the paper's baseline only: each "faster than" claim, and each
# 1.0x cell as "no faster" or "no slower" (parity, which the rule can refute but never confirm), is
# judged on the per-round times by the two-standard-error rule and counted apart from accuracy claims.

# %%
bench = json.loads((Path("..") / "benchmarks" / "results" / "transevolve_cpu.json").read_text())
rows = {row["n"]: row for row in bench["rows"]}
print(f"recorded {bench['date']}: `{bench['command']}`, {bench['setup']['threads']} threads")
competitors = [f"{v} {m}" for v in TRANSEVOLVE_VARIANTS for m in ("fidelity", "auto")]
print(f"{'speed-up over materialised':<28}" + "".join(f"{n:>8}" for n in rows))
for name in competitors:
    print(f"{name:<28}" + "".join(f"{row['seconds']['materialised'] / row['seconds'][name]:>7.2f}x" for row in rows.values()))
print(f"{'speed-up over fused SDPA':<28}" + "".join(f"{n:>8}" for n in rows))
for name in ("fullFF-1 auto", "fullFF-2 auto"):
    print(f"{name:<28}" + "".join(f"{row['seconds']['standard'] / row['seconds'][name]:>7.2f}x" for row in rows.values()))

PAPER_SPEED = {  # Table 4, TPUs, against materialised attention on char-level IMDb
    "randomFF-1": {1024: 1.2, 2048: 1.3, 3072: 1.2, 4096: 1.2},
    "randomFF-2": {1024: 1.1, 2048: 1.2, 3072: 1.2, 4096: 1.1},
    "fullFF-1": {1024: 1.2, 2048: 1.2, 3072: 1.2, 4096: 1.1},
    "fullFF-2": {1024: 1.1, 2048: 1.1, 3072: 1.0, 4096: 1.1},
}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
lengths = list(rows)
for ax, baseline in zip(axes, ("materialised", "standard")):
    for name in competitors:
        ratios = [rows[n]["seconds"][baseline] / rows[n]["seconds"][name] for n in lengths]
        ax.plot(lengths, ratios, "-o" if name.endswith("auto") else ":x", label=name, markersize=4)
    if baseline == "materialised":
        for variant, paper in PAPER_SPEED.items():
            ax.plot(list(paper), list(paper.values()), "s", markerfacecolor="none", label=f"paper (TPU): {variant}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel(f"time({baseline}) / time(TransEvolve)")
    ax.set_title(f"against {'materialised attention (the paper' + chr(39) + 's baseline)' if baseline == 'materialised' else 'fused SDPA'}")
axes[0].legend(fontsize=7, ncol=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# A live check of the recording at 1k tokens: fullFF-2 with our path against the materialised stack,
# 3 rounds (medians). Timings vary between machines; the ratio must be within a factor 1.5 of the
# recorded one.


# %%
def step(model: torch.nn.Module, x: torch.Tensor, materialised: bool = False) -> float:
    start = time.perf_counter()
    if materialised:
        with sdpa_kernel(SDPBackend.MATH):
            model(x).square().mean().backward()
    else:
        model(x).square().mean().backward()
    return time.perf_counter() - start


torch.manual_seed(0)
x = torch.randn(rows[1024]["batch"], 1024, 256, requires_grad=True)
stack = ContinuousDepth(transformer_field(256, 6, 8), t1=6, method="lie_trotter")
fullff2 = TransEvolveEncoder(256, 8, mode="auto", **TRANSEVOLVE_VARIANTS["fullFF-2"])
torch.set_num_threads(bench["setup"]["threads"])  # as the benchmark
times = {"materialised": [], "fullFF-2 auto": []}
for round_ in range(4):  # the first round warms up
    for name, model in (("materialised", stack), ("fullFF-2 auto", fullff2)):
        seconds = step(model, x, materialised=name == "materialised")
        if round_:
            times[name].append(seconds)
torch.set_num_threads(1)
live_ratio = statistics.median(times["materialised"]) / statistics.median(times["fullFF-2 auto"])
recorded_ratio = rows[1024]["seconds"]["materialised"] / rows[1024]["seconds"]["fullFF-2 auto"]
print(f"n = 1024, fullFF-2 auto vs materialised: live {live_ratio:.2f}x, recorded {recorded_ratio:.2f}x")
assert 1 / 1.5 <= live_ratio / recorded_ratio <= 1.5

# %% [markdown]
# ## Table 4: ListOps (reduced)
#
# The paper trains on LRA ListOps (500-2000 tokens). Our generator draws expressions of 16-128 tokens
# (10 classes); the recorded comparison trained the five models (d = 64, 4 heads) for 20 epochs on 2,000
# expressions, seeds 0-2 (`experiments/transevolve/README.md`). The quick preset reruns the first epoch
# of seed 0 of randomFF-1 at the recording's settings and compares its mean training loss with the
# recorded learning curve.

# %%
listops = LEDGER.recordings["transevolve_listops"]
recorded = listops.rows()
paper_listops = {"transformer": 36.4, "randomFF-1": 43.2, "randomFF-2": 39.1, "fullFF-1": 42.2, "fullFF-2": 37.8}
table = {row["variant"]: row for row in summarize(recorded)}
print(f"recorded {listops.date}: `{listops.command}`")
print(f"{'model':<12} {'parameters':>10} {'ours (3 seeds)':>15} {'paper (LRA)':>12}")
for name, row in table.items():
    print(f"{name:<12} {row['parameters']:>10,} {row['mean']:>8.1f} ± {row['std']:.1f} {paper_listops[name]:>12.1f}")

first_epoch = 2000 // PRESETS["transevolve_listops"].config.batch_size  # the generator's 2,000 training expressions
settings = {} if NB.full else {"max_steps": first_epoch}
seeds = (0, 1, 2) if NB.full else (0,)
chosen = TRANSEVOLVE_LISTOPS_VARIANTS if NB.full else {"randomFF-1": TRANSEVOLVE_LISTOPS_VARIANTS["randomFF-1"]}
live_listops = compare_variants("transevolve_listops", chosen, seeds, NB.work / "listops", workers=2 if NB.full else 1, progress=False, **settings)
old = {(r["variant"], r["seed"]): r for r in recorded}
for row in live_listops:
    then = old[row["variant"], row["seed"]]
    gap = abs(row["curve"]["loss"][0] - then["curve"]["loss"][0]) / then["curve"]["loss"][0]
    print(f"{row['variant']} seed {row['seed']}: first-epoch training loss {row['curve']['loss'][0]:.4f}, recorded {then['curve']['loss'][0]:.4f} (relative gap {gap:.1e})")
    assert gap <= 0.02  # 0 on the recording machine; other CPUs round differently
    if NB.full:
        assert abs(row["test_accuracy"] - then["test_accuracy"]) <= 0.02

# %% [markdown]
# ## Table 2: translation (reduced)
#
# The paper's findings: the fullFF variants translate better than the randomFF ones, two blocks of
# depth 3 better than one of depth 6, and fullFF-2 is on par with the Transformer. Our stand-in is
# `transevolve_reverse`: encoder-decoders (d = 64, 4 heads) reversing sequences of symbols, scored by
# token accuracy on held-out sequences, recorded for seeds 0-2. The quick preset reruns seed 0 of fullFF-2.

# %%
reverse = LEDGER.recordings["transevolve_reverse"]
recorded_reverse = reverse.rows()
paper_bleu = {"transformer": 27.3, "randomFF-1": 23.1, "randomFF-2": 23.8, "fullFF-1": 25.8, "fullFF-2": 27.2}
print(f"recorded {reverse.date}: `{reverse.command}`")
translation = {row["variant"]: row for row in summarize(recorded_reverse)}
print(f"{'model':<12} {'parameters':>10} {'token accuracy (3 seeds)':>25} {'paper BLEU (WMT14 En-De)':>26}")
for name, row in translation.items():
    print(f"{name:<12} {row['parameters']:>10,} {row['mean']:>17.1f} ± {row['std']:.1f} {paper_bleu[name]:>26.1f}")
chosen = TRANSEVOLVE_LISTOPS_VARIANTS if NB.full else {"fullFF-2": TRANSEVOLVE_LISTOPS_VARIANTS["fullFF-2"]}
live_reverse = compare_variants("transevolve_reverse", chosen, seeds, NB.work / "reverse", workers=2 if NB.full else 1, progress=False)
old = {(r["variant"], r["seed"]): r["test_accuracy"] for r in recorded_reverse}
for row in live_reverse:
    gap = 100 * abs(row["test_accuracy"] - old[row["variant"], row["seed"]])
    print(f"{row['variant']} seed {row['seed']}: {100 * row['test_accuracy']:.2f}% live, gap {gap:.2f} points")
    assert gap <= 2.0

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for ax, (title, ours, paper, unit) in zip(
    axes,
    (
        ("ListOps: ours (bars) vs LRA (dots)", table, paper_listops, "test accuracy (%)"),
        ("reversal: ours (bars) vs WMT14 En-De BLEU (dots)", translation, paper_bleu, "token accuracy (%) / BLEU"),
    ),
):
    names = list(ours)
    ax.bar(range(len(names)), [ours[n]["mean"] for n in names], yerr=[ours[n]["std"] for n in names], capsize=3, color="tab:blue", alpha=0.7)
    ax.plot(range(len(names)), [paper[n] for n in names], "o", color="tab:red")
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The ledger
#
# Every entry recomputed: exact claims from the library, qualitative ones by the two-standard-error rule
# on the recordings and the benchmark's rounds (`quick`), or, for the training comparisons, on this
# notebook's live runs (`full`). In `quick`, every recomputed entry must be the stored one (what
# `python -m paper_repro.claims --check` checks in CI too).

# %%
LIVE = {"transevolve_listops": live_listops, "transevolve_reverse": live_reverse}
claims.notebook_report(LEDGER, LIVE if NB.full else None)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"notebook ran in {time.perf_counter() - NB.start:.0f} s")
