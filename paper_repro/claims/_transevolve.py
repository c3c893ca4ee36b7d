"""Dutta et al. (2021), TransEvolve: the exact claims, recomputed from the library.

Identities are checked on small float64 instances built here (a few milliseconds each). Paths that
evaluate the same formula in the same order must agree to the last bit (``identical`` means a
max-abs difference of 0); the fast attention paths sum in another order than eq. 9 as written, so
for them ``identical`` means a max-abs difference of at most :data:`ROUNDING` relative to the
output's size, far below any wrong term (of the order of the output itself). The Table 2 counts are
taken from ``_transevolve_counts.table2_parameter_counts``, which builds the models on the
``meta`` device: nothing is allocated. The speed claims (Table 4, §8; timings against the paper's own
baselines) are judged on the per-round step times that ``benchmarks/transevolve.py`` stores in
:data:`SPEED_RESULTS` (see :func:`speed_samples_name`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path

import torch

from neuralode_tf import ContinuousDepth
from neuralode_tf.fields.transevolve import (
    RandomFeedForward,
    TransEvolveAttention,
    TransEvolveDecoderField,
    TransEvolveField,
    depth_signal,
)
from neuralode_tf.models import TRANSEVOLVE_VARIANTS, TextClassifier, TransEvolveClassifier

from ._ledger import ROOT, LedgerError
from ._transevolve_counts import table2_parameter_counts

ROUNDING = 1e-12
"""Largest max-abs difference, relative to the reference's largest entry, that float64 rounding explains."""

BATCH, TOKENS, DIM, HEADS, DEPTH = 2, 12, 32, 4, 3


def _identical(gap: float, scale: float = 0.0) -> str:
    """``identical`` for a max-abs difference of 0; with ``scale``, ``identical to float64 rounding`` for one
    within :data:`ROUNDING` of it."""
    if gap == 0.0:
        return "identical"
    if scale > 0.0 and gap <= ROUNDING * scale:
        return "identical to float64 rounding"
    return f"max |Δ| = {gap:.2g}"


