"""Property tests (Hypothesis) of ContinuousDepth and the model front-ends over their arguments.

The property: an input either runs, giving finite outputs of the right shape that match an exact reference where
there is one, or raises a documented error (``TypeError``, ``ValueError`` or
:class:`~neuralode_tf.numerics.SolveError`) whose message names an argument that was given a bad value; never a raw
``IndexError``, ``AttributeError`` or ``RuntimeError`` from inside. Each test knows which of its drawn values are
bad, so it knows which of the two must happen.

References, on a fixed grid: the outputs at real positions do not change, exactly, when the padded positions hold
huge values, and equal those of the unpadded sequence (up to rounding, as lengths change reduction sizes); a sample's
outputs do not depend on the rest of its batch; a timm ViT converted with the default settings gives its logits.

Not drawn: token ids outside ``[0, vocab_size)`` (each front-end's tests check the ``ValueError`` naming them);
and, as outside the documented preconditions, sequences without a real token, sets without a real point, timm
images of another size (timm asserts on them itself). Widths are tiny; with the default "ci" profile (25
derandomised examples per test) the file runs in about 10 s on a CPU; "thorough" (400) in about 100 s.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

from neuralode_tf import ContinuousDepth
from neuralode_tf.models import (
    FIELDS,
    PAD,
    Seq2Seq,
    SetTransformer,
    TextClassifier,
    TransEvolveClassifier,
    ViT,
    transformer_field,
)
from neuralode_tf.models.converters.timm import continuous_from_timm
from neuralode_tf.numerics import FIXED_GRID_METHODS, SolveError
from tests import _conditioned

DOCUMENTED = (TypeError, ValueError, SolveError)
SPLITTING = ("lie_trotter", "strang")
DIM, HEADS, VOCAB = 8, 2, 11


def outcome(call, bad: set[str]):
    """``call()`` when nothing drawn is bad; else ``None`` after checking that it raises a documented error whose
    message names one of the ``bad`` arguments."""
    event("refused" if bad else "ran")
    if not bad:
        return call()
    with pytest.raises(DOCUMENTED) as info:
        call()
    assert any(name in str(info.value) for name in bad), f"{info.typename}: {info.value} names none of {sorted(bad)}"
    return None


def step_problems(method: str, steps: object, step_size: object) -> set[str]:
    """The arguments ``solve`` refuses among ``steps`` and ``step_size`` (fixed-grid methods default to unit steps)."""
    if method not in FIXED_GRID_METHODS:
        return {"steps", "step_size"} if (steps, step_size) != (None, None) else set()
    if steps is not None and step_size is not None:
        return {"steps", "step_size"}
    bad = set()
    if steps is not None and not (isinstance(steps, int) and steps >= 1):
        bad.add("steps")
    if step_size is not None and not (math.isfinite(step_size) and step_size > 0):
        bad.add("step_size")
    return bad


def lengths_strategy(max_batch: int = 3, max_len: int = 5, least: int = 0):
    """``(n, lengths)``: a padded width and per-sample numbers of real (leading) positions, ``least`` or more."""
    return st.integers(max(1, least), max_len).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(least, n), min_size=1, max_size=max_batch))
    )


def drawer(data: st.DataObject, spoil: str | None):
    """``draw(name, good, bad)``: a value for argument ``name``, from ``bad`` if it is the one to ``spoil``."""

    def draw(name: str, good: list, bad: list):
        return data.draw(st.sampled_from(bad if spoil == name else good), label=name)

    return draw


def padding_strategy(max_batch: int = 3, max_len: int = 5):
    """``(B, n)`` padding patterns as lists, True at padding: each row padded at its end or anywhere."""

    def rows(n: int):
        at_end = st.integers(0, n).map(lambda k: [False] * k + [True] * (n - k))
        anywhere = st.lists(st.booleans(), min_size=n, max_size=n)
        return st.lists(st.one_of(at_end, anywhere), min_size=1, max_size=max_batch)

    return st.integers(1, max_len).flatmap(rows)


def right_padding(lengths: list[int], n: int, device) -> torch.Tensor:
    return (torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]).to(device)


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item() if a.numel() else 0.0


# --------------------------------------------------------------------------------------------
# ContinuousDepth over fields, times, methods, steps and conditioning
# --------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::neuralode_tf.numerics.CausalityWarning")  # decoders under dopri5
@pytest.mark.parametrize("spoil", [None, "t1", "method", "grid", "mask", "typo"])
@given(
    kind=st.sampled_from(_conditioned.KINDS),
    pattern=padding_strategy(),
    memory_padded=lengths_strategy(least=1),  # a memory all padding: tests/test_nn.py (zero attention weights)
    data=st.data(),
)
def test_continuous_depth_runs_or_names_the_bad_argument(kind, spoil, pattern, memory_padded, data, device):
    """Fields of every kind, with one argument (``spoil``) or none drawn from bad values, and padding at the end
    of a sequence or anywhere in it."""
    torch.manual_seed(0)
    (m, memory_lengths), batch, n = memory_padded, len(pattern), len(pattern[0])
    memory_lengths = (memory_lengths * batch)[:batch]
    field = _conditioned.build(kind, DIM, HEADS).to(device)
    splits = bool(getattr(field, "parts", None))
    draw = drawer(data, spoil)
    t1 = draw("t1", [2.0, 1.0, 3, 0.5], [0.0, -1.0, math.nan, math.inf, "2", True])
    adaptive = [] if kind.startswith("transevolve") else ["dopri5"]  # TransEvolve's rotations oscillate fast
    method = draw(
        "method",
        ["euler", "rk4", "midpoint", *SPLITTING[: 2 * splits], *adaptive],
        ["rk5", *SPLITTING[: 2 * (not splits)]],
    )
    fixed = method in FIXED_GRID_METHODS
    good_grids = [(None, None), (2, None), (None, 0.5), (3, None)] if fixed else [(None, None)]
    bad_grids = (
        [(0, None), (1.5, None), (None, -1.0), (None, math.nan), (2, 1.0)] if fixed else [(2, None), (None, 0.5)]
    )
    steps, step_size = draw("grid", good_grids, bad_grids)
    mask = draw("mask", ["bool", "bool", "none"], ["float", "short", "batch", "list"])
    typo = draw("typo", [None], ["key_padding_mak", "memroy", "adjiont"])
    bad = {"t1": {"t1"}, "method": {"method"}, "mask": {"key_padding_mask"}, "typo": {typo}}.get(spoil, set())
    bad |= step_problems(method, steps, step_size)
    assert bool(bad) == (spoil is not None)
    x, memory = torch.randn(batch, n, DIM).to(device), torch.randn(batch, m, DIM).to(device)
    pad, memory_pad = torch.tensor(pattern, device=device), right_padding(memory_lengths, m, device)
    given_pad = {
        "bool": pad,
        "none": None,
        "float": pad.float(),
        "short": pad[..., :-1],
        "batch": torch.cat([pad, pad]),
        "list": pad.tolist(),
    }[mask]
    solve_settings = {"adjiont": "backprop"} if typo == "adjiont" else {}
    if method == "dopri5":
        solve_settings.update(rtol=1e-3, atol=1e-3)
    misspelt = typo in ("key_padding_mak", "memroy")

    def run(x: torch.Tensor, memory: torch.Tensor, pad, memory_pad) -> torch.Tensor:
        model = ContinuousDepth(field, t1, method=method, steps=steps, step_size=step_size, **solve_settings)
        keywords = _conditioned.conditioning(kind, x, pad, memory, memory_pad)
        if misspelt:
            keywords[typo] = torch.zeros_like(x[..., 0], dtype=torch.bool)
        return model(x, **keywords)

    out = outcome(lambda: run(x, memory, given_pad, memory_pad), bad)
    if out is None:
        return
    assert out.shape == x.shape and torch.isfinite(out).all()
    if not fixed or mask == "none":
        return  # an adaptive method steps on the whole padded state
    # Large random values at padding. (Constant 1e3 tokens, all of them padding, made the evolving field's second
    # evaluation NaN on XLA:CPU but not on the CPU; not explained yet. NaN anywhere in the state stops the solve.)
    noise = 1e3 * torch.randn(x.shape).to(device)
    garbage = torch.where(pad[..., None], noise, x)
    garbage_memory = torch.where(memory_pad[..., None], -noise[:, :1].expand(-1, m, -1), memory)
    assert max_abs(run(garbage, garbage_memory, pad, memory_pad)[~pad], out[~pad]) == 0.0
    # The real tokens of the row with the most padding follow those of the sequence without its padding, unless
    # padding between real tokens changes the neighbourhoods an evolving-attention convolution reads.
    b = max(range(batch), key=lambda i: (not pad[i].all(), int(pad[i].sum())))
    real = ~pad[b]
    prefix = not bool(real[int(real.sum()) :].any())
    if real.any() and (prefix or "evolving" not in kind):
        alone = run(x[b : b + 1, real], memory[b : b + 1, : memory_lengths[b]], None, None)
        # float32 rounding: 1e-5 relative to the outputs' size (they reach 40 after a few rk4 steps)
        assert max_abs(alone[0], out[b, real]) <= 1e-5 * max(1.0, out[b, real].abs().max().item())


# --------------------------------------------------------------------------------------------
# Front-ends: ViT, timm conversion, Set Transformer on torch-geometric batches, text, seq2seq
# --------------------------------------------------------------------------------------------


def methods(draw, splits: bool, default: object = None, *, ode: bool = True) -> object:
    """A method for a field that has parts (``splits``) or not; bad: unknown, or a splitting method without parts.
    Without an ``ode`` (the ``"discrete"`` stack) every method is bad."""
    if not ode:
        return draw("method", [default], ["euler"])
    return draw("method", [default, "euler", "rk4", *SPLITTING[: 2 * splits]], ["rk5", *SPLITTING[: 2 * (not splits)]])


@pytest.mark.parametrize("spoil", [None, "field", "num_sets", "method", "images", "transport_cost"])
@given(batch=st.integers(1, 3), depth=st.integers(1, 2), data=st.data())
def test_vit_runs_or_names_the_bad_argument(spoil, batch, depth, data, device):
    torch.manual_seed(0)
    draw = drawer(data, spoil)
    field = draw("field", list(FIELDS), ["serial"])
    num_sets = draw("num_sets", [None, 1, depth], [0, 3, 1.5])
    method = methods(draw, field in ("split", "parallel", "evolving", "serial"), ode=field != "discrete")
    no_cost = field in ("evolving", "discrete")
    cost = draw("transport_cost", [None] if no_cost else [None, 0.01], [-1.0] + [0.01] * no_cost)
    images = draw("images", [(1, 4, 4)], [(3, 4, 4), (1, 4, 6), "unbatched", "uint8"])
    pixels = {"unbatched": torch.randn(1, 4, 4), "uint8": torch.zeros(batch, 1, 4, 4, dtype=torch.uint8)}
    x = pixels[images] if images in pixels else torch.randn(batch, *images)
    x = x.to(device)
    settings = dict(field=field, num_sets=num_sets, method=method, transport_cost=cost, mlp_hidden=2 * DIM)

    def build() -> ViT:
        return ViT(4, 2, 1, num_classes=3, dim=DIM, depth=depth, num_heads=HEADS, **settings).to(device)

    bad = {spoil} - {None}
    model = outcome(build, bad - {"images"})  # images are checked when the model is called
    logits = None if model is None else outcome(lambda: model(x), bad)
    if logits is None:
        return
    assert logits.shape == (batch, 3) and torch.isfinite(logits).all()
    assert max_abs(model(x[:1]), logits[:1]) <= 1e-5  # a sample's logits do not depend on the rest of its batch


@functools.cache
def tiny_timm_vit(device: str) -> torch.nn.Module:
    """A 2-block timm VisionTransformer (8x8 images, width 8), random weights, built once per device."""
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    kwargs = dict(img_size=8, patch_size=4, num_classes=5, embed_dim=DIM, depth=2, num_heads=HEADS, mlp_ratio=2.0)
    return VisionTransformer(**kwargs, init_values=0.1).eval().to(device)


@pytest.mark.parametrize("spoil", [None, "field", "method", "steps"])
@given(batch=st.integers(1, 3), data=st.data())
def test_timm_conversion_runs_or_names_the_bad_argument(spoil, batch, data, device):
    pytest.importorskip("timm")
    draw = drawer(data, spoil)
    vit = tiny_timm_vit(str(device))
    field = draw("field", ["split", "parallel", "composed", "node"], ["evolving", "serial"])
    method = methods(draw, field in ("split", "parallel"))
    steps = draw("steps", [None, 2], [0, -1])
    cost = data.draw(st.sampled_from([None, 0.01]), label="transport_cost")
    images = torch.randn(batch, 3, 8, 8).to(device)
    bad = {spoil} - {None}
    settings = dict(method=method, steps=steps, transport_cost=cost)
    converted = outcome(lambda: continuous_from_timm(vit, field, **settings), bad - {"steps"})  # solve checks steps
    logits = None if converted is None else outcome(lambda: converted(images), bad)
    if logits is None:
        return
    assert logits.shape == (batch, 5) and torch.isfinite(logits).all()
    if field == "split" and method in (None, "lie_trotter") and steps in (None, 2):  # one step per block
        assert max_abs(logits, vit(images)) <= 1e-5


@pytest.mark.parametrize("spoil", [None, "field", "method", "points"])
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), num_seeds=st.integers(1, 2), data=st.data())
def test_set_transformer_on_pyg_batches_runs_or_names_the_bad_argument(spoil, sizes, num_seeds, data, device):
    """Clouds of different sizes in one torch-geometric batch; each cloud's logits are those of the cloud alone."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data

    torch.manual_seed(0)
    draw = drawer(data, spoil)
    field = draw("field", ["split", "parallel", "composed", "node", "sab"], ["evolving", "serial"])
    method = methods(draw, field in ("split", "parallel", "sab", "evolving", "serial"))
    points = draw("points", ["pyg"], ["2-d coordinates", "dense without batch", "dense with a short mask", "dict"])
    clouds = [Data(pos=torch.randn(size, 2 if points == "2-d coordinates" else 3).to(device)) for size in sizes]
    dense = torch.randn(len(sizes), max(sizes), 3).to(device)
    inputs = {
        "dense without batch": (dense[0],),
        "dense with a short mask": (dense, torch.zeros(len(sizes), max(sizes) + 1, dtype=torch.bool).to(device)),
        "dict": ({"pos": clouds[0].pos},),
    }.get(points, (Batch.from_data_list(clouds),))
    encoder = transformer_field(DIM, 2, HEADS, mlp_hidden=2 * DIM) if field == "sab" else field
    settings = dict(dim=DIM, num_heads=HEADS, num_inducing=2, depth=2, num_seeds=num_seeds, field=encoder)
    bad = {spoil} - {None}
    names = {"points": {"points", "key_padding_mask"}}.get(spoil, bad)  # a short mask is named as key_padding_mask=

    def build() -> SetTransformer:
        return SetTransformer(4, **settings, method=method).eval().to(device)

    model = outcome(build, bad - {"points"})
    logits = None if model is None else outcome(lambda: model(*inputs), names)
    if logits is None:
        return
    assert logits.shape == (len(sizes), 4) and torch.isfinite(logits).all()
    for i, cloud in enumerate(clouds):  # padding invariance: each cloud alone gives its row
        assert max_abs(model(Batch.from_data_list([cloud]))[0], logits[i]) <= 1e-5


