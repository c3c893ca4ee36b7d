# %% [markdown]
# # 01 · A transformer block is one step of an ODE solver
#
# This tutorial shows, with numbers and `assert`s rather than words alone, that
#
# 1. a **pre-norm transformer block** is exactly **one Lie-Trotter splitting step with Euler sub-steps and
#    step size 1** of the ODE $\dot x = G(x) + F(x)$ (attention $G$, MLP $F$);
# 2. the **Macaron block** is one **Strang** step with Euler sub-steps, and the **parallel block** is one
#    plain Euler step of the same ODE;
# 3. once the block is read as an ODE, any integrator can be used instead, and each converges at the rate
#    that numerical analysis predicts, including the splitting methods, whose orders are often misquoted.
#
# Runtime: about 10 s on 2 CPU cores. Set `NEURALODE_TF_FULL=1` for a larger model and more step counts
# (about 25 s).

# %%
# NBVAL_IGNORE_OUTPUT
import time
import warnings

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import ParallelField, SplitField, WeightSharedField
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.notebook import setup

NB = setup(versions=("torchdiffeq", "torchode", "numpy", "matplotlib"))

# %% [markdown]
# ## 1. The maths
#
# Write a token matrix $x \in \mathbb{R}^{n \times d}$ and the two residual branches of a pre-norm block,
#
# $$
# G(x) = \mathrm{MHA}\big(\mathrm{LN}_1(x)\big), \qquad F(x) = W_2\,\mathrm{GELU}\big(W_1\,\mathrm{LN}_2(x) + b_1\big) + b_2 ,
# $$
#
# each mapping $x$ to an *increment*, with no skip connection inside (`AttentionBranch`, `MLPBranch`).
# The standard (sequential) pre-norm block of layer $m$ is
#
# $$
# x^{m+\frac12} = x^m + G(x^m), \qquad x^{m+1} = x^{m+\frac12} + F\big(x^{m+\frac12}\big).
# $$
#
# Lu et al. (2019) and Zhong et al. (2022) read this as a discretisation of the ODE
#
# $$
# \frac{dx}{dt} = G(x) + F(x).
# $$
#
# Which discretisation? Let $\Phi^h_G(x) = x + h\,G(x)$ be one Euler step of the attention part alone and
# $\Phi^h_F$ the same for the MLP. The **Lie-Trotter splitting** step advances the parts in turn,
# $x_{k+1} = \Phi^h_F \circ \Phi^h_G (x_k)$, and at $h = 1$ this *is* the block above: a depth-$L$
# transformer is $L$ Lie-Trotter Euler steps of size 1 (with different weights per step).
# `SplitField(attn, mlp)` is this field, with its parts in stepping order (the sequential block, the ODE
# and the parallel block below are eqs. 1-4 of Zhong et al. 2022).
#
# Two relatives of the same ODE:
#
# * the **parallel block** $x^{m+1} = x^m + G(x^m) + F(x^m)$ proposed by Zhong et al. (2022) is one plain
#   Euler step of size 1 of the *sum* (`ParallelField`);
# * the **Macaron block** of Lu et al. (2019), $x + \tfrac12 F$, then $+\,G$, then $+\,\tfrac12 F$, is one
#   **Strang** step $\Phi^{h/2}_F \circ \Phi^h_G \circ \Phi^{h/2}_F$ with Euler sub-steps and $h = 1$,
#   i.e. `SplitField(mlp, attn)` stepped by `method="strang"`.
#
# **Orders (the part that is often got wrong).** Lie-Trotter has local splitting error
# $\tfrac{h^2}{2}[F, G](x) + O(h^3)$, with the commutator $[F, G] = F'G - G'F$ of the two branches, which
# attention and the MLP have no reason to make zero. So Lie-Trotter is **first order whatever the sub-step**: advancing each part with rk4
# does not help. Strang's splitting error is $O(h^3)$ per step, so it is **second order, but only with a
# sub-step of order at least 2**: with Euler sub-steps (the Macaron block) the $O(h^2)$ local error of
# each Euler sub-step dominates and Strang is first order too.
#
# References: Y. Lu, Z. Li, D. He, Z. Sun, B. Dong, T. Qin, L. Wang, T.-Y. Liu, *Understanding and
# improving Transformer from a multi-particle dynamic system point of view*, 2019 (arXiv:1906.02762).
# Y. D. Zhong, T. Zhang, A. Chakraborty, B. Dey, *A neural ODE interpretation of Transformer layers*, 2022
# (arXiv:2212.06011). H. F. Trotter 1959; G. Strang 1968.