def _tokens(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _padding() -> torch.Tensor:
    """Right padding in sample 0, left padding in sample 1."""
    pad = torch.zeros(BATCH, TOKENS, dtype=torch.bool)
    pad[0, 9:] = True
    pad[1, :3] = True
    return pad


# Figure 1 and eqs. 5, 12-13: the block as Lie-Trotter Euler steps ----------------------------------


def _encoder_block_gap(feed_forward: str, mode: str) -> float:
    """max |Δ| between one Lie-Trotter Euler step per layer of a block and the loop of Figure 1(c)."""
    torch.manual_seed(0)
    field = TransEvolveField(DIM, HEADS, DEPTH, feed_forward=feed_forward, mode=mode).double()
    x0, pad = _tokens(1, BATCH, TOKENS, DIM), _padding()
    with torch.no_grad():
        solved = ContinuousDepth(field, t1=DEPTH, method="lie_trotter")(x0, block_input=x0, key_padding_mask=pad)
        field.attention.bind(block_input=x0, key_padding_mask=pad)
        x = x0
        for layer in range(DEPTH):
            t = torch.tensor(float(layer), dtype=torch.float64)
            x = x + field.attention(t, x)  # eq. 9: H^l = Attn(X^l) + X^l
            x = x + field.feed_forward.layers[layer](t, x)  # eq. 11 or 3: X^{l+1} = FF(H^l) + H^l
        field.attention.bind()
    return (solved - x).abs().max().item()


def block_is_euler_lie_trotter() -> str:
    gaps = [_encoder_block_gap(ff, mode) for ff in ("random", "full") for mode in ("fidelity", "factored", "fused")]
    return _identical(max(gaps))


def decoder_block_is_eq13() -> str:
    """One Lie-Trotter Euler step per layer of a decoder block against eq. 13 then eq. 11, layer by layer."""
    gaps = []
    for feed_forward in ("random", "full"):
        torch.manual_seed(0)
        field = TransEvolveDecoderField(DIM, HEADS, DEPTH, feed_forward=feed_forward).double()
        y0, memory = _tokens(1, BATCH, TOKENS, DIM), _tokens(2, BATCH, TOKENS + 3, DIM)
        tgt_pad, src_pad = _padding(), torch.zeros(BATCH, TOKENS + 3, dtype=torch.bool)
        src_pad[0, -4:] = True
        masks = dict(key_padding_mask=tgt_pad, memory=memory, memory_key_padding_mask=src_pad)
        with torch.no_grad():
            solved = ContinuousDepth(field, t1=DEPTH, method="lie_trotter")(y0, block_input=y0, **masks)
            field.self_attention.bind(block_input=y0, key_padding_mask=tgt_pad)
            field.cross_attention.bind(block_input=y0, **masks)
            y = y0
            for layer in range(DEPTH):
                t = torch.tensor(float(layer), dtype=torch.float64)
                y = y + field.self_attention(t, y)  # eq. 13, first line
                y = y + field.cross_attention(t, y)  # eq. 13, second line
                y = y + field.feed_forward.layers[layer](t, y)
            field.self_attention.bind()
            field.cross_attention.bind()
        gaps.append((solved - y).abs().max().item())
    return _identical(max(gaps))


# Table 1, §4: the attention's shapes, scale and evaluation paths --------------------------------------


def notation_dimensions() -> str:
    """d' = d (§7.1), T^l of d' entries and augmented projections of (d + d') x (d + d') (Table 1, eq. 6)."""
    failures = []
    for dim in (256, 512):  # the small and base versions, 8 heads (§7.1)
        with torch.device("meta"):
            attention = TransEvolveAttention(dim, 8, 6)
        signal = depth_signal(1.0, torch.ones(dim), 8)
        if signal.numel() != dim:
            failures.append(f"d = {dim}: T^l has {signal.numel()} entries")
        if tuple(attention.w_q.shape) != (2 * dim, 2 * dim) or tuple(attention.w_k.shape) != (2 * dim, 2 * dim):
            failures.append(f"d = {dim}: W'_q is {tuple(attention.w_q.shape)}")
    if failures:
        return "; ".join(failures)
    return "d′ = d; T^l has d′ entries; W′_q, W′_k are (d + d′) × (d + d′)"


def a0_scale() -> str:
    """The factor that multiplies ``Q_h K_hᵀ`` in ``A0``, as ``1/√(width/m)`` of the paper's widths."""
    torch.manual_seed(0)
    attention = TransEvolveAttention(DIM, HEADS, DEPTH, mode="fidelity").double()
    x0 = _tokens(1, 1, TOKENS, DIM)
    with torch.no_grad():
        state = attention.prepare(x0)
        q = (x0 @ attention.w_q[:, :DIM].T).unflatten(-1, (HEADS, -1)).transpose(-3, -2)
        k = (x0 @ attention.w_k[:, :DIM].T).unflatten(-1, (HEADS, -1)).transpose(-3, -2)
        raw = q @ k.transpose(-1, -2)
    candidates = {"1/√(d/m)": DIM / HEADS, "1/√((d + d′)/m)": 2 * DIM / HEADS}
    for text, width in candidates.items():
        if (state.scores - raw / math.sqrt(width)).abs().max().item() <= ROUNDING * raw.abs().max().item():
            return text
    return "neither 1/√(d/m) nor 1/√((d + d′)/m)"


def _attention_and_gradients(attention: TransEvolveAttention, mode: str, x0, x, t, pad) -> list[torch.Tensor]:
    attention.mode = mode
    x0, x = x0.clone().requires_grad_(), x.clone().requires_grad_()
    out = attention(t, x, attention.prepare(x0, pad))
    probe = _tokens(3, *out.shape)
    inputs = [x0, x, *attention.parameters()]
    grads = torch.autograd.grad((out * probe).sum(), inputs, allow_unused=True)
    return [out.detach(), *(torch.zeros_like(p) if g is None else g for p, g in zip(inputs, grads))]


def fast_paths_are_eq9() -> str:
    """The factored and fused paths against eq. 9 with every term of eq. 6 (``fidelity``): outputs and gradients."""
    worst = 0.0
    for causal in (False, True):
        torch.manual_seed(0)
        attention = TransEvolveAttention(DIM, HEADS, DEPTH, causal=causal).double()
        x0 = _tokens(1, BATCH, TOKENS, DIM)
        x = x0 + 0.3 * _tokens(2, BATCH, TOKENS, DIM)
        for t in (0.0, 1.5, 2.0):
            reference = _attention_and_gradients(attention, "fidelity", x0, x, t, _padding())
            for mode in ("factored", "fused"):
                fast = _attention_and_gradients(attention, mode, x0, x, t, _padding())
                for a, b in zip(fast, reference):
                    scale = b.abs().max().item()
                    if scale > 0:
                        worst = max(worst, (a - b).abs().max().item() / scale)
    return _identical(worst, 1.0)


# Eqs. 7 and 10: the depth vector and the random rotations --------------------------------------------


def _first_match(value: torch.Tensor, candidates: dict[str, Callable[[], torch.Tensor]]) -> str:
    for text, build in candidates.items():
        expected = build()
        if expected.shape == value.shape and (value - expected).abs().max().item() <= ROUNDING:
            return text
    return "neither the paper's nor the official code's convention"


def depth_vector_convention() -> str:
    """Which formula the models' ``T(t)`` follows at their layers: eq. 7 as printed or the official code's.

    Layer ``k = 0 .. L-1`` of a block evaluates ``T`` at ``t = k``; eq. 7's layers are ``l = k + 1``.
    """
    dim, depth = 64, 6
    coeffs = torch.ones(dim, dtype=torch.float64)
    value = torch.stack([depth_signal(float(k), coeffs, 1).flatten() for k in range(depth)])
    paper_period = dim * depth / (2 * math.pi)  # P = d' L / (2π)

    def eq7() -> torch.Tensor:
        j, layer = torch.arange(1, dim // 2 + 1, dtype=torch.float64), torch.arange(1, depth + 1)[:, None]
        return torch.cat([(j * layer / paper_period).sin(), (j * layer / paper_period).cos()], dim=-1)

    def code() -> torch.Tensor:
        p, layer = torch.arange(dim // 2, dtype=torch.float64), torch.arange(depth)[:, None]
        return torch.cat([(math.pi * p * layer / 64).sin(), (math.pi * p * layer / 64).cos()], dim=-1)

    return _first_match(
        value,
        {
            "ω_j = j/P, P = d′L/(2π), j = 1..d′/2; layers l = 1..L": eq7,
            "ω_p = πp/64, p = 0..d′/2 − 1; layers l = 0..L − 1 (the official code's)": code,
        },
    )


def rotation_convention() -> str:
    """Which formula the randomFF expansion ``h U Σ V + β`` (``d → 4d``) follows: eq. 10 as printed or the code's.

    Both candidates use the layer's own Gaussian draws ``w`` (its buffers) and its ``Σ`` and ``β``; eq. 10's
    layers are ``l = k + 1`` for the models' layer ``k = 0 .. L-1``, and its column ``j = p + 1``.
    """
    dim, depth = 16, 3
    torch.manual_seed(0)
    projection = RandomFeedForward(dim).double().expand
    h = _tokens(1, 5, dim)
    u_draws, v_draws = projection.u_freqs, projection.v_freqs  # rows x columns p = 0 .. m/2 - 1

    def rotation(draws: torch.Tensor, size: int, angle: torch.Tensor) -> torch.Tensor:
        theta = angle[: draws.shape[1]] / size * draws  # angle: the column factors of θ, times m
        return torch.cat([theta.sin(), theta.cos()], dim=-1) / math.sqrt(size)

    def apply(angle: Callable[[int, torch.Tensor], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def build() -> torch.Tensor:
            outs = []
            for k in range(depth):
                factors = angle(k, torch.arange(2 * dim, dtype=torch.float64))
                u, v = rotation(u_draws, dim, factors), rotation(v_draws, 4 * dim, factors)
                outs.append((h @ u * projection.svals) @ v + projection.bias)
            return torch.stack(outs)

        return build

    with torch.no_grad():
        value = torch.stack([projection(h, float(k)) for k in range(depth)])
    return _first_match(
        value,
        {
            # eq. 10: θ_ij = w_ij j l / P with P = m L / (2π), i.e. (2π / (m L)) j l w_ij
            "1/√m; θ_ij = w_ij j l/P, P = mL/(2π), j = 1..m/2; layers l = 1..L": apply(
                lambda k, p: 2 * math.pi * (p + 1) * (k + 1) / depth
            ),
            # official TemporalProjection (up to its normalisation): θ_ip = (π k / m) p w_ip
            "1/√m; θ_ip = π k p w_ip/m, p = 0..m/2 − 1; layers k = 0..L − 1 (the official code's)": apply(
                lambda k, p: math.pi * k * p
            ),
        },
    )


def random_feed_forward_parameters() -> str:
    """§5: trainable parameters of one randomFF layer, O(d) when every width gives the same multiple of d."""
    multiples = set()
    for dim in (64, 128, 256, 512):
        with torch.device("meta"):
            layer = RandomFeedForward(dim)
        count = sum(p.numel() for p in layer.parameters() if p.requires_grad)
        multiples.add(count / dim)
    return "O(d)" if len(multiples) == 1 else f"not linear in d: {sorted(multiples)} d"


# Table 2 and §4, §8: parameter counts ---------------------------------------------------------------


@cache
def _table2() -> dict[str, int]:
    return table2_parameter_counts()


def _millions(model: str) -> str:
    return f"{round(_table2()[model] / 1e6)}M"


def transformer_base_parameters() -> str:
    return _millions("Transformer-base")


def random_ff_1_parameters() -> str:
    return _millions("randomFF-1")


def random_ff_2_parameters() -> str:
    return _millions("randomFF-2")


def full_ff_1_parameters() -> str:
    return _millions("fullFF-1")


def full_ff_2_parameters() -> str:
    return _millions("fullFF-2")


def full_ff_2_fewer_parameters() -> str:
    """How many fewer parameters fullFF-2 has than Transformer-base, in whole percent (§8: "10% lesser")."""
    counts = _table2()
    return f"{round(100 * (1 - counts['fullFF-2'] / counts['Transformer-base']))}%"


def listops_parameter_share() -> str:
    """§8: the small TransEvolve (d = 256, 8 heads) against the base Transformer encoder (d = 512, 6 layers)
    on ListOps (the 17 tokens of our generator's vocabulary, 10 classes): the largest share, in whole percent."""
    vocab, classes = 17, 10
    with torch.device("meta"):
        base = TextClassifier(vocab, classes, dim=512, num_heads=8, depth=6)
        small = [
            TransEvolveClassifier(vocab, classes, dim=256, num_heads=8, **v) for v in TRANSEVOLVE_VARIANTS.values()
        ]
    base_count = sum(p.numel() for p in base.parameters())
    return f"{round(100 * max(sum(p.numel() for p in m.parameters()) for m in small) / base_count)}%"


# Table 4 and §8: speed, from the benchmark's per-round step times -------------------------------------

SPEED_RESULTS = Path("benchmarks/results/transevolve_cpu.json")  # relative to the repository
SPEED_COMMAND = "OMP_NUM_THREADS=2 python -m benchmarks.transevolve"
SPEED_LENGTHS = (1024, 2048, 3072, 4096)  # Table 4's columns


def _step_milliseconds(competitor: str, n: int) -> list[float]:
    """Milliseconds of one training step of ``competitor`` at ``n`` tokens in each timed round of the benchmark."""
    path = ROOT / SPEED_RESULTS
    rows = {row["n"]: row for row in json.loads(path.read_text(encoding="utf-8"))["rows"]} if path.exists() else {}
    rounds = rows.get(n, {}).get("rounds", {})
    if competitor not in rounds:
        raise LedgerError(
            f"{SPEED_RESULTS} has no per-round times of {competitor!r} at n = {n}: "
            f"rerun `{SPEED_COMMAND}`, then `python -m paper_repro.claims --write`"
        )
    return [1000 * seconds for seconds in rounds[competitor]]


def speed_samples_name(slower: str, faster: str, n: int) -> str:
    """The samples function for "``faster`` is faster than ``slower`` at ``n`` tokens", e.g.
    ``fullff1_auto_faster_than_materialised_1024``: it returns ``(a, b)``, the per-round milliseconds of a
    training step of ``slower`` (a) and of ``faster`` (b), benchmark competitors (``"materialised"`` or
    ``"<variant> <mode>"``); "a beats b", higher is better, reads "``slower`` takes longer". For a cell judged as
    "no faster" (:data:`PARITY_NO_FASTER`), ``slower`` is the variant that the paper prints no faster: the name
    says what "agrees" would take."""
    slug = {name: name.lower().replace("-", "").replace(" ", "_") for name in (slower, faster)}
    return f"{slug[faster]}_faster_than_{slug[slower]}_{n}"


def _speed_samples(slower: str, faster: str, n: int) -> Callable[[], tuple[list[float], list[float]]]:
    def samples() -> tuple[list[float], list[float]]:
        return _step_milliseconds(slower, n), _step_milliseconds(faster, n)

    samples.__name__ = samples.__qualname__ = speed_samples_name(slower, faster, n)
    samples.__doc__ = f"Per-round step milliseconds of {slower} (a) and {faster} (b) at n = {n}."
    return samples


SPEED_BASELINE = "materialised"  # Table 4's Transformer in the benchmark: attention that builds the n × n weights

PARITY_NO_FASTER = {
    ("fullFF-2 auto", SPEED_BASELINE, 3072),
    ("randomFF-1 auto", "fullFF-1 auto", 1024),
    ("randomFF-2 auto", "fullFF-2 auto", 1024),
    ("fullFF-1 auto", "fullFF-2 auto", 4096),
    ("randomFF-1 auto", "randomFF-2 auto", 3072),
}
"""``(first, second, n)`` of the cells that print no speed-up (1.0×, or two equal ratios) where the ledger judges
"``first`` is no faster than ``second``" (``first``'s step takes longer, a = ``first``); the other parity cells read
"no slower", like the "faster" claims. The ledger's speed section says how the side is chosen."""


def _speed_comparison(slower: str, faster: str, n: int) -> tuple[str, str, int]:
    """``(slower, faster, n)`` of the claim "``faster`` is faster than ``slower``", turned round where its cell
    is judged as "no faster" (:data:`PARITY_NO_FASTER`)."""
    return (faster, slower, n) if (faster, slower, n) in PARITY_NO_FASTER else (slower, faster, n)


SPEED_COMPARISONS = [
    _speed_comparison(*pair)
    for n in SPEED_LENGTHS
    for pair in (
        # Table 4: every variant against the paper's baseline, with our path and with the paper's literal one
        *(
            (SPEED_BASELINE, f"{variant} {mode}", n)
            for variant in TRANSEVOLVE_VARIANTS
            for mode in ("auto", "fidelity")
        ),
        # §8: randomFF runs faster than fullFF; one block runs faster than two
        *((f"fullFF-{blocks} auto", f"randomFF-{blocks} auto", n) for blocks in (1, 2)),
        *((f"{ff}-2 auto", f"{ff}-1 auto", n) for ff in ("fullFF", "randomFF")),
    )
]
"""``(slower, faster, n)`` of every speed claim of the ledger, each against the paper's own baseline (Table 4: the
Transformer; §8: the other variant); each has its samples function here, named by :func:`speed_samples_name`.
Comparisons with fused SDPA (``"standard"``), which the paper did not time, stay in the benchmark's results."""

globals().update({speed_samples_name(*pair): _speed_samples(*pair) for pair in SPEED_COMPARISONS})