@pytest.mark.parametrize("spoil", [None, "field", "method", "pooling", "tokens", "key_padding_mask"])
@given(padded=lengths_strategy(max_len=6, least=1), data=st.data())
def test_text_classifiers_run_or_name_the_bad_argument(spoil, padded, data, device):
    """TextClassifier (every field) and TransEvolveClassifier; appending padding never changes the logits."""
    torch.manual_seed(0)
    transevolve = spoil not in ("field", "pooling") and data.draw(st.booleans(), label="transevolve")  # takes neither
    draw = drawer(data, spoil)
    (n, lengths) = padded
    field = draw("field", list(FIELDS), ["serial"])
    pooling = draw("pooling", ["mean", "max"], ["sum"])
    method = methods(
        draw,
        transevolve or field in ("split", "parallel", "evolving", "serial"),
        "lie_trotter" if transevolve else None,
        ode=transevolve or field != "discrete",
    )
    tokens = torch.randint(1, VOCAB, (len(lengths), n)).masked_fill(right_padding(lengths, n, "cpu"), PAD).to(device)
    tokens = draw("tokens", [tokens], [tokens.float(), tokens.bool()])
    mask = draw("key_padding_mask", [None, "bool", "int"], ["short", "list"])
    pad = tokens == PAD
    given_mask = {None: None, "bool": pad, "int": pad.long(), "short": pad[:, 1:], "list": pad.tolist()}[mask]
    if transevolve:
        settings = dict(dim=DIM, num_heads=HEADS, num_blocks=1, layers_per_block=2, mlp_hidden=2 * DIM)
        build = functools.partial(TransEvolveClassifier, VOCAB, 3, **settings, method=method)
    else:
        settings = dict(dim=DIM, num_heads=HEADS, depth=2, mlp_hidden=2 * DIM, field=field, pooling=pooling)
        build = functools.partial(TextClassifier, VOCAB, 3, **settings, method=method)
    bad = {spoil} - {None}
    model = outcome(lambda: build().eval().to(device), bad - {"tokens", "key_padding_mask"})
    logits = None if model is None else outcome(lambda: model(tokens, given_mask), bad)
    if logits is None:
        return
    assert logits.shape == (len(lengths), 3) and torch.isfinite(logits).all()
    longer = torch.cat([tokens, torch.full_like(tokens[:, :2], PAD)], dim=1)
    longer_mask = None if given_mask is None else torch.cat([given_mask, torch.ones_like(given_mask[:, :2])], dim=1)
    assert max_abs(model(longer, longer_mask), logits) <= 1e-5


