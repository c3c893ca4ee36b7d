# %% [markdown]
# # 04 · TransEvolve: attention computed once, evolved along depth
#
# Dutta et al. (2021) compute the query-key products of a block **once**, from the block input
# $x^0$, and let depth $l$ change the attention only through a cheap term built from a depth vector
# $T^l$ (their eqs. 6-9):
#
# $$\mathrm{Attn}_l = \mathrm{softmax}\big(A_0 + A_1 T^l + T^l A_2 + A_3 (T^l \odot T^l)\big)\,
#   \mathrm{LN}(x)\, W_o .$$
#
# This tutorial:
#
# 1. shows that the query-side term $A_1 T^l$ and the $T$-$T$ term are constant along the softmax
#    axis, so depth-$l$ attention is $\mathrm{softmax}(A_0 + \mathbf 1 b_l^\top)$: the initial scores
#    plus a **per-key bias**;
# 2. checks the exact fast paths that exploit this (`factored`, `fused`, `auto`) against the
#    term-by-term `fidelity` mode, in outputs and gradients, with padding and causal masks;
# 3. trains a small TransEvolve classifier on ListOps and plots its attention maps across depth;
# 4. prints the Table 2 parameter counts and the recorded speed table.
#
# Runtime: about 60 s on 2 CPU cores. `NEURALODE_TF_FULL=1` trains 4x longer.

# %%
# NBVAL_IGNORE_OUTPUT
import json
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from neuralode_tf.fields import TransEvolveAttention
from neuralode_tf.notebook import setup
from neuralode_tf.train import TrainConfig, build_setup, train

sys.path.insert(0, str(Path("..") / "paper_repro"))  # the reproductions' code, beside this folder
from claims._transevolve_counts import table2_parameter_counts

NB = setup(versions=("matplotlib",), work="tutorial04")

# %% [markdown]
# ## 1. Initial scores plus a key bias
#
# `TransEvolveAttention(dim, heads, depth, mode="fidelity")` evaluates every term of eq. 6 as
# written. Its `attention_weights(t)` is $\mathrm{softmax}(A_0 + \mathbf 1 b(t)^\top)$ alone. The two
# agree: the query-side and $T$-$T$ terms add the same number to every logit of a row, and a
# softmax does not see that.

# %%
torch.manual_seed(0)
attention = TransEvolveAttention(32, 4, depth=6, mode="fidelity")
x0 = torch.randn(2, 16, 32)
state = attention.prepare(x0)
with torch.no_grad():
    gaps = []
    for depth in range(6):
        increment = attention(depth, x0, state)  # every term of eq. 6
        weights = attention.attention_weights(depth, state)  # softmax(A0 + 1 b^T)
        values = torch.nn.functional.layer_norm(x0, (32,), attention.norm_weight[depth], attention.norm_bias[depth])
        heads = weights @ values.unflatten(-1, (4, 8)).transpose(1, 2)
        by_bias = heads.transpose(1, 2).flatten(-2) @ attention.w_o[depth]
        gaps.append((increment - by_bias).abs().max().item())
print("max |eq. 6 - softmax(A0 + 1 b^T)| per depth:", [f"{g:.1e}" for g in gaps])
assert max(gaps) <= 1e-5

# %% [markdown]
# ## 2. The exact fast paths
#
# * `factored`: $E = \exp(A_0 - \max)$ once per block; each depth is one $n\times n$ matmul against
#   $[e^{b} \odot V,\; e^{b}]$ and a division: no exponentials over $n^2$ entries per depth.
# * `fused`: the bias rides in one extra query/key coordinate, $q' = [q, 1]$, $k' = [k, b]$, so
#   `scaled_dot_product_attention`'s fused kernels do the work and memory stays $O(n)$.
# * `auto`: `factored` up to 256 tokens, `fused` beyond.
#
# Each must equal `fidelity` to 1e-5 in float32, in outputs and in gradients (of a random
# projection of the output) with respect to the input and every parameter, with padding and with
# causal masks.


# %%
def run(mode: str, causal: bool, pad: torch.Tensor | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(1)
    module = TransEvolveAttention(32, 4, depth=6, causal=causal, mode=mode)
    x = torch.randn(2, 24, 32, requires_grad=True)
    out = module(2.5, x, module.prepare(x, pad))
    probe = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))  # a random vector-Jacobian product
    grads = torch.autograd.grad((out * probe).sum(), [x, *module.parameters()], allow_unused=True)
    return out.detach(), [g for g in grads if g is not None]


pad = torch.zeros(2, 24, dtype=torch.bool)
pad[1, 17:] = True
worst = {}
for mode in ("factored", "fused", "auto"):
    for causal in (False, True):
        reference, reference_grads = run("fidelity", causal, pad)
        out, grads = run(mode, causal, pad)
        out_gap = (out - reference).abs().max().item()
        grad_gap = max((g - r).abs().max().item() for g, r in zip(grads, reference_grads))
        worst[(mode, causal)] = (out_gap, grad_gap)
        print(f"{mode:>8}, causal={causal!s:<5}: output {out_gap:.1e}, gradients {grad_gap:.1e}")
assert all(max(gaps) <= 1e-5 for gaps in worst.values())

