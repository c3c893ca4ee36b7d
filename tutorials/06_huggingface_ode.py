# %% [markdown]
# # 06 · Your Hugging Face model is an ODE
#
# Tutorials 01 and 02 showed that a pre-norm transformer block is one Lie-Trotter Euler step of size 1 of
# $\dot x = G(x) + F(x)$, and converted a timm ViT. This tutorial does the same for
# [Hugging Face transformers](https://huggingface.co/docs/transformers) language models, then trains and samples
# a language model whose whole stack is one vector field:
#
# 1. builds a small random-weight **GPT-2** (`GPT2LMHeadModel`) and a **LLaMA**-style model (`LlamaForCausalLM`:
#    RMSNorm, rotary positions, SwiGLU, grouped-query attention with 4 query heads sharing 2 key/value heads),
#    converts both with `neuralode_tf.models.from_transformers`, and checks that in float64 the converted models
#    compute **the same logits**, on a padded batch, and the same hidden state after every block;
# 2. refines the solver without touching the weights (`neuralode_tf.set_solve_options`), draws the tokens'
#    trajectories through depth-time next to the network's block-by-block states, and fits each method's order
#    of convergence to the flow;
# 3. trains the reduced OT-Transformer language model (Kan et al. 2025) on the tweets' characters for about a
#    minute, compares its validation loss with a unigram and a bigram model of the corpus, and samples from it
#    with and without the key/value cache.
#
# Nothing is downloaded: the Hugging Face models are built from small configs with random weights, and the text
# ships with the package.
#
# Runtime: about 80 s on 2 CPU cores. `NEURALODE_TF_FULL=1` trains the language model 3x longer (about 3 min).

# %%
# NBVAL_IGNORE_OUTPUT
import csv
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers

from neuralode_tf import set_solve_options, solve
from neuralode_tf.models import CausalLM, from_transformers
from neuralode_tf.models.converters.huggingface import ContinuousTransformersModel
from neuralode_tf.notebook import setup
from neuralode_tf.train import TrainConfig, build_setup, load_checkpoint, train

NB = setup(versions=("transformers", "numpy", "matplotlib"), seed=0, work="tutorial06")

# %% [markdown]
# ## 1. Two Hugging Face models, converted
#
# Both models have width 64, 4 blocks and 4 attention heads, a vocabulary of 101 ids (0 is padding) and Hugging
# Face's random initialisation (`initializer_range` 0.02), seeded; they run in float64 and in eval mode (GPT-2's
# dropout off).
#
# `from_transformers(model)` keeps the embedding, the final norm and the head, and replaces the stack of $L$
# blocks by a `ContinuousDepth` on depth-time $[0, L]$ whose field, on $[m, m+1)$, is block $m$'s two residual
# branches (Lu et al. 2019; Zhong et al. 2022, eq. 3):
#
# $$
# \frac{dx}{dt} = G_{\lfloor t \rfloor}(x) + F_{\lfloor t \rfloor}(x), \qquad t \in [0, L],
# $$
#
# with $G_m$ the attention sub-layer (its pre-norm inside: LayerNorm for GPT-2, RMSNorm for LLaMA; rotary
# positions bound per batch for LLaMA) and $F_m$ the MLP sub-layer (GELU for GPT-2, SwiGLU for LLaMA). The
# default solver is `lie_trotter` with one step of size 1 per block: $x \mapsto x + G_m(x)$, then
# $+\,F_m(\cdot)$, which is the Hugging Face block's `forward`. The branches are built around the blocks' own
# modules: the converted model holds no parameter of its own.

# %%
VOCAB, WIDTH, DEPTH, HEADS = 101, 64, 4, 4
SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)

configs = {
    "GPT-2": (
        transformers.GPT2LMHeadModel,
        transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=WIDTH, n_layer=DEPTH, n_head=HEADS, **SPECIAL),
    ),
    "LLaMA": (
        transformers.LlamaForCausalLM,
        transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=WIDTH,
            intermediate_size=2 * WIDTH,
            num_hidden_layers=DEPTH,
            num_attention_heads=HEADS,
            num_key_value_heads=2,  # grouped-query attention: two query heads per key/value head
            max_position_embeddings=64,
            **SPECIAL,
        ),
    ),
}
hf_models, converted = {}, {}
for name, (model_class, config) in configs.items():
    torch.manual_seed(0)
    hf_models[name] = model_class(config).to(torch.float64).eval()
    converted[name] = from_transformers(hf_models[name]).eval()
    n_params = sum(p.numel() for p in hf_models[name].parameters())
    print(f"{name}: {type(hf_models[name]).__name__}, {n_params:,} parameters -> {type(converted[name]).__name__}")
    print(f"  encoder: {converted[name].encoder.extra_repr()}")
    assert isinstance(converted[name], ContinuousTransformersModel)
    # Shared, not copied: the converted model's parameters are the Hugging Face model's own tensors.
    assert {id(p) for p in converted[name].parameters()} == {id(p) for p in hf_models[name].parameters()}
    assert converted[name].encoder.field.depth == DEPTH

