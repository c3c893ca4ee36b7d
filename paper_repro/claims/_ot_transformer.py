"""Kan et al. (2025), OT-Transformer: the exact claims, recomputed from the library.

The paper presets (``ot_mnist``, ``ot_catsdogs``, ``ot_imdb``, ``ot_modelnet40``) build their models
on a one-example placeholder of the real dataset's shape, so nothing is downloaded or read.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from neuralode_tf.data import Splits, TensorSplit, TokenWindows, Vocabulary
from neuralode_tf.train import OT_VARIANTS, PRESETS

UNUSED_FEED_FORWARD = 33_280
"""``FeedForward(128, 128)``, which Sinkformers' MNIST ``ViT_only_Att`` builds and never calls; the paper's
93k (``sum(numel)`` of that model) includes it."""


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


@cache
def paper_shapes() -> dict[str, Splits]:
    """Placeholders of MNIST, Kaggle's Cats & Dogs, IMDb (Sinkformers' 16,000 tokens) and ModelNet40."""
    return {
        "ot_mnist": placeholder("mnist", "image", torch.zeros(1, 1, 28, 28), 10),
        "ot_catsdogs": placeholder("catsdogs", "image", torch.zeros(1, 3, 224, 224), 2),
        "ot_imdb": placeholder(
            "imdb", "tokens", torch.zeros(1, 4, dtype=torch.long), 2, Vocabulary(f"w{i}" for i in range(15_998))
        ),
        "ot_modelnet40": placeholder("modelnet40_h5", "points", None, 40),
    }


def copy_weights(target: torch.nn.Module, source: torch.nn.Module) -> None:
    """Copy parameters in registration order (the models differ only in how the encoder is wrapped)."""
    pairs = list(zip(target.named_parameters(), source.named_parameters(), strict=True))
    with torch.no_grad():
        for (name, p), (other, q) in pairs:
            if p.shape != q.shape or name.rsplit(".", 1)[-1] != other.rsplit(".", 1)[-1]:
                raise ValueError(f"cannot copy {other} into {name}")
            p.copy_(q)


def one_step_gaps(dim: int = 64, seed: int = 0) -> dict[str, float]:
    """max |Δ logits| between one Euler step on [0, 1] of each MNIST continuous model and the discrete
    block with the same weights, in float64 (§3)."""
    torch.manual_seed(seed)
    images = torch.rand(8, 1, 28, 28, dtype=torch.float64)
    shape, variants, build = paper_shapes()["ot_mnist"], OT_VARIANTS["ot_mnist"], PRESETS["ot_mnist"].build_model
    discrete = build(shape, {**variants["baseline"], "dim": dim}).double().eval()
    one_step = {
        "OT, no inner residuals, λ = 0": {**variants["ot_unregularized"], "steps": 1, "inner_residuals": False},
        "OT, no inner residuals, λ = 0.01": {**variants["ot"], "steps": 1, "inner_residuals": False},
        "OT, inner residuals (presets)": {**variants["ot"], "steps": 1},
        "N-ODE Transformer (eq. 12)": {**variants["ot"], "field": "node", "steps": 1},
    }
    gaps = {}
    for label, overrides in one_step.items():
        model = build(shape, {**overrides, "dim": dim}).double().eval()
        copy_weights(model, discrete)
        with torch.no_grad():
            gaps[label] = (model(images) - discrete(images)).abs().max().item()
    return gaps


def _identical(gap: float) -> str:
    return "identical" if gap == 0.0 else f"max |Δ logits| = {gap:.2g}"


def one_euler_step_is_the_block() -> str:
    gaps = one_step_gaps()
    return _identical(max(gaps["OT, no inner residuals, λ = 0"], gaps["OT, no inner residuals, λ = 0.01"]))


def mnist_node_is_ot() -> str:
    """Eq. 12 on a block without a fully-connected layer: the N-ODE Transformer's logits are the OT's."""
    torch.manual_seed(0)
    images = torch.rand(4, 1, 28, 28)
    shape, variants, build = paper_shapes()["ot_mnist"], OT_VARIANTS["ot_mnist"], PRESETS["ot_mnist"].build_model
    ot = build(shape, variants["ot"]).eval()
    node = build(shape, {**variants["ot"], "field": "node"}).eval()
    copy_weights(node, ot)
    with torch.no_grad():
        return _identical((node(images) - ot(images)).abs().max().item())


def counted(preset: str, model: torch.nn.Module) -> int:
    """What the paper counts: the whole model for MNIST, else the blocks (for ModelNet40 the MABs)."""
    if preset == "ot_mnist":
        return sum(p.numel() for p in model.parameters())
    return sum(p.numel() for name, p in model.encoder.named_parameters() if not name.endswith("inducing"))


@cache
def parameter_counts(preset: str) -> dict[str, int]:
    """The paper's count of each variant of a paper preset, built on the real data's shape."""
    data = paper_shapes()[preset]
    return {v: counted(preset, PRESETS[preset].build_model(data, s)) for v, s in OT_VARIANTS[preset].items()}


def _printed(preset: str, paper_unit: str) -> str:
    counts = parameter_counts(preset)
    continuous = {n for v, n in counts.items() if v != "baseline"}
    if len(continuous) != 1:
        return f"continuous variants differ: {sorted(continuous)}"
    base = counts["baseline"] + (UNUSED_FEED_FORWARD if preset == "ot_mnist" else 0)
    render = (lambda n: f"{n / 1e3:.0f}k") if paper_unit == "k" else (lambda n: f"{n / 1e6:.2f}M")
    return f"{render(base)} / {render(continuous.pop())}"


def modelnet40_parameters() -> str:
    return _printed("ot_modelnet40", "M")


def mnist_parameters() -> str:
    return _printed("ot_mnist", "k")


def catsdogs_parameters() -> str:
    return _printed("ot_catsdogs", "M")


def imdb_parameters() -> str:
    return _printed("ot_imdb", "M")


def _scientific(x: float) -> str:
    """``5e-4`` as the paper prints 5×10⁻⁴."""
    mantissa, exponent = f"{x:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _costs(preset: str) -> str:
    """The transport costs λ of the OT-Transformer and (where the task has it) the N-ODE Transformer."""
    variants = OT_VARIANTS[preset]
    text = f"λ {variants['ot']['transport_cost']:g}"
    if "node_regularized" in variants:
        text += f" (OT), {variants['node_regularized']['transport_cost']:g} (N-ODE)"
    if "ot_slight" in variants:
        text += f", {variants['ot_slight']['transport_cost']:g} (†)"
    return text


def _settings(preset: str, size: str, sizes: tuple[object, object]) -> str:
    """Appendix B's settings of a paper preset, in the ledger's wording."""
    config, variants = PRESETS[preset].config, OT_VARIANTS[preset]
    steps = {s["steps"] for v, s in variants.items() if v != "baseline"}
    optimiser = "Adam" if config.weight_decay == 0 and config.warmup_steps == 0 else "AdamW with warm-up"
    decays = " and ".join(str(e) for e in config.lr_decay_epochs)
    schedule = f", /10 after epoch{'s' * (len(config.lr_decay_epochs) > 1)} {decays}" if decays else ""
    clip = "no clipping" if config.grad_clip == 0 else f"clipping at {config.grad_clip:g}"
    return (
        f"{size} {sizes[0]} vs {sizes[1]}; {'/'.join(map(str, sorted(steps)))} Euler steps; {_costs(preset)}; {optimiser}, "
        f"{config.epochs} epochs, batch {config.batch_size}, lr {_scientific(config.lr)}{schedule}; {clip}"
    )


def _sizes(preset: str, key: str) -> tuple[object, object]:
    return OT_VARIANTS[preset]["baseline"][key], OT_VARIANTS[preset]["ot"][key]


def modelnet40_settings() -> str:
    points = PRESETS["ot_modelnet40"].dataset_options["num_points"]
    return _settings("ot_modelnet40", "ISAB width", _sizes("ot_modelnet40", "dim")) + f"; {points} points"


def mnist_settings() -> str:
    return _settings("ot_mnist", "d = k", _sizes("ot_mnist", "dim"))


def catsdogs_settings() -> str:
    return _settings("ot_catsdogs", "blocks", _sizes("ot_catsdogs", "depth"))


def imdb_settings() -> str:
    return _settings("ot_imdb", "blocks", _sizes("ot_imdb", "depth"))


def nanogpt_parameter_reduction() -> str:
    """The share of parameters that the released OT-Transformer's Shakespeare-char model (5 composed blocks, d = 320)
    saves against nanoGPT's (6 blocks, d = 384): the models of the presets ``ot_nanogpt_shakespeare_char`` and
    ``nanogpt_shakespeare_char``, counted as nanoGPT prints them (65 characters, position embeddings left out)."""
    windows = TokenWindows(np.zeros(257, dtype=np.int64), 256, 65, windows=1)
    shape = Splits("shakespeare_char", "lm", windows, windows, "shape-only placeholder")
    counts = []
    for preset in ("nanogpt_shakespeare_char", "ot_nanogpt_shakespeare_char"):
        with torch.device("meta"):
            model = PRESETS[preset].build_model(shape, {})
        counts.append(sum(p.numel() for p in model.parameters()) - model.pos_embed.weight.numel())
    return f"{1 - counts[1] / counts[0]:.0%}"