# %% [markdown]
# ## 3. Attention across depth on ListOps
#
# The preset `transevolve_listops` is a TransEvolve classifier (randomFF-2: two blocks of depth 3,
# $d = 64$, 4 heads) on our ListOps generator (expressions of 16-128 tokens such as
# `[MAX 2 [MIN 4 7 ] 0 ]`, labelled by their value). We train it briefly and plot, for one test
# expression, head 0's attention of the first block at depths 0, 1 and 2: the same $A_0$, shifted
# key by key as depth goes on.

# %%
config = TrainConfig(
    preset="transevolve_listops",
    epochs=20 if NB.full else 5,
    batch_size=64,
    lr=1e-3,
    weight_decay=0.01,
    warmup_steps=20,
    out_dir=str(NB.work),
    progress=False,
    data=dict(num_train=2000 if NB.full else 1000, num_test=500),
)
result = train(config)
built = build_setup(config)
majority = torch.bincount(built.data.test.y).max().item() / len(built.data.test.y)
print(f"test accuracy {100 * result['test_accuracy']:.1f}% ({result['parameters']:,} parameters)")
print(f"most frequent of the 10 classes: {100 * majority:.1f}% of the test set")
assert result["test_accuracy"] > majority + 0.05

built.model.load_state_dict(torch.load(NB.work / "checkpoint.pt", weights_only=True)["model"])
model = built.model.eval()
tokens, mask = built.data.test.x[:1], built.data.test.mask[:1]
length = int((~mask).sum())
tokens, mask = tokens[:, :length], mask[:, :length]
block = model.encoder.blocks[0].field.attention
block.mode = "fidelity"
with torch.no_grad():
    x0 = model.embed(tokens, mask)
    maps = [block.attention_weights(depth, block.prepare(x0, mask))[0, 0] for depth in range(3)]

fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
for depth, (ax, weights) in enumerate(zip(axes, maps)):
    ax.imshow(weights.numpy(), cmap="viridis")
    ax.set_title(f"block 1, head 1, depth {depth}")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
fig.tight_layout()
plt.show()
changes = [(maps[d + 1] - maps[d]).abs().sum(-1).mean().item() for d in range(2)]
print("mean L1 change of an attention row from one depth to the next:", [f"{c:.3f}" for c in changes])
assert all(c > 0 for c in changes)

# %% [markdown]
# ## 4. Parameters (Table 2) and speed
#
# The models of Table 2 ($d = 512$, 8 heads, 6 + 6 layers, a 32k vocabulary tied three ways), built
# on the `meta` device. Their counts match the paper's approximately (randomFF-2 rounds to 34M, not
# 33M, and no single configuration gives all five figures); the paper's Transformer-base figure (65M)
# is Vaswani et al.'s, with a 37k vocabulary; see `table2_parameter_counts`.

# %%
counts = table2_parameter_counts()
paper = {"Transformer-base": 65, "randomFF-1": 27, "randomFF-2": 33, "fullFF-1": 53, "fullFF-2": 59}
for name, count in counts.items():
    print(f"{name:<17} ours {count / 1e6:6.2f}M   paper {paper[name]}M")
assert all(abs(counts[name] / 1e6 - paper[name]) <= 1 for name in paper if name != "Transformer-base")

# %% [markdown]
# The speed table is recorded by `OMP_NUM_THREADS=2 python -m benchmarks.transevolve` (here its rows
# for fullFF-1, one depth-6 TransEvolve block with the full FF, against six SDPA blocks, forward +
# backward, $d = 256$, 8 heads; ratios above 1 mean TransEvolve is faster, memory ratios below 1 that
# it needs less). `vs mat.` is the paper's comparison (Table 4), against a standard stack whose
# attention materialises the $n \times n$ weights; `ceiling` is the standard stack over itself without
# Q/K/V projections and attention, the most any TransEvolve path could gain. The TransEvolve ledger
# (`paper_repro/claims/transevolve.toml`) judges each speed claim on the recorded rounds by the
# two-standard-error rule: faster than materialised attention at 1k-4k, for every variant with `auto`;
# against the fused SDPA stack, neither faster nor slower for fullFF-1 from 1k.

# %%
recorded = json.loads((Path("..") / "benchmarks" / "results" / "transevolve_cpu.json").read_text())
print(f"targets: {recorded['targets']}")
modes = ("factored", "fused", "auto")
print(f"{'n':>5} " + "".join(f"{m:>10} speed {m:>6} mem" for m in modes) + "  vs mat.  ceiling")
for row in recorded["rows"]:
    cells = "".join(f"{row['speedup'][m]:>15.2f}x {row['memory_ratio'][m]:>9.2f}x" for m in modes)
    print(f"{row['n']:>5} {cells} {row['speedup_vs_materialised']:>7.2f}x {row['ceiling']:>7.2f}x")
fused_memory = [row["memory_ratio"]["fused"] for row in recorded["rows"]]
factored_memory = [row["memory_ratio"]["factored"] for row in recorded["rows"]]
assert fused_memory[-1] < factored_memory[-1]  # fused keeps memory O(n); factored holds n x n per head
assert all(row["speedup"]["auto"] <= row["ceiling"] for row in recorded["rows"])

# %%
# NBVAL_IGNORE_OUTPUT
print(f"tutorial ran in {time.perf_counter() - NB.start:.0f} s")