# %% [markdown]
# **Same logits, with padding.** A batch of three sequences of 12, 8 and 5 real tokens, padded to 12 on the right,
# then on the left; Hugging Face's `attention_mask` (1 at real tokens) goes to both models unchanged. Every position
# is compared, padded ones included: a decoder query at a left-padded position sees no real key, and both models
# give it zero attention weights (Hugging Face's default `sdpa` attention in transformers 5, through torch's
# `scaled_dot_product_attention`; the library computes the same explicitly). Older transformers releases give such
# queries other values, so there only the positions that see a real key agree.

# %%
TOKENS = 12
lengths = torch.tensor([12, 8, 5])
ids = torch.randint(3, VOCAB, (len(lengths), TOKENS), generator=torch.Generator().manual_seed(0))
positions = torch.arange(TOKENS)
masks = {
    "right": positions < lengths[:, None],  # True at real tokens
    "left": positions >= TOKENS - lengths[:, None],
}

for name in configs:
    for side, real in masks.items():
        batch = ids.masked_fill(~real, SPECIAL["pad_token_id"])
        with torch.no_grad():
            expected = hf_models[name](input_ids=batch, attention_mask=real.long()).logits
            got = converted[name](batch, real.long())
        error = (got - expected).abs().max().item()
        print(
            f"{name:5s} {side:5s} padding: max |logits(ODE) - logits(HF)| = {error:.2g} over {real.numel()} "
            f"positions (largest |logit| {expected.abs().max().item():.2g})"
        )
        assert got.dtype == torch.float64 and error <= 1e-10

# %% [markdown]
# **Same hidden states, block by block.** `ContinuousDepth` returns only $x(L)$, but `neuralode_tf.solve` gives
# the state at every time asked for. A forward pre-hook on `encoder` catches $x(0)$ and the per-batch conditioning
# (the padding mask; LLaMA's rotary angles), which the forward binds to the field's attention and leaves bound;
# then `solve(field, x0, [0, 1, ..., L], method="lie_trotter", step_size=1)` returns the state after each block.
# Hugging Face's `output_hidden_states=True` returns the same: the embedding and the output of each block, the
# last one after the final norm.

# %%
real = masks["right"]
batch = ids.masked_fill(~real, SPECIAL["pad_token_id"])
captured = {}


def catch_initial_state(module, args, kwargs):
    captured.update(x0=args[0], conditioning=kwargs)


for name in configs:
    model = converted[name]
    hook = model.encoder.register_forward_pre_hook(catch_initial_state, with_kwargs=True)
    with torch.no_grad():
        model(batch, real.long())
        states = solve(
            model.encoder.field, captured["x0"], list(range(DEPTH + 1)), method="lie_trotter", step_size=1.0
        ).ys
        hf_states = hf_models[name](input_ids=batch, attention_mask=real.long(), output_hidden_states=True)
        hf_states = hf_states.hidden_states
        final_norm = model.family.final_norm(model.base)
        ours = [*states[:-1], final_norm(states[-1])]
    hook.remove()
    errors = [(a - b).abs().max().item() for a, b in zip(ours, hf_states, strict=True)]
    print(
        f"{name}: conditioning {sorted(captured['conditioning'])}; max |x(m) - HF hidden state m| over "
        f"m = 0..{DEPTH}: {max(errors):.2g}"
    )
    assert len(hf_states) == DEPTH + 1 and max(errors) <= 1e-10

