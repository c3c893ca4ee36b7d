"""CausalLM: cached decoding equals recomputation, every fixed-grid solve is exactly causal, the OT reading is the
released code's, and the registered GPTs have nanoGPT's sizes (neuralode_tf.models.frontends.causal_lm)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import neuralode_tf.models.frontends.causal_lm as causal_lm_module
from neuralode_tf import ContinuousDepth, regularization
from neuralode_tf.fields import ComposedField, KineticEnergy, as_field
from neuralode_tf.models import CausalLM, create_model, model_config
from neuralode_tf.nn import AttentionBranch, KVCache, MLPBranch
from neuralode_tf.numerics import FIXED_GRID_METHODS, CausalityWarning

F64 = torch.float64
VOCAB, BLOCK = 23, 12
SPLITTING = ("lie_trotter", "strang")


def _model(device: torch.device, dtype: torch.dtype = F64, scale: float = 0.2, **settings) -> CausalLM:
    """A small CausalLM with weights ``N(0, scale²)``, so that the logits are of order 1 (GPT-2's 0.02 makes them
    tiny, and a difference tiny with them)."""
    torch.manual_seed(0)
    model = CausalLM(VOCAB, 16, 2, 2, block_size=BLOCK, **settings)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim > 1:
                parameter.normal_(0, scale)
    return model.to(device, dtype).eval()


def _tokens(device: torch.device, n: int = BLOCK, batch: int = 3) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, n), generator=torch.Generator().manual_seed(1)).to(device)


def _incremental(model: CausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """The logits of ``tokens`` decoded through a KVCache: a prefix of 4, one token, 3 at once, then one at a time."""
    cache = KVCache()
    cuts = [0, 4, 5, 8, *range(9, tokens.shape[1] + 1)]
    with torch.no_grad():
        return torch.cat([model(tokens[:, a:b], kv_cache=cache) for a, b in zip(cuts[:-1], cuts[1:])], dim=1)


_CACHED = {
    "split lie_trotter": dict(field="split"),
    "split strang": dict(field="split", method="strang", steps=3),
    "split euler": dict(field="split", method="euler", steps=3),
    "split midpoint": dict(field="split", method="midpoint", steps=2),
    "split rk4 shared, rotary": dict(field="split", method="rk4", steps=2, num_sets=1, positions="rotary"),
    "parallel euler": dict(field="parallel"),
    "parallel rk4": dict(field="parallel", method="rk4", steps=3),
    "parallel strang": dict(field="parallel", method="strang", steps=2),
    "parallel lie_trotter, transport cost": dict(field="parallel", method="lie_trotter", transport_cost=1.0),
    "composed euler, transport cost": dict(field="composed", steps=5, transport_cost=1.0),
    "composed rk4, no norms": dict(field="composed", method="rk4", steps=2, norms=False),
    "composed midpoint, rotary": dict(field="composed", method="midpoint", steps=3, positions="rotary"),
    "node rk4": dict(field="node", method="rk4", steps=2),
    "discrete": dict(field="discrete"),
}


@pytest.mark.parametrize("settings", list(_CACHED))
def test_cached_decoding_gives_the_logits_of_recomputing_the_prefix(settings, device):
    """float64: max-abs <= 1e-12 on logits of order 1 (measured: about 5e-15)."""
    model = _model(device, **_CACHED[settings])
    tokens = _tokens(device)
    with torch.no_grad():
        whole = model(tokens)
    assert whole.abs().max().item() > 0.5
    assert (_incremental(model, tokens) - whole).abs().max().item() <= 1e-12


@pytest.mark.parametrize("settings", ["split rk4 shared, rotary", "composed euler, transport cost", "parallel strang"])
def test_cached_decoding_in_float32_is_within_32_ulps_of_the_logits(settings, device):
    """float32: max-abs <= 4e-6 · max |logits| (about 32 float32 ulps; measured: below 1e-6 · max |logits|)."""
    model = _model(device, torch.float32, **_CACHED[settings])
    tokens = _tokens(device)
    with torch.no_grad():
        whole = model(tokens)
    assert (_incremental(model, tokens) - whole).abs().max().item() <= 4e-6 * whole.abs().max().item()


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_generation_with_and_without_the_cache_agree_past_the_block_size(positions, device):
    """Sampling with the same generator draws the same tokens; past ``block_size`` the window slides (the cache is
    refilled from it), and a prompt longer than the block is cropped as nanoGPT crops it."""
    model = _model(device, field="split", method="rk4", steps=2, positions=positions)
    prompt = _tokens(device, 5, batch=2)
    runs = [
        model.generate(prompt, 2 * BLOCK, temperature=0.8, top_k=5, cache=cache, generator=torch.Generator(device))
        for cache in (True, False)
    ]
    assert runs[0].shape == (2, 5 + 2 * BLOCK) and torch.equal(runs[0][:, :5], prompt)
    assert torch.equal(runs[0], runs[1])
    long = _tokens(device, BLOCK + 3, batch=2)
    greedy = [model.generate(long, 4, top_k=1, cache=cache) for cache in (True, False)]
    assert torch.equal(greedy[0], greedy[1])
    with torch.no_grad():
        assert torch.equal(greedy[0][:, -4], model(long[:, -BLOCK:])[:, -1].argmax(-1))
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_generation_of_the_ot_model_works(device):
    """The released code's ``generate`` unpacks two values from a forward that returns three; this one samples."""
    model = create_model("ot_nanogpt_char_small", vocab_size=VOCAB).to(device).eval()
    out = model.generate(_tokens(device, 3, batch=2), 5, generator=torch.Generator(device).manual_seed(0))
    assert out.shape == (2, 8) and out.dtype == torch.long and bool(((out >= 0) & (out < VOCAB)).all())