# %% [markdown]
# ## 2. A small transformer stack
#
# Four pre-norm blocks (twelve with `NEURALODE_TF_FULL=1`) of width $d = 32$ with 4 heads, acting on a batch of 4 sequences
# of 16 tokens. Everything is seeded with `torch.manual_seed(0)` and runs on one thread, so the numbers below
# are reproducible.

# %%
torch.manual_seed(0)
D_MODEL, HEADS, TOKENS, BATCH, DEPTH = 32, 4, 16, 4, (12 if NB.full else 4)

attns = nn.ModuleList(AttentionBranch(D_MODEL, HEADS) for _ in range(DEPTH))
mlps = nn.ModuleList(MLPBranch(D_MODEL) for _ in range(DEPTH))
x = torch.randn(BATCH, TOKENS, D_MODEL)


def block(x, attn, mlp):
    """The discrete pre-norm block, written by hand."""
    x = x + attn(x)
    return x + mlp(x)


n_params = sum(p.numel() for p in attns.parameters()) + sum(p.numel() for p in mlps.parameters())
print(f"{DEPTH} blocks, {n_params} parameters, tokens {tuple(x.shape)}")

# %% [markdown]
# ## 3. The block equals one splitting step
#
# `solve(field, x, [0, 1], method="lie_trotter", steps=1)` takes one step of size 1. Compare it with the
# block computed by hand. (Under `torch.no_grad()` only to save memory; gradients are identical.)

# %%
TOL = 1e-6


def max_abs(a, b):
    return (a - b).abs().max().item()


with torch.no_grad():
    attn, mlp = attns[0], mlps[0]

    # Standard pre-norm block = Lie-Trotter, Euler sub-steps, h = 1.
    lt = solve(SplitField(attn, mlp), x, [0.0, 1.0], method="lie_trotter", steps=1)
    err_lt = max_abs(lt.y1, block(x, attn, mlp))

    # Macaron block (half MLP, attention, half MLP) = Strang, Euler sub-steps, h = 1.
    macaron = x + 0.5 * mlp(x)
    macaron = macaron + attn(macaron)
    macaron = macaron + 0.5 * mlp(macaron)
    st = solve(SplitField(mlp, attn), x, [0.0, 1.0], method="strang", substep="euler", steps=1)
    err_st = max_abs(st.y1, macaron)

    # Parallel block = plain Euler on the sum, h = 1.
    eu = solve(ParallelField(attn, mlp), x, [0.0, 1.0], method="euler", steps=1)
    err_par = max_abs(eu.y1, x + attn(x) + mlp(x))

print(f"pre-norm block vs lie_trotter step : max |diff| = {err_lt:.3g}  (part evaluations: {lt.stats.nfe})")
print(f"Macaron block  vs strang step      : max |diff| = {err_st:.3g}  (part evaluations: {st.stats.nfe})")
print(f"parallel block vs euler step       : max |diff| = {err_par:.3g}  (field evaluations: {eu.stats.nfe})")
assert err_lt <= TOL and err_st <= TOL and err_par <= TOL
assert (lt.stats.nfe, st.stats.nfe, eu.stats.nfe) == (2, 3, 1)

# %% [markdown]
# The whole stack is the same statement $L$ times. Its weights change from block to block, so its field
# is piecewise constant in depth-time: `WeightSharedField(layers, depth=L)` uses layer $j$ on $[j, j+1)$.
# `ContinuousDepth` takes unit steps by default, so with `method="lie_trotter"` it *is* the discrete stack.

# %%
stack_field = WeightSharedField([SplitField(a, m) for a, m in zip(attns, mlps, strict=True)], depth=DEPTH)
continuous_stack = ContinuousDepth(stack_field, t1=DEPTH, method="lie_trotter")

with torch.no_grad():
    y_discrete = x
    for a, m in zip(attns, mlps, strict=True):
        y_discrete = block(y_discrete, a, m)
    y_ode = continuous_stack(x)
err_stack = max_abs(y_ode, y_discrete)
print(f"{DEPTH}-block stack vs {continuous_stack.stats.n_accepted} lie_trotter steps: max |diff| = {err_stack:.3g}")
assert err_stack <= TOL and continuous_stack.stats.n_accepted == DEPTH

