"""Language-model presets: a short run writes the validation loss and perplexity, the CLI prints them, every
variant builds, gradient accumulation gives the gradient of the whole batch, and ``--describe`` works."""

from __future__ import annotations

import csv
import json
import math
import statistics

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from neuralode_tf.continuous import regularization
from neuralode_tf.data import Splits, TensorSplit, TokenWindows
from neuralode_tf.train import PRESETS, VARIANTS, ConfigError, TrainConfig, load_checkpoint, train
from neuralode_tf.train._evaluation import perplexity
from neuralode_tf.train.cli import main
from neuralode_tf.train.loop import _accumulate
from neuralode_tf.train.presets.lm import LM_PRESETS, LM_VARIANTS
from neuralode_tf.train.setup import Setup, build_setup

pytestmark = pytest.mark.cpu_only("trains tiny models for seconds")

TINY = ["model.dim=16", "model.depth=1", "model.num_heads=2"]
SHORT = dict(block_size=16, windows=16, val_windows=4)  # 2 steps of 8 windows per epoch; 64 validation targets


def _short(tmp_path, **settings) -> TrainConfig:
    return TrainConfig(
        "nanogpt_tweets_char",
        epochs=2,
        batch_size=8,
        warmup_steps=0,
        out_dir=str(tmp_path),
        progress=False,
        model=dict(dim=16, depth=1, num_heads=2),
        data=dict(SHORT),
        **settings,
    )