# %% [markdown]
# ## 2. The same weights, finer solvers
#
# The weights define the field; one Lie-Trotter step per block is only the coarsest way to integrate it.
# `set_solve_options(converted, method=..., step_size=...)` changes the solver of every `ContinuousDepth` in the
# model and keeps the weights (`step_size=1/k`: $k$ steps per block; every grid is aligned with the blocks, so a
# step never straddles two blocks' weights).
#
# **Trajectories.** Below, the flow of the field (rk4, 8 steps per block, states at every step) and the network's
# states after each block (the Lie-Trotter steps of size 1), for five tokens of the first sequence: each token's
# displacement from its embedding, $x(t) - x(0)$, so that every path starts at the origin, projected on the first
# two principal directions of the flow's displacements. The network jumps from block to block; the flow
# moves continuously, on a different path: the network is one coarse discretisation of its own ODE. The third
# panel measures how far apart they are after each block (the largest distance over the tokens, relative to the
# token's norm): the distance grows block by block, to about a sixth of the state's norm for GPT-2 and half of it
# for LLaMA.

# %%
FINE = 8  # rk4 steps per block of the plotted flow
TRACKED = [0, 3, 6, 9, 11]  # tokens of the first sequence
grid = [m / FINE for m in range(DEPTH * FINE + 1)]

paths, network, gaps = {}, {}, {}
for name in configs:
    model = converted[name]
    set_solve_options(model, method="rk4", step_size=1 / FINE)
    hook = model.encoder.register_forward_pre_hook(catch_initial_state, with_kwargs=True)
    with torch.no_grad():
        end = model.forward_features(batch, real.long())
        flow = solve(model.encoder.field, captured["x0"], grid, method="rk4", step_size=1 / FINE).ys
        steps = solve(model.encoder.field, captured["x0"], list(range(DEPTH + 1)), method="lie_trotter", step_size=1.0)
    hook.remove()
    set_solve_options(model, method="lie_trotter", step_size=1.0)  # back to the Hugging Face discretisation
    # The trajectory's last state is the one the ContinuousDepth returns with the same options.
    end_error = (model.family.final_norm(model.base)(flow[-1]) - end).abs().max().item()
    assert end_error <= 1e-12, end_error
    paths[name], network[name] = flow[:, 0, TRACKED], steps.ys[:, 0, TRACKED]  # (time, token, d)
    at_blocks = flow[::FINE, 0, TRACKED]
    gaps[name] = ((network[name] - at_blocks).norm(dim=-1) / at_blocks.norm(dim=-1)).amax(-1)
    print(
        f"{name}: flow on {len(grid)} grid times (last state = the encoder's, {end_error:.1g}); relative distance "
        "network - flow after blocks 1..4: " + ", ".join(f"{g:.2f}" for g in gaps[name][1:].tolist())
    )
    assert gaps[name][0] == 0 and (gaps[name][1:] > 0.05).all()
    assert (gaps[name][1:] > gaps[name][:-1]).all()  # the network drifts further from its flow block by block

fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
for ax, name in zip(axes[:2], configs):
    start = paths[name][0]  # x(0) of each token: the plot shows the displacement x(t) - x(0)
    moved = (paths[name] - start).reshape(-1, WIDTH)
    _, _, v = torch.pca_lowrank(moved, q=2, center=False)
    flow_2d, net_2d = ((paths[name] - start) @ v).numpy(), ((network[name] - start) @ v).numpy()
    for j, token in enumerate(TRACKED):
        color = f"C{j}"
        ax.plot(flow_2d[:, j, 0], flow_2d[:, j, 1], "-", color=color, lw=1.5, label=f"token {token}")
        ax.plot(flow_2d[::FINE, j, 0], flow_2d[::FINE, j, 1], "o", color=color, ms=4)
        ax.plot(net_2d[:, j, 0], net_2d[:, j, 1], "x--", color=color, lw=0.8, ms=6)
    ax.set(title=f"{name}: flow (lines, dots at t = 1..4) vs network (x)", xlabel="PC 1", ylabel="PC 2")
    ax.legend(fontsize=7)
for name, style in zip(configs, ("o-", "s-")):
    axes[2].plot(range(DEPTH + 1), gaps[name].numpy(), style, label=name)
axes[2].set(
    xlabel="block m (depth-time t = m)",
    ylabel="max over tokens |x_net - x_flow| / |x_flow|",
    title="network vs its ODE after each block",
)
axes[2].legend()
axes[2].grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# **Orders of convergence.** The logits under each solver, against a reference (rk4 with 64 steps per block,
# its own error estimated by Richardson extrapolation from 32 steps per block), at the real positions of the
# padded batch, for step sizes $h = 1/k$. The error of a method of order $p$ behaves like $C h^p$; the fitted
# order is the slope of $\log(\text{error})$ against $\log h$ (least squares):
#
# * `lie_trotter` (Euler sub-steps) and `euler` on the summed field: first order;
# * `strang` with midpoint sub-steps: second order (with Euler sub-steps it would be first order, tutorial 01);
# * `rk4`: fourth order.
#
# LLaMA's RMSNorm computes in float32 whatever the model's dtype (Hugging Face's `LlamaRMSNorm` casts its input),
# so its logits carry rounding of order $10^{-7}$: the step sizes below keep every error well above it.