# %% [markdown]
# ## 4. Solving the ODE properly
#
# From here on we study the *ODE*, not one particular discretisation of it. To measure convergence we
# need a smooth field, so we take the field of a single block (autonomous, the same weights at every
# depth-time: a weight-tied continuous-depth layer) on $[0, 1]$, as the library's tests do: width 16,
# 8 tokens (64 and 32 with `NEURALODE_TF_FULL=1`), in float64 so that round-off stays far below the errors we measure. With the default
# initialisation the tokens move by $O(1)$ over $[0,1]$, so the dynamics are nontrivial but smooth
# (`SCALE` multiplies both branches, should another model need it).

# %%
torch.manual_seed(0)
D_ODE, TOKENS_ODE = (64, 32) if NB.full else (16, 8)
SCALE = 1.0


class Scaled(nn.Module):
    """A branch multiplied by a constant: ``x -> c * branch(x)``."""

    def __init__(self, branch, c):
        super().__init__()
        self.branch, self.c = branch, c

    def forward(self, x):
        return self.c * self.branch(x)


field = SplitField(Scaled(AttentionBranch(D_ODE, 4), SCALE), Scaled(MLPBranch(D_ODE), SCALE)).double()
x0 = torch.randn(BATCH, TOKENS_ODE, D_ODE, dtype=torch.float64)

with torch.no_grad():
    ref = solve(field, x0, [0.0, 1.0], method="dopri5", rtol=1e-10, atol=1e-10)
displacement = max_abs(ref.y1, x0)
print(f"reference: dopri5 rtol=atol=1e-10 ({ref.stats.backend}), {ref.stats.nfe} evaluations")
print(f"max |x(1) - x(0)| = {displacement:.2g}")
assert 0.1 < displacement < 10  # moves, but does not blow up

# %% [markdown]
# Euler, rk4 and the adaptive dopri5 (torchdiffeq) and tsit5 (torchode), against that reference.
# Euler with 32 steps and rk4 with 8 steps cost the same 32 evaluations; rk4 is more than a thousand times
# more accurate, and the adaptive methods at tolerance $10^{-6}$ get below $10^{-4}$ with fewer evaluations still.

# %%
runs = {
    "euler, 32 steps": dict(method="euler", steps=32),
    "rk4, 8 steps": dict(method="rk4", steps=8),
    "dopri5, tol 1e-6": dict(method="dopri5", rtol=1e-6, atol=1e-6),
    "tsit5, tol 1e-6": dict(method="tsit5", rtol=1e-6, atol=1e-6),
}
results = {}
with torch.no_grad():
    for name, kwargs in runs.items():
        sol = solve(field, x0, [0.0, 1.0], **kwargs)
        results[name] = (max_abs(sol.y1, ref.y1), sol.stats.nfe, sol.stats.backend)
print(f"{'run':18s} {'max error':>10s} {'NFE':>5s}  backend")
for name, (err, nfe, backend) in results.items():
    print(f"{name:18s} {err:10.2g} {nfe:5d}  {backend}")

err_euler, nfe_euler, _ = results["euler, 32 steps"]
err_rk4, nfe_rk4, _ = results["rk4, 8 steps"]
assert nfe_euler == nfe_rk4 == 32
assert err_rk4 < 1e-3 * err_euler
for name in ("dopri5, tol 1e-6", "tsit5, tol 1e-6"):
    err, nfe, _ = results[name]
    assert err < 1e-4 and nfe < nfe_euler, name

# %% [markdown]
# ## 5. Convergence orders, splitting methods included
#
# For every fixed-grid method, the error at $t = 1$ as a function of the step size $h = 1/N$ should
# behave like $C h^p$ with $p$ the order. We fit $p$ as the slope of $\log(\text{error})$ against
# $\log h$ (`np.polyfit`), over step counts in the asymptotic regime but well above round-off:
# $N = 4 \dots 64$ for the low-order methods, $N = 2 \dots 16$ for rk4.
#
# The errors are measured against a finer reference than the dopri5 one above (whose own error,
# about $10^{-10}$, would contaminate rk4 at 16 steps): rk4 with 1024 steps, whose error is below
# $10^{-13}$.
#
# **NFE for splitting methods counts evaluations of parts**: one Strang step with Euler sub-steps is
# 3 part evaluations (MLP, attention, MLP), and a part evaluation runs only one of the two branches. The
# error-vs-NFE panel therefore overstates the cost of the splitting methods relative to Runge-Kutta.