def _fixed_grid(field: str) -> list[str]:
    """Every fixed-grid method (torchdiffeq's too) that takes ``field``: splitting only with parts."""
    methods = sorted(FIXED_GRID_METHODS)
    return [m for m in methods if field in ("split", "parallel", "evolving") or m not in SPLITTING]


_CAUSAL = [(f, m) for f in ("split", "parallel", "composed", "node", "evolving") for m in _fixed_grid(f)]


@pytest.mark.parametrize(("field", "method"), _CAUSAL, ids=[f"{f}-{m}" for f, m in _CAUSAL])
def test_every_fixed_grid_solve_is_exactly_causal(field, method, device):
    """``d logits[:, i] / d x0[:, j] == 0.0`` for every ``j > i``, ``x0`` the token embeddings."""
    model = _model(device, field=field, method=method, steps=2)
    embedded: dict[str, torch.Tensor] = {}

    def leaf(module: nn.Module, inputs: object, out: torch.Tensor) -> torch.Tensor:
        embedded["x"] = out.detach().requires_grad_()
        return embedded["x"]

    model.embed.register_forward_hook(leaf)
    tokens = _tokens(device, 6, batch=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchdiffeq's "Functional iteration did not converge" (implicit Adams)
        warnings.simplefilter("error", CausalityWarning)
        for i in range(5):
            (grad,) = torch.autograd.grad(model(tokens)[:, i].sum(), embedded["x"])
            assert grad[:, i + 1 :].abs().max().item() == 0.0, i
            assert grad[:, : i + 1].abs().max().item() > 0.0


def test_the_discrete_reading_is_exactly_causal(device):
    model = _model(device, field="discrete")
    tokens = _tokens(device, 6, batch=2)
    changed = tokens.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % VOCAB
    with torch.no_grad():
        assert torch.equal(model(tokens)[:, :3], model(changed)[:, :3])


def test_adaptive_solves_warn_and_refuse_the_cache(device):
    model = _model(device, method="dopri5", rtol=1e-5, atol=1e-5)
    prompt = _tokens(device, 3, batch=1)
    with pytest.warns(CausalityWarning, match="adaptive"):
        model(prompt)
    with pytest.raises(ValueError, match="method 'dopri5' is adaptive"):
        model.generate(prompt, 2)
    with pytest.warns(CausalityWarning):
        assert model.generate(prompt, 2, cache=False).shape == (1, 5)
    with pytest.raises(ValueError, match="iterates its corrector"):
        _model(device, method="implicit_adams", steps=2).generate(prompt, 1)


def test_evolving_attention_generates_without_the_cache_only(device):
    model = _model(device, field="evolving")
    prompt = _tokens(device, 3, batch=1)
    with pytest.raises(ValueError, match="field='evolving' has no KV cache"):
        model.generate(prompt, 2)
    assert model.generate(prompt, 2, cache=False).shape == (1, 5)


def test_padded_keys_never_reach_real_tokens(device):
    """Left padding: the logits at real positions do not depend on what the padded positions hold."""
    model = _model(device)
    tokens = _tokens(device, 6, batch=2)
    pad = torch.zeros(2, 6, dtype=torch.bool, device=device)
    pad[0, :2] = True
    other = tokens.clone()
    other[0, :2] = (other[0, :2] + 5) % VOCAB
    with torch.no_grad():
        a, b = model(tokens, key_padding_mask=pad), model(other, key_padding_mask=pad)
    assert (a - b)[~pad].abs().max().item() <= 1e-12 and (a - b)[pad].abs().max().item() > 0


def _released_ot_forward(model: CausalLM, tokens: torch.Tensor, steps: int, lmbda: float):
    """KelvinKan/OT-Transformer model.py's forward (cts=True), re-stated: ``x += dt · ln_f(blocks(x))`` for
    ``steps`` Euler steps on [0, 1], the squared arc ``Σ dt ||f||² / (B n d)``, and ``lm_head(x)``."""
    field = model.encoder.field.field
    assert isinstance(field, ComposedField)
    x = model.embed(tokens) + model.pos_embed(torch.arange(tokens.shape[1], device=tokens.device))
    dt, sq_arc = 1.0 / steps, torch.zeros((), dtype=x.dtype, device=x.device)
    for _ in range(steps):
        f = x.clone()
        for attention, mlp in field.blocks:
            f = f + attention(f)
            f = f + mlp(f)
        f = f if field.final_norm is None else field.final_norm(f)
        sq_arc = sq_arc + f.pow(2).sum() / f.numel() * dt
        x = x + dt * f
    return model.head(x), lmbda * sq_arc


@pytest.mark.parametrize("norms", [False, True])
def test_the_composed_reading_is_the_released_ot_code(norms, device):
    """The logits, and the regularization: the registered ``transport_cost = 2.0`` adds the released loss's
    ``lmbda * sq_arc`` with ``--lmbda=1.0`` (eq. 8's ``λ/2 · e(T)`` with ``λ = 2``)."""
    small = dict(dim=40, depth=2, num_heads=2, block_size=16, dropout=0.0, norms=norms)
    model = create_model("ot_nanogpt_char", vocab_size=VOCAB, **small).to(device, F64).eval()
    assert norms == any(isinstance(m, nn.LayerNorm) for m in model.modules())
    tokens = _tokens(device, 10)
    with torch.no_grad():
        logits = model(tokens)
        expected, code_cost = _released_ot_forward(model, tokens, steps=5, lmbda=1.0)
    assert (logits - expected).abs().max().item() <= 1e-12
    cost = regularization(model)
    assert cost.item() > 0 and abs(cost.item() - code_cost.item()) <= 1e-12 * code_cost.item()


def test_the_split_reading_is_the_discrete_gpt(device):
    split = create_model("nanogpt_char_small", vocab_size=VOCAB).to(device, F64).eval()
    discrete = create_model("nanogpt_char_small", vocab_size=VOCAB, field="discrete").to(device, F64).eval()
    for mine, theirs in zip(discrete.parameters(), split.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    tokens = _tokens(device, 10)
    with torch.no_grad():
        assert (split(tokens) - discrete(tokens)).abs().max().item() <= 1e-13


def _gpt_params(vocab: int, dim: int, depth: int, block: int, bias: bool) -> int:
    """A GPT's parameters with a tied head (nanoGPT model.py): embeddings, then per block ``ln_1``, ``c_attn``
    (``3d²``), ``c_proj`` (``d²``), ``ln_2``, ``c_fc`` (``4d²``), ``c_proj`` (``4d²``), and ``ln_f``."""
    layer_norm = 2 * dim if bias else dim
    block_biases = (3 * dim + dim + 4 * dim + dim) if bias else 0
    per_block = 2 * layer_norm + 12 * dim * dim + block_biases
    return vocab * dim + block * dim + depth * per_block + layer_norm


@pytest.mark.cpu_only("builds the 124M models on the meta device: parameter counts only")
def test_registered_gpts_have_nanogpts_parameter_counts():
    """nanoGPT's GPT-2 124M (bias=False, vocab 50304) reports 123.59M without position embeddings; GPT-2 itself
    (bias=True, vocab 50257, from_pretrained) 123.65M."""
    assert _gpt_params(50304, 768, 12, 1024, bias=False) - 1024 * 768 == 123_587_328
    assert _gpt_params(50257, 768, 12, 1024, bias=True) - 1024 * 768 == 123_653_376
    assert _gpt_params(50257, 768, 12, 1024, bias=True) == 124_439_808  # GPT-2 small, as published
    with torch.device("meta"):
        models = {name: create_model(name) for name in ("gpt2_124m", "ot_gpt2_124m")}
        gpt2 = create_model("gpt2_124m", vocab_size=50257, bias=True)
    for model in models.values():
        assert sum(p.numel() for p in model.parameters()) == _gpt_params(50304, 768, 12, 1024, bias=False)
        assert model.head.weight is model.embed.weight
    assert sum(p.numel() for p in gpt2.parameters()) == 124_439_808
    for name, vocab, dim, depth in [("nanogpt_char", 65, 384, 6), ("ot_nanogpt_char", 65, 320, 5)]:
        with torch.device("meta"):
            count = sum(p.numel() for p in create_model(name, vocab_size=vocab).parameters())
        norms = dim * (2 * depth + 1) if name == "nanogpt_char" else 0  # the OT run switches them off
        assert count == _gpt_params(vocab, dim, depth, 256, bias=False) - dim * (2 * depth + 1) + norms


@pytest.mark.cpu_only("reads the registered configurations")
def test_registered_ot_models_are_the_released_runs():
    ot = create_model("ot_gpt2_124m", vocab_size=VOCAB, dim=24, num_heads=2, depth=2, block_size=8)
    assert isinstance(ot.encoder, ContinuousDepth) and ot.encoder.t1 == 1.0
    assert dict(ot.encoder.solve_options) == {"method": "euler", "steps": 10}
    assert isinstance(ot.encoder.field, KineticEnergy) and ot.encoder.field.transport_cost == 0.2  # 2 x --lmbda=0.1
    assert isinstance(ot.encoder.field.field.final_norm, nn.LayerNorm) and isinstance(ot.norm, nn.Identity)
    char = model_config("ot_nanogpt_char").kwargs
    assert (char["dim"], char["depth"], char["num_heads"], char["block_size"], char["dropout"]) == (320, 5, 5, 256, 0.2)
    assert (char["field"], char["steps"], char["transport_cost"], char["norms"]) == ("composed", 5, 2.0, False)
    base = model_config("nanogpt_char").kwargs
    assert (base["dim"], base["depth"], base["num_heads"], base["block_size"], base["dropout"]) == (384, 6, 6, 256, 0.2)
    for small, parent in [("nanogpt_char_small", "nanogpt_char"), ("ot_nanogpt_char_small", "ot_nanogpt_char")]:
        a, b = model_config(small).kwargs, model_config(parent).kwargs
        assert all(a.get(k) == b.get(k) for k in ("field", "steps", "norms", "bias"))
    assert model_config("ot_nanogpt_char_small").kwargs["transport_cost"] == 1.0  # the stand-in's recorded choice


def test_weights_are_tied_and_initialised_as_nanogpt(device):
    model = CausalLM(VOCAB, 32, 4, 2, block_size=BLOCK).to(device, F64)
    assert model.head.weight is model.embed.weight
    projections = [m.proj.weight for m in model.modules() if isinstance(m, AttentionBranch)]
    assert len(projections) == 4 and all(abs(w.std().item() - 0.02 / math.sqrt(8)) < 0.003 for w in projections)
    untied = CausalLM(VOCAB, 32, 4, 2, block_size=BLOCK, tie_weights=False, positions="rotary")
    assert untied.head.weight is not untied.embed.weight and untied.pos_embed is None


def test_dropout_is_drawn_in_training_mode_only(device):
    model = _model(device, dropout=0.3)
    tokens = _tokens(device, 5)
    with torch.no_grad():
        assert not torch.equal(model.train()(tokens), model(tokens))
        assert torch.equal(model.eval()(tokens), model(tokens))


def test_bad_arguments_raise_clear_errors(device):
    def build(**settings):
        return CausalLM(**{"vocab_size": VOCAB, "dim": 16, "depth": 2, "num_heads": 2, "block_size": 8, **settings})

    for settings, match in [
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(block_size=8.0), "block_size must be a positive integer"),
        (dict(positions="sinusoidal"), "positions must be 'learned' or 'rotary'"),
        (dict(field="evolving", positions="rotary", bias=False), r"takes no positions='rotary', bias=False"),
        (dict(field="evolving", evolving=dict(causal=False)), r"evolving\['causal'\]"),
        (dict(field="split", evolving=dict(alpha=0.5)), "evolving= configures field='evolving'"),
        (dict(field=nn.Linear(16, 16), positions="rotary"), "needs AttentionBranch\\(rotary=True\\)"),
        (dict(field="composed", method="rk4", steps=2, mlp_hidden=None, num_sets=3), "num_sets must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            build(**settings)
    model = build().to(device).eval()
    tokens = _tokens(device, 5, batch=2) % 8
    with pytest.raises(ValueError, match="9 tokens exceed block_size=8"):
        model(torch.zeros(1, 9, dtype=torch.long, device=device))
    with pytest.raises(TypeError, match="integer token ids"):
        model(tokens.float())
    with pytest.raises(TypeError, match="key_padding_mask"):
        model(tokens, key_padding_mask=torch.zeros(2, 5, device=device))
    cache = KVCache()
    with torch.no_grad():
        model(tokens, kv_cache=cache)
        with pytest.raises(ValueError, match="5 cached and 4 tokens exceed block_size=8"):
            model(tokens[:, :4], kv_cache=cache)
        with pytest.raises(ValueError, match="takes no key_padding_mask"):
            model(tokens[:, :1], torch.zeros(2, 1, dtype=torch.bool, device=device), kv_cache=cache)
    for kwargs, match in [
        (dict(max_new_tokens=-1), "max_new_tokens must be an integer >= 0"),
        (dict(max_new_tokens=1, temperature=0.0), "temperature must be a finite number > 0"),
        (dict(max_new_tokens=1, top_k=0), "top_k must be None or an integer >= 1"),
    ]:
        with pytest.raises(ValueError, match=match):
            model.generate(tokens, **kwargs)
    with pytest.raises(ValueError, match="prompt must be"):
        model.generate(tokens[:, :0], 1)
    with pytest.raises(ValueError, match="gradient='backprop'"):
        build(gradient="checkpoint").to(device)(tokens, kv_cache=KVCache())
    with pytest.raises(ValueError, match="not supported with compile"):
        build(method="euler", compile=True).to(device).generate(tokens, 1)
    mlp_only = build(field=as_field(MLPBranch(16)), positions="learned").to(device)
    with pytest.raises(TypeError, match="'kv_cache' is taken by no bind"):
        mlp_only.generate(tokens, 1)


def test_token_ids_outside_the_vocabulary_are_named_once_per_call(device, monkeypatch):
    """An id outside ``[0, vocab_size)`` raises ``ValueError`` naming the id, its (batch, token) position and the
    vocabulary size, not torch's bare ``IndexError``; the range is read once per forward, and once per generate()
    (the sampled ids are in range), whatever the number of new tokens."""
    model = _model(device)
    tokens = _tokens(device, 5, batch=2)
    bad = tokens.clone()
    bad[1, 3] = VOCAB
    with torch.no_grad():
        named = rf"tokens holds token id {VOCAB} at \(batch 1, token 3\), outside .*\(vocab_size={VOCAB}\)"
        with pytest.raises(ValueError, match=named):
            model(bad)
        with pytest.raises(ValueError, match=r"token id -1 at \(batch 0, token 0\)"):
            model(tokens.masked_fill(tokens == tokens[0, 0], -1), kv_cache=KVCache())
    for cache in (True, False):
        with pytest.raises(ValueError, match=rf"prompt holds token id {VOCAB} at \(batch 1, token 3\)"):
            model.generate(bad, 3, cache=cache)
    ranged = []
    checked = causal_lm_module.check_token_ids

    def counting(ids, name, vocab_size=None):
        ranged.append(vocab_size is not None)
        return checked(ids, name, vocab_size)

    monkeypatch.setattr(causal_lm_module, "check_token_ids", counting)
    with torch.no_grad():
        model(tokens)
    assert sum(ranged) == 1
    for cache in (True, False):
        ranged.clear()
        assert model.generate(tokens, 2 * BLOCK, cache=cache).shape == (2, 5 + 2 * BLOCK)  # the window slides too
        assert sum(ranged) == 1


def test_generate_in_training_mode_with_dropout_warns(device):
    """generate() in training mode with dropout samples it at every step: a UserWarning says so and advises eval();
    in eval mode, or in training mode without dropout, nothing is said."""
    prompt = _tokens(device, 3, batch=1)
    model = _model(device, dropout=0.1).train()
    with pytest.warns(UserWarning, match=r"training mode, which samples dropout.*model\.eval\(\)") as caught:
        model.generate(prompt, 2)
    assert caught[0].filename == __file__  # points at the call of generate()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.eval().generate(prompt, 2)
        _model(device).train().generate(prompt, 2)