# %%
METHODS = {
    # label: (solve options, theoretical order, steps per block)
    "lie_trotter": (dict(method="lie_trotter"), 1, [2, 4, 8, 16, 32]),
    "euler": (dict(method="euler"), 1, [2, 4, 8, 16, 32]),
    "strang+midpoint": (dict(method="strang", substep="midpoint"), 2, [1, 2, 4, 8, 16]),
    "rk4": (dict(method="rk4"), 4, [1, 2, 4, 8]),
}
REF_STEPS = 64


def logits_under(model, **options):
    set_solve_options(model, **options)
    with torch.no_grad():
        return model(batch, real.long())


convergence = {}
for name in configs:
    model = converted[name]
    reference = logits_under(model, method="rk4", step_size=1 / REF_STEPS)
    half = logits_under(model, method="rk4", step_size=2 / REF_STEPS)
    ref_error = (half - reference)[real].abs().max().item() / 15  # rk4: halving h divides the error by 16
    network_gap = (logits_under(model, method="lie_trotter", step_size=1.0) - reference)[real].abs().max().item()
    rows = {}
    for label, (options, order, ks) in METHODS.items():
        errors = [(logits_under(model, step_size=1 / k, **options) - reference)[real].abs().max().item() for k in ks]
        slope = float(np.polyfit(np.log([1 / k for k in ks]), np.log(errors), 1)[0])
        rows[label] = dict(order=order, ks=ks, errors=errors, slope=slope)
    set_solve_options(model, method="lie_trotter", step_size=1.0)
    convergence[name] = dict(rows=rows, ref_error=ref_error, network_gap=network_gap)
    print(
        f"{name}: reference error ≈ {ref_error:.1g}; the network (1 Lie-Trotter step per block) is "
        f"{network_gap:.2g} from the flow in the logits"
    )
    print(f"  {'method':16s} {'order':>5s} {'fitted':>6s}  errors at k = steps per block")
    for label, r in rows.items():
        errors = ", ".join(f"k={k}: {e:.1e}" for k, e in zip(r["ks"], r["errors"]))
        print(f"  {label:16s} {r['order']:5d} {r['slope']:6.2f}  {errors}")
    for label, r in rows.items():
        assert abs(r["slope"] - r["order"]) <= 0.3, (name, label, r["slope"])
        assert all(a > b for a, b in zip(r["errors"], r["errors"][1:])), (name, label)
    assert ref_error < 0.01 * min(r["errors"][-1] for r in rows.values())  # the reference is good enough
    assert network_gap > 100 * rows["rk4"]["errors"][-1]

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, name in zip(axes, configs):
    for i, (label, r) in enumerate(convergence[name]["rows"].items()):
        h = 1 / np.array(r["ks"])
        ax.loglog(h, r["errors"], "o-", color=f"C{i}", label=f"{label} (order {r['order']}, fitted {r['slope']:.2f})")
        ax.loglog(h, r["errors"][-1] * (h / h[-1]) ** r["order"], ":", color=f"C{i}", lw=0.8)
    ax.set(xlabel="step size h (1 / steps per block)", title=f"{name}: logit error against the flow")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