# %%
LOW = [4, 8, 16, 32, 64] + ([128, 256] if NB.full else [])
HIGH = [2, 4, 8, 16] + ([32] if NB.full else [])

# (label, method, substep, theoretical order, step counts)
CONFIGS = [
    ("euler", "euler", None, 1, LOW),
    ("midpoint", "midpoint", None, 2, LOW),
    ("heun", "heun", None, 2, LOW),
    ("rk4", "rk4", None, 4, HIGH),
    ("lie_trotter+euler", "lie_trotter", "euler", 1, LOW),
    ("lie_trotter+rk4", "lie_trotter", "rk4", 1, LOW),
    ("strang+euler", "strang", "euler", 1, LOW),
    ("strang+midpoint", "strang", "midpoint", 2, LOW),
    ("strang+rk4", "strang", "rk4", 2, LOW),
]

with torch.no_grad():
    fine = solve(field, x0, [0.0, 1.0], method="rk4", steps=1024).y1
    half = solve(field, x0, [0.0, 1.0], method="rk4", steps=512).y1
# Richardson: err(512) ~ 16 err(1024), so |half - fine| ~ 15 err(1024).
fine_err = max_abs(half, fine) / 15
ref_gap = max_abs(fine, ref.y1)
print(
    f"fine reference (rk4, 1024 steps): estimated error {fine_err:.0e}; "
    f"distance to the dopri5 rtol=atol=1e-10 reference {ref_gap:.0e}"
)
assert fine_err < 1e-13 and ref_gap < 1e-8

conv = {}
with torch.no_grad():
    for label, method, substep, order, counts in CONFIGS:
        kwargs = {} if substep is None else {"substep": substep}
        errs, nfes = [], []
        for n in counts:
            sol = solve(field, x0, [0.0, 1.0], method=method, steps=n, **kwargs)
            errs.append(max_abs(sol.y1, fine))
            nfes.append(sol.stats.nfe)
        h = 1.0 / np.array(counts)
        slope = np.polyfit(np.log(h), np.log(errs), 1)[0]
        conv[label] = dict(h=h, errs=np.array(errs), nfes=np.array(nfes), order=order, slope=slope)

# %%
print(f"{'method':18s} {'theory':>6s} {'fitted':>6s}  {'error at smallest h':>19s}  {'NFE there':>9s}")
for label, c in conv.items():
    print(f"{label:18s} {c['order']:6d} {c['slope']:6.2f}  {c['errs'][-1]:19.2g}  {c['nfes'][-1]:9d}")

for label, c in conv.items():
    assert abs(c["slope"] - c["order"]) <= 0.3, (label, c["slope"], c["order"])
    assert c["errs"].min() > 100 * fine_err, label  # every error is far above the reference's own error

# NFE bookkeeping: parts are counted one by one (2 parts).
assert conv["lie_trotter+euler"]["nfes"][0] == 2 * LOW[0]
assert conv["strang+euler"]["nfes"][0] == 3 * LOW[0]
assert conv["strang+rk4"]["nfes"][0] == 3 * 4 * LOW[0]

# %% [markdown]
# Lie-Trotter is first order with Euler **and** with rk4 sub-steps; Strang is first order with Euler
# sub-steps (the Macaron block) and second order with midpoint or rk4 sub-steps, which are
# indistinguishable in order because the splitting error then dominates. The cells below check these
# claims explicitly: a better sub-step does not change Lie-Trotter's order, and with rk4 sub-steps
# Strang is second order but no better than midpoint sub-steps beyond a constant.

# %%
lt_gain = conv["lie_trotter+euler"]["errs"][-1] / conv["lie_trotter+rk4"]["errs"][-1]
st_gain = conv["strang+midpoint"]["errs"][-1] / conv["strang+rk4"]["errs"][-1]
print(f"lie_trotter: rk4 sub-steps reduce the error only by a factor {lt_gain:.2g} (same order, 1)")
print(f"strang:      rk4 vs midpoint sub-steps, error ratio {st_gain:.2g} (same order, 2)")
assert round(conv["lie_trotter+rk4"]["slope"]) == round(conv["lie_trotter+euler"]["slope"]) == 1
assert round(conv["strang+euler"]["slope"]) == 1
assert round(conv["strang+midpoint"]["slope"]) == round(conv["strang+rk4"]["slope"]) == 2
assert lt_gain < 10 and st_gain < 10