@pytest.mark.parametrize("spoil", [None, "field", "method", "src", "tgt_key_padding_mask"])
@given(src_padded=lengths_strategy(least=1), tgt_padded=lengths_strategy(least=1), data=st.data())
def test_seq2seq_runs_or_names_the_bad_argument(spoil, src_padded, tgt_padded, data, device):
    """Teacher forcing and greedy decoding; padding appended to the source or the target changes no logit."""
    torch.manual_seed(0)
    draw = drawer(data, spoil)
    (s, src_lengths), (t, tgt_lengths) = src_padded, tgt_padded
    tgt_lengths = (tgt_lengths * len(src_lengths))[: len(src_lengths)]
    field = draw("field", ["split", "evolving"], ["node", "serial"])
    method = draw("method", ["lie_trotter", "euler", "rk4"], ["rk5"])
    src = torch.randint(1, VOCAB, (len(src_lengths), s)).masked_fill(right_padding(src_lengths, s, "cpu"), PAD)
    tgt = torch.randint(1, VOCAB, (len(tgt_lengths), t)).masked_fill(right_padding(tgt_lengths, t, "cpu"), PAD)
    src, tgt = draw("src", [src], [src.float()]).to(device), tgt.to(device)
    mask = draw("tgt_key_padding_mask", [None, "bool"], ["short", "list"])
    pad = tgt == PAD
    tgt_mask = {None: None, "bool": pad, "short": pad[:, 1:], "list": pad.tolist()}[mask]
    settings = dict(dim=DIM, num_heads=HEADS, encoder_depth=1, decoder_depth=2, mlp_hidden=2 * DIM)
    bad = {spoil} - {None}
    model = outcome(
        lambda: Seq2Seq(VOCAB, **settings, field=field, method=method).eval().to(device), bad & {"field", "method"}
    )
    logits = None if model is None else outcome(lambda: model(src, tgt, tgt_key_padding_mask=tgt_mask), bad)
    if logits is None:
        return
    assert logits.shape == (len(src_lengths), t, VOCAB) and torch.isfinite(logits).all()
    padded_src = torch.cat([src, torch.full_like(src[:, :1], PAD)], dim=1)
    padded_tgt = torch.cat([tgt, torch.full_like(tgt[:, :1], PAD)], dim=1)
    padded_mask = None if tgt_mask is None else torch.cat([tgt_mask, torch.ones_like(tgt_mask[:, :1])], dim=1)
    assert max_abs(model(padded_src, padded_tgt, tgt_key_padding_mask=padded_mask)[:, :t], logits) <= 1e-5
    decoded = model.greedy_decode(src, max_len=3, bos=1, eos=2)
    assert decoded.shape[0] == len(src_lengths) and decoded.shape[1] <= 3 and decoded.dtype == torch.long