axes[0].set_ylabel("max |logits - reference|")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Training an OT-Transformer language model, and sampling from it
#
# The training preset `nanogpt_tweets_char` is the reduced setting of Kan et al.'s (2025) language-model experiment on
# the characters of the tweets corpus that ships with the package (3.6M training and 0.4M validation characters,
# split contiguously as nanoGPT does). Its variant `ot` is the OT-Transformer: a `CausalLM` whose two blocks
# (width 80, 2 heads, their inner residuals, no LayerNorms) are composed into **one** field on $[0, 1]$,
# integrated with 5 Euler steps, and trained with the transport cost $\frac{\lambda}{2}\,\mathrm{mean}\,e(1)$,
# $\lambda = 1$ (the kinetic energy of the tokens' motion, Kan et al. eq. 8).
#
# `train(TrainConfig("nanogpt_tweets_char", ...))` runs the preset (`neuralode-tf train nanogpt_tweets_char --set
# model.variant=ot` from the command line): 3 epochs of 100 AdamW steps of 32 windows of 64 characters (9 epochs
# with `NEURALODE_TF_FULL=1`), validated after each epoch on the first 512 windows of the validation text. We
# raise the learning rate from the preset's 2e-3 to 1e-2 (`--set lr=0.01`): at 2e-3 the OT model without norms
# barely leaves the unigram level in 300 steps (the recordings in `experiments/language_models/README.md`; a
# probe there found the OT model learns faster at 1e-2).
#
# **Baselines**, computed from the corpus: the entropy of the training text's character frequencies (the loss of
# the best context-free model *of the training text*), the cross-entropy of the validation text under those
# frequencies, and under the training text's character bigrams (the next character given only the one before),
# both with add-one smoothing. Each counts the same validation targets as the validation loss.

# %%
EPOCHS = 9 if NB.full else 3
config = TrainConfig(
    "nanogpt_tweets_char",
    epochs=EPOCHS,
    lr=1e-2,
    seed=0,
    out_dir=str(NB.work / "ot"),
    progress=False,
    model={"variant": "ot"},
)
t_train = time.perf_counter()
result = train(config)
train_seconds = time.perf_counter() - t_train

built = build_setup(config)
model = built.model
model.load_state_dict(load_checkpoint(Path(config.out_dir) / "checkpoint.pt")["model"])
model.eval()
vocab, train_split, val_split = built.data.vocab, built.data.train, built.data.test
print(built.data.description)
print(f"{type(model).__name__}, {result['parameters']:,} parameters; encoder: {model.encoder.extra_repr()}")

# The baselines, from the training text's counts, on the validation targets (every token of the tiled
# validation windows but the first).
V = train_split.vocab_size
train_tokens = np.asarray(train_split.tokens)
val_tokens = np.asarray(val_split.tokens[: len(val_split) * val_split.block_size + 1])
unigram = np.bincount(train_tokens, minlength=V).astype(float)
frequencies = unigram[unigram > 0] / unigram.sum()
unigram_entropy = float(-(frequencies * np.log(frequencies)).sum())
unigram_ce = float(-np.log(((unigram + 1) / (unigram.sum() + V))[val_tokens[1:]]).mean())
bigram = np.zeros((V, V))
np.add.at(bigram, (train_tokens[:-1], train_tokens[1:]), 1)
bigram_ce = float(-np.log(((bigram + 1) / (bigram.sum(1, keepdims=True) + V))[val_tokens[:-1], val_tokens[1:]]).mean())

val_loss, ppl = result["val_loss"], result["perplexity"]
print(f"{result['steps']} steps; validation loss {val_loss:.3g} nats, perplexity {ppl:.3g}")
print(f"  uniform over the {V} ids:                    {np.log(V):.3g} nats")
print(
    f"  unigram entropy of the training characters: {unigram_entropy:.3g} nats (perplexity {np.exp(unigram_entropy):.3g})"
)
print(f"  unigram cross-entropy on the validation:    {unigram_ce:.3g} nats")
print(f"  bigram cross-entropy on the validation:     {bigram_ce:.3g} nats (perplexity {np.exp(bigram_ce):.3g})")
assert len(val_tokens) - 1 == 512 * 64  # the 512 validation windows the loss is computed on
assert abs(ppl - np.exp(val_loss)) <= 1e-9 * ppl
assert val_loss < unigram_entropy < unigram_ce  # the model uses the context ...
assert val_loss < bigram_ce  # ... more than the previous character alone

# %%
# NBVAL_IGNORE_OUTPUT
print(f"training took {train_seconds:.0f} s ({result['steps']} steps)")

# %% [markdown]
# The training loss (the data term, without the transport cost) step by step, the validation loss after each
# epoch, and the baselines:

# %%
with open(Path(config.out_dir) / "metrics.csv", newline="") as handle:
    records = list(csv.DictReader(handle))
steps_axis = [int(r["step"]) for r in records]
val_points = [(int(r["step"]), float(r["val_loss"])) for r in records if r["val_loss"] != "nan"]
print("validation loss after each epoch: " + ", ".join(f"{loss:.3g}" for _, loss in val_points))
assert len(val_points) == EPOCHS and all(a > b for (_, a), (_, b) in zip(val_points, val_points[1:]))

fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(steps_axis, [float(r["loss"]) for r in records], lw=0.8, label="training loss (batch)")
ax.plot(*zip(*val_points), "o-", color="k", label="validation loss")
for value, label, style in (
    (unigram_ce, "unigram, validation", "--"),
    (unigram_entropy, "unigram entropy (training text)", "-."),
    (bigram_ce, "bigram, validation", ":"),
):
    ax.axhline(value, color="gray", ls=style, lw=1, label=label)
ax.set(xlabel="step", ylabel="cross-entropy (nats)", title="OT-Transformer on the tweets' characters", ylim=(2, 5.5))
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# **Sampling.** `CausalLM.generate(prompt, max_new_tokens, temperature, top_k, cache=..., generator=...)` draws each
# character from the softmax of the last position's logits divided by the temperature, restricted to the `top_k`
# most likely. With `cache=True` each new character runs the solve on that character alone and reads the earlier
# characters' keys and values from a cache (one entry per Euler step, stage and block: the field is evaluated on
# the same grid for every token); with `cache=False` every step recomputes the whole context. Both give the same
# logits up to rounding, so with the same generator seed they draw the same characters. Four samples from one
# prompt, within the model's context of 64 characters:

# %%
PROMPT, NEW, TEMPERATURE, TOP_K = "I love ", 57, 0.8, 10
prompt = torch.tensor([vocab.encode(PROMPT)] * 4)
samples, seconds = {}, {}
for cache in (True, False):
    start = time.perf_counter()
    samples[cache] = model.generate(
        prompt, NEW, TEMPERATURE, TOP_K, cache=cache, generator=torch.Generator().manual_seed(0)
    )
    seconds[cache] = time.perf_counter() - start
assert isinstance(model, CausalLM) and len(PROMPT) + NEW <= model.block_size
assert samples[True].shape == (4, len(PROMPT) + NEW)
assert torch.equal(samples[True], samples[False])
assert torch.equal(samples[True][:, : len(PROMPT)], prompt)
print(f"cached and uncached generation drew the same {NEW} characters in all 4 rows:")
for row in samples[True]:
    print("  " + repr("".join(vocab.decode(row))))

# %%
# NBVAL_IGNORE_OUTPUT
print(
    f"generation: {seconds[True]:.2f} s with the cache, {seconds[False]:.2f} s without "
    f"({seconds[False] / seconds[True]:.1f}x faster with it)"
)

# %% [markdown]
# A 170k-parameter model trained for a minute writes tweet-shaped nonsense: frequent words, spaces and
# punctuation in the right places. Its validation loss is below what the character frequencies alone and the
# previous character alone can do, so it uses more context than a bigram.
#
# ## Take-aways
#
# * `from_transformers(model)` reads a Hugging Face GPT-2 or LLaMA (also Mistral, Qwen2, GPT-NeoX, BERT and
#   RoBERTa) as a `ContinuousDepth` over $[0, L]$, one unit of depth-time per block, sharing the model's
#   parameters; the default solver computes the model's logits and hidden states exactly (here to 0 in float64).
# * The Hugging Face network is one coarse discretisation of its ODE; `set_solve_options` integrates the same
#   weights with any solver, and the solutions converge to the flow at the methods' orders (1 for Lie-Trotter and
#   Euler, 2 for Strang with midpoint sub-steps, 4 for rk4), away from the network.
# * `solve` gives the states along depth-time for plots and analysis; a forward pre-hook catches the encoder's
#   input and conditioning.
# * The OT-Transformer preset trains in a minute on CPU to below a bigram model's validation loss, and its
#   `generate` with the key/value cache draws the same tokens as recomputing the context, faster.
#
# References: Y. Lu et al., *Understanding and improving Transformer from a multi-particle dynamic system point of
# view*, 2019 (arXiv:1906.02762). Y. D. Zhong, T. Zhang, A. Chakraborty, B. Dey, *A neural ODE interpretation of
# Transformer layers*, 2022 (arXiv:2212.06011). K. Kan, X. Li, S. Osher, *OT-Transformer: a continuous-time
# transformer architecture with optimal transport regularization*, 2025 (arXiv:2501.18793; the language-model
# experiment is in the NeurIPS 2025 version, arXiv:2505.13499).

# %%
# NBVAL_IGNORE_OUTPUT
print(f"tutorial ran in {time.perf_counter() - NB.start:.0f} s")