# %%
fig, (ax_h, ax_nfe) = plt.subplots(1, 2, figsize=(11, 4.5))
styles = {
    "euler": "o-",
    "midpoint": "s-",
    "heun": "^-",
    "rk4": "D-",
    "lie_trotter+euler": "o--",
    "lie_trotter+rk4": "D--",
    "strang+euler": "o:",
    "strang+midpoint": "s:",
    "strang+rk4": "D:",
}
colors = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7]  # skip gray: used for slopes
for (label, c), color in zip(conv.items(), colors, strict=False):
    ax_h.loglog(c["h"], c["errs"], styles[label], color=color, label=f"{label} (p≈{c['slope']:.1f})", ms=4)
    ax_nfe.loglog(c["nfes"], c["errs"], styles[label], color=color, label=label, ms=4)
for p, anchor in ((1, "euler"), (2, "midpoint"), (4, "rk4")):
    h = conv[anchor]["h"]
    ax_h.loglog(h, 0.3 * conv[anchor]["errs"][0] * (h / h[0]) ** p, color="gray", lw=0.8)
    ax_h.annotate(f"slope {p}", (h[-1], 0.3 * conv[anchor]["errs"][0] * (h[-1] / h[0]) ** p), fontsize=8, color="gray")
ax_h.set(xlabel="step size h = 1/N", ylabel="max |x_h(1) - x(1)|", title="error vs step size")
counts = sorted(set(LOW) | set(HIGH))
ax_h.xaxis.set_major_locator(matplotlib.ticker.FixedLocator([1 / n for n in counts]))
ax_h.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([f"1/{n}" for n in counts]))
ax_h.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
ax_nfe.set(
    xlabel="evaluations (parts counted one by one for splitting)", ylabel="max |x_h(1) - x(1)|", title="error vs NFE"
)
ax_h.legend(fontsize=7)
for ax in (ax_h, ax_nfe):
    ax.grid(True, which="both", alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Causal fields: which solves stay causal
#
# A decoder field is causal in the sequence positions: $f(t, y)_i$ reads no position after $i$. Every
# **fixed-grid** solve of it is exactly causal too, since each step is a fixed combination of field
# evaluations. An **adaptive** solve is not: step-size control takes one error norm over all positions,
# so later tokens change the steps and, through them, every earlier value (by about the tolerance).
# `solve` says so with a `CausalityWarning`. `Seq2Seq(..., causal_prefixes=True)` in `forward` solves
# each prefix on its own, as decoding does, and is exactly causal whatever the solver.
#
# Below: the largest change of the logits at positions 0-2 when the target tokens after position 2 change.

# %%
from neuralode_tf.models import Seq2Seq
from neuralode_tf.numerics import CausalityWarning

g = torch.Generator().manual_seed(0)
src, tgt_in = torch.randint(3, 12, (2, 5), generator=g), torch.randint(3, 12, (2, 6), generator=g)
changed = tgt_in.clone()
changed[:, 3:] = torch.randint(3, 12, (2, 3), generator=g)


def future_leak(model: Seq2Seq, **kwargs) -> float:
    with torch.no_grad():
        return (model(src, tgt_in, **kwargs)[:, :3] - model(src, changed, **kwargs)[:, :3]).abs().max().item()


leaks = {}
for name, settings in {
    "rk4, 3 steps": dict(method="rk4", steps=3),
    "dopri5, tol 1e-5": dict(method="dopri5", rtol=1e-5, atol=1e-5),
}.items():
    torch.manual_seed(0)
    model = Seq2Seq(12, dim=16, num_heads=2, **settings).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CausalityWarning)
        leaks[name] = future_leak(model)
    causality_warnings = [w for w in caught if issubclass(w.category, CausalityWarning)]
    print(f"{name:>17}: future leak {leaks[name]:.1e}, CausalityWarning: {bool(causality_warnings)}")
    assert bool(causality_warnings) == name.startswith("dopri5")
leaks["dopri5, prefixes"] = future_leak(model, causal_prefixes=True)
print(f"{'dopri5, prefixes':>17}: future leak {leaks['dopri5, prefixes']:.1e}")
assert leaks["rk4, 3 steps"] == 0.0 and leaks["dopri5, prefixes"] == 0.0
assert 0.0 < leaks["dopri5, tol 1e-5"] < 1e-2