def test_a_short_run_writes_the_validation_loss_and_its_perplexity(tmp_path):
    config = _short(tmp_path / "run", grad_accumulation=2)
    result = train(config)
    assert result["perplexity"] == math.exp(result["val_loss"])
    # the validation loss is the mean next-token cross-entropy over every validation target, recomputed here
    setup = build_setup(config)
    setup.model.load_state_dict(load_checkpoint(tmp_path / "run" / "checkpoint.pt", "cpu")["model"])
    setup.model.eval()
    windows = setup.test.windows(torch.arange(len(setup.test)))
    with torch.no_grad():
        logits = setup.model(windows[:, :-1])
    expected = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
    assert windows[:, 1:].numel() == 64 and abs(result["val_loss"] - expected) <= 1e-6 * expected
    with open(tmp_path / "run" / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == ["1", "2", "3", "4"]
    assert [math.isnan(float(row["val_loss"])) for row in rows] == [True, False, True, False]  # after each epoch
    assert float(rows[-1]["val_loss"]) == result["val_loss"]
    assert float(rows[1]["perplexity"]) == math.exp(float(rows[1]["val_loss"]))
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["perplexity"] == result["perplexity"]


def test_a_resumed_run_sees_the_same_windows_and_losses(tmp_path):
    """The windows of epoch e are a function of (data seed, e) and the order of the loop's (seed, e): resuming after
    an epoch reproduces the uninterrupted run's losses and validation loss (CPU, same threads)."""
    whole = train(_short(tmp_path / "whole"))
    train(_short(tmp_path / "split", max_steps=2))
    resumed = train(_short(tmp_path / "split", resume=True))
    history = [load_checkpoint(tmp_path / run / "checkpoint.pt", "cpu")["history"] for run in ("whole", "split")]
    assert [row["loss"] for row in history[0]] == [row["loss"] for row in history[1]]
    assert resumed["val_loss"] == whole["val_loss"]


def test_the_cli_prints_the_validation_loss_and_perplexity(tmp_path, capsys):
    argv = [
        "train",
        "nanogpt_tweets_char",
        "--out-dir",
        str(tmp_path),
        "--set",
        "epochs=1",
        "batch_size=8",
        "warmup_steps=0",
        *TINY,
    ]
    argv += [f"data.{key}={value}" for key, value in SHORT.items()]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("nanogpt_tweets_char: validation loss ") and ", perplexity " in out[-2]
    result = json.loads(out[-1])
    assert f"validation loss {result['val_loss']:.4f}, perplexity {result['perplexity']:.3f}" in out[-2]


def _accumulated_gradients(model, setup, batches) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _accumulate(model, model, setup, batches)
    return [p.grad.clone() for p in model.parameters()]


def test_accumulated_micro_batches_give_the_gradient_of_the_whole_batch():
    """k micro-batches, each loss and transport cost divided by k, give the gradient of one batch of k times the
    size (float64); the released code's accumulation, which does not divide the transport cost, does not."""
    tokens = np.random.default_rng(0).integers(0, 11, size=400)
    windows = TokenWindows(tokens, 12, 11, windows=8)
    data = Splits("toy", "lm", windows, windows, "random tokens")
    torch.manual_seed(0)
    overrides = dict(variant="ot", dim=16, depth=2, num_heads=2)
    model = LM_PRESETS["nanogpt_tweets_char"].build_model(data, overrides).double()
    setup = Setup(model=model, data=data)
    rows, cpu = torch.arange(8), torch.device("cpu")
    whole = _accumulated_gradients(model, setup, [setup.batch(windows, rows, cpu)])
    assert regularization(model) > 0  # the transport cost is part of the loss
    for k in (2, 4, 8):
        parts = _accumulated_gradients(model, setup, [setup.batch(windows, part, cpu) for part in rows.chunk(k)])
        assert max((a - b).abs().max().item() for a, b in zip(parts, whole, strict=True)) <= 1e-12

    model.zero_grad(set_to_none=True)  # the released code: loss / k + λ · cost, back-propagated per micro-batch
    for part in rows.chunk(4):
        inputs, target = setup.batch(windows, part, cpu)
        (setup.loss(model(**inputs), target) / 4 + regularization(model)).backward()
    released = [p.grad for p in model.parameters()]
    assert max((a - b).abs().max().item() for a, b in zip(released, whole, strict=True)) > 1e-3


def test_accumulation_stops_before_back_propagating_a_non_finite_micro_batch():
    tokens = np.random.default_rng(1).integers(0, 11, size=200)
    windows = TokenWindows(tokens, 8, 11, windows=4)
    data = Splits("toy", "lm", windows, windows, "random tokens")
    model = LM_PRESETS["nanogpt_tweets_char"].build_model(data, dict(dim=8, depth=1, num_heads=2))
    cpu = torch.device("cpu")
    batches = [Setup(model, data).batch(windows, part, cpu) for part in torch.arange(4).chunk(2)]

    class Poisoned(Setup):  # the second micro-batch's loss is NaN
        calls = 0

        def loss(self, logits, target):
            Poisoned.calls += 1
            return super().loss(logits, target) * (math.nan if Poisoned.calls == 2 else 1.0)

    first = _accumulated_gradients(model, Setup(model, data), batches[:1])
    model.zero_grad(set_to_none=True)
    loss, _, accuracy = _accumulate(model, model, Poisoned(model, data), batches)
    assert math.isnan(loss.item()) and math.isnan(accuracy)
    assert all(torch.equal(p.grad, 0.5 * g) for p, g in zip(model.parameters(), first, strict=True))  # 1st only
    assert perplexity(1000.0) == math.inf and math.isnan(perplexity(math.nan))


def test_grad_accumulation_must_divide_each_processs_batch(tmp_path):
    with pytest.raises(ConfigError, match="must be divisible by grad_accumulation=3"):
        train(_short(tmp_path / "run", grad_accumulation=3))
    with pytest.raises(ConfigError, match="grad_accumulation=0 must be >= 1"):
        TrainConfig("nanogpt_tweets_char", grad_accumulation=0)
    assert not (tmp_path / "run").exists()


def _placeholder(vocab_size: int, block_size: int) -> Splits:
    windows = TokenWindows(np.zeros(block_size + 1, dtype=np.int64), block_size, vocab_size, windows=1)
    return Splits("placeholder", "lm", windows, windows, "shape only")


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_every_variant_builds_the_model_it_names():
    data = _placeholder(50, 16)
    models = {
        name: LM_PRESETS["nanogpt_tweets_char"].build_model(data, overrides)
        for name, overrides in LM_VARIANTS["nanogpt_tweets_char"].items()
    }
    fields = {name: type(model.encoder.field).__name__ for name, model in models.items()}
    assert fields == {"baseline": "WeightSharedField", "ot": "KineticEnergy", "ot_unregularized": "ComposedField"}
    assert _parameters(models["ot"]) == _parameters(models["ot_unregularized"]) < _parameters(models["baseline"])
    zhong = {
        name: LM_PRESETS["zhong_nanogpt_tweets_char"].build_model(data, overrides)
        for name, overrides in LM_VARIANTS["zhong_nanogpt_tweets_char"].items()
    }
    stems = ("parallel", "sequential")
    assert sorted(zhong) == [f"{layer}{suffix}" for layer in stems for suffix in ("", "_dropout", "_dropout_03")]
    assert len({_parameters(model) for model in zhong.values()}) == 1  # same parameters, other layers
    layers = [
        (type(zhong[name].encoder.field.layers[0]).__name__, zhong[name].encoder.solve_options["method"])
        for name in ("sequential", "parallel")
    ]
    assert layers == [("SplitField", "lie_trotter"), ("ParallelField", "euler")]  # eqs. 1-2 and eq. 4
    assert zhong["parallel_dropout"].drop.p == 0.1 and zhong["parallel"].drop.p == 0.0
    assert zhong["sequential_dropout_03"].drop.p == zhong["parallel_dropout_03"].drop.p == 0.3
    assert all(VARIANTS[name] == LM_VARIANTS[name] for name in LM_VARIANTS)
    with pytest.raises(ValueError, match="unknown variant 'gpt'; valid: baseline, ot, ot_unregularized"):
        LM_PRESETS["nanogpt_tweets_char"].build_model(data, {"variant": "gpt"})
    digits = Splits("d", "image", TensorSplit(x=torch.zeros(1, 1, 8, 8), y=torch.zeros(1)), [], "d", ("0",))
    with pytest.raises(TypeError, match="needs token windows; 'd' holds 'image'"):
        LM_PRESETS["nanogpt_tweets_char"].build_model(digits, {})


def test_the_released_configurations_build_the_released_models():
    """nanoGPT's Shakespeare GPT (65 characters; nanoGPT prints 10.65M parameters, position embeddings left out) and
    the OT run's 5 blocks at d = 320, with the released training settings; GPT-2 on the meta device."""
    data = _placeholder(65, 256)
    for name, variant, millions in (
        ("nanogpt_shakespeare_char", "baseline", "10.65M"),
        ("ot_nanogpt_shakespeare_char", "ot", "6.16M"),
    ):
        preset = LM_PRESETS[name]
        assert preset.model.keywords["variant"] == variant  # the preset's default model
        model = preset.build_model(data, {})
        assert f"{(_parameters(model) - model.pos_embed.weight.numel()) / 1e6:.2f}M" == millions
        assert model.block_size == 256 and model.drop.p == 0.2 and model.head.out_features == 65
        config = preset.config
        assert (config.batch_size, config.grad_accumulation, config.lr, config.grad_clip) == (256, 4, 1e-3, 1.0)
        assert config.epochs * (preset.dataset_options["windows"] // config.batch_size) == 5000  # max_iters
    preset = LM_PRESETS["ot_gpt2_openwebtext"]
    with torch.device("meta"):
        gpt2 = preset.build_model(_placeholder(preset.dataset_options["vocab_size"], 1024), {})
    assert gpt2.head.out_features == 50304 and (preset.config.batch_size, preset.config.grad_accumulation) == (240, 40)


@pytest.mark.parametrize("name", sorted(LM_PRESETS))
def test_describe_works_for_every_lm_preset(name, capsys):
    assert main(["train", name, "--describe"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{name}: ") and "grad_accumulation" in out and "windows" in out
    if PRESETS[name].dataset == "tweets_char":
        assert "model settings (--set model.KEY=VALUE) of CausalLM:" in out and "  variant " in out
    else:
        assert "the model could not be built: dataset" in out and "is read from files" in out


def test_a_language_model_claim_is_judged_on_its_validation_loss_lower_being_better():
    claims = pytest.importorskip("paper_repro.claims", reason="the suite runs beside paper_repro/")
    from paper_repro.claims import _ledger

    recording = {"r": dict(path="r.json", stand_in="tweets characters", date="2026-11-25", command="record.py")}
    entry = dict(id="x", where="w", claim="ot beats baseline", paper="p", ours="", verdict="agrees", a="ot")
    entry.update({"class": "qualitative", "recording": "r", "b": "baseline", "higher_is_better": False})
    rows = [
        {"variant": variant, "seed": s, "val_loss": loss + s / 100, "perplexity": math.exp(loss + s / 100)}
        for variant, loss in (("ot", 2.0), ("baseline", 2.5))
        for s in range(3)
    ]
    rows = [{**row, "non_finite": False} for row in rows]
    ppl = {v: [math.exp(loss + s / 100) for s in range(3)] for v, loss in (("ot", 2.0), ("baseline", 2.5))}
    se = math.sqrt((statistics.variance(ppl["ot"]) + statistics.variance(ppl["baseline"])) / 3)  # 0.08
    for metric, expected in (
        ("val_loss", "+0.500 ± 0.008 validation loss"),  # se = sqrt(2 · 1e-4 / 3)
        ("perplexity", f"+{math.exp(2.51) - math.exp(2.01):.2f} ± {se:.2f} perplexity"),
    ):
        ledger = _ledger.parse(
            "p", {"paper": "P", "reference": "R", "recordings": recording, "claim": [{**entry, "metric": metric}]}
        )
        outcome = claims.recompute(ledger, ledger.claims[0], rows)
        assert outcome == claims.Outcome(f"tweets characters: {expected} (se; 3 vs 3 seeds)", "agrees")