# %% [markdown]
# ## 7. Depth is a continuum: layers on the grid, states between them, and an event in depth
#
# A stack whose layers have their own weights is a field that jumps at every layer boundary
# (`WeightSharedField(layers, depth=L)` declares `jump_times = 1, ..., L-1`). Every fixed grid puts a point
# on each boundary, so **4 rk4 steps over 3 layers take 6** (two per layer) and keep rk4's order; a grid
# blind to the boundaries would straddle them and fall to first order.
#
# `solve(..., dense=True)` keeps the steps, and `sol.evaluate(t)` reads the state at any depth: at a
# step's end it is the solver's own state (no evaluation), in between the cubic Hermite interpolant of
# the step. `ContinuousDepth.trajectory(x, t)` does the same for a model's stack. An **event**
# `g(t, x) = 0` stops the solve at a depth found by root finding, differentiable in the weights: here the
# depth at which the tokens' mean norm first reaches a threshold (an early exit in depth).

# %%
torch.manual_seed(0)
layers = [SplitField(AttentionBranch(16, 2), MLPBranch(16)).double() for _ in range(3)]
stack = WeightSharedField(layers, depth=3)
x_stack = torch.randn(2, 8, 16, dtype=torch.float64)
four = solve(stack, x_stack, [0.0, 3.0], method="rk4", steps=4, dense=True)
print(f"rk4, steps=4 over 3 layers: {four.stats.n_accepted} steps taken")
assert four.stats.n_accepted == 6

depths = torch.linspace(0.0, 3.0, 61, dtype=torch.float64)
with torch.no_grad():
    norms = four.evaluate(depths).norm(dim=-1).mean(dim=(1, 2))
per_layer = [solve(stack, x_stack, [0.0, float(k)], method="rk4", steps=2 * k).y1 for k in (1, 2, 3)]
layer_gap = max((four.evaluate(float(k)) - y).abs().max().item() for k, y in zip((1, 2, 3), per_layer))
print(f"dense output at depths 1, 2, 3 vs solving to each depth: max |diff| = {layer_gap:.1e}")
assert layer_gap <= 1e-12

threshold = float(norms[0] + 0.6 * (norms[-1] - norms[0]))
exit_ = solve(stack, x_stack, [0.0, 3.0], method="rk4", steps=6,
              event=lambda t, x: x.norm(dim=-1).mean() - threshold)
reached = exit_.y1.norm(dim=-1).mean().item()
print(f"mean norm reaches {threshold:.3f} at depth {exit_.event_t.item():.4f} (there: {reached:.3f}); "
      f"{exit_.stats.n_accepted} of 6 steps taken")
assert abs(reached - threshold) <= 1e-9 and exit_.stats.n_accepted < 6
depth_grad = torch.autograd.grad(exit_.event_t, next(layers[0].parts[1].parameters()))[0]
print(f"d(exit depth)/d(first MLP weight): norm {depth_grad.norm():.3f}")
assert torch.isfinite(depth_grad).all() and depth_grad.norm() > 0

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(depths, norms, label="dense output")
ax.plot([0, 1, 2, 3], [x_stack.norm(dim=-1).mean().item()] + [y.norm(dim=-1).mean().item() for y in per_layer],
        "o", label="layer outputs")
ax.axhline(threshold, color="gray", lw=0.8)
ax.axvline(exit_.event_t.item(), color="gray", ls="--", lw=0.8, label="event: early exit")
ax.set(xlabel="depth t", ylabel="mean token norm", title="A 3-layer stack read at any depth")
ax.legend()
plt.show()

# %% [markdown]
# ## Take-aways
#
# * A pre-norm transformer block is one Lie-Trotter step with Euler sub-steps and $h = 1$; a Macaron
#   block is one Strang step with Euler sub-steps; a parallel block is one Euler step (checked to
#   $\le 10^{-6}$ above).
# * As integrators of $\dot x = G(x) + F(x)$, all three are **first order**. Swapping the sub-step for
#   rk4 leaves Lie-Trotter first order; Strang becomes second order only with a second-order (or higher)
#   sub-step. For high accuracy per evaluation, integrate the summed field with rk4 or an adaptive method.
# * Fixed-grid solves of a causal field are exactly causal; adaptive ones leak the future by about the
#   tolerance, and `solve` warns. Solving each prefix on its own (`causal_prefixes=True`) restores exactness.
# * Depth is continuous: grids land on the layer boundaries, dense output reads the state at any depth, and an
#   event stops the solve at a depth that is differentiable in the weights.

# %%
# NBVAL_IGNORE_OUTPUT
print(f"elapsed {time.perf_counter() - NB.start:.1f}s")
