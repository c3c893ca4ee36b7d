"""The training loop: overrides, exact resume after SIGKILL, SIGTERM and SIGINT, non-finite loss, torchrun/DDP."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from neuralode_tf.train import OT_VARIANTS, NonFiniteLossError, TrainConfig, apply_overrides, compare_variants, train
from neuralode_tf.train.cli import main
from neuralode_tf.train.setup import Setup

TINY = {"dim": 16, "depth": 2, "num_heads": 2}


def tiny(out_dir: Path, **settings) -> TrainConfig:
    base = TrainConfig(
        preset="vit_digits", epochs=2, batch_size=32, lr=1e-3, out_dir=str(out_dir), progress=False, model=dict(TINY)
    )
    return replace(base, **settings)


def _skip_training_on_xla(device: torch.device) -> None:
    if device.type == "xla":
        pytest.skip(
            "XLA: a training run syncs with the host every step (loss, NaN check, metrics), and on the XLA CPU "
            "backend 8 steps did not finish in 15 minutes; it runs on CUDA"
        )


def losses(out_dir: Path) -> list[float]:
    return [row["loss"] for row in torch.load(out_dir / "checkpoint.pt", weights_only=True)["history"]]


@pytest.mark.cpu_only("parses settings; no tensors")
def test_overrides_reach_the_config_model_and_data():
    values = apply_overrides(
        {"preset": "x", "model": {"dim": 8}}, ["lr=3e-4", "model.method=rk4", "data.seed=2", "resume=true"]
    )
    assert values["lr"] == 3e-4 and values["resume"] is True
    assert values["model"] == {"dim": 8, "method": "rk4"} and values["data"] == {"seed": 2}
    with pytest.raises(ValueError, match="unknown setting 'learning_rate'"):
        apply_overrides({}, ["learning_rate=1"])
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides({}, ["lr"])


@pytest.mark.parametrize("random", [{}, {"dropout": 0.2, "drop_path": 0.3}], ids=["deterministic", "dropout"])
def test_resume_reproduces_the_uninterrupted_run(tmp_path, device, random):
    """Also a model that draws random numbers at every step (dropout, stochastic depth): the checkpoint holds the
    random state, so the resumed steps draw what the uninterrupted ones drew."""
    _skip_training_on_xla(device)
    on = {"device": str(device), "model": {**TINY, "field": "parallel", **random}}
    whole = train(tiny(tmp_path / "whole", max_steps=8, **on))
    train(tiny(tmp_path / "split", max_steps=4, **on))
    resumed = train(tiny(tmp_path / "split", max_steps=8, resume=True, **on))
    assert losses(tmp_path / "split") == losses(tmp_path / "whole")
    assert resumed["test_accuracy"] == whole["test_accuracy"]
    rows = (tmp_path / "split" / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("step,epoch,loss,accuracy,nfe") and len(rows) == 9
    assert json.loads((tmp_path / "split" / "metrics.json").read_text())["steps"] == 8


STOPPABLE = ["epochs=2", "batch_size=32", "max_steps=30", "checkpoint_every=2", "progress=false"]
STOPPABLE += [f"model.{k}={v}" for k, v in TINY.items()]


@pytest.fixture(scope="module")
def uninterrupted_losses(tmp_path_factory: pytest.TempPathFactory) -> list[float]:
    out = tmp_path_factory.mktemp("uninterrupted")
    assert main(["train", "vit_digits", "--out-dir", str(out), "--set", *STOPPABLE]) == 0
    return losses(out)


@pytest.mark.cpu_only("signals to a subprocess")
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_run_resumes_the_uninterrupted_loss_curve(tmp_path, uninterrupted_losses, stop):
    """SIGKILL loses the steps after the last periodic checkpoint (every 2 steps). SIGTERM and SIGINT stop the run
    at the next step boundary, where it writes a checkpoint and exits with 128 + the signal's number. Either way
    --resume reproduces the uninterrupted loss curve bit for bit."""
    command = [sys.executable, "-m", "neuralode_tf", "train", "vit_digits", "--out-dir", str(tmp_path)]
    # The same thread count as this process, so that float reductions match bit for bit.
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    # SIGINT as in a terminal, even where this process was started with it ignored (a background job).
    process = subprocess.Popen(
        [*command, "--set", *STOPPABLE],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    checkpoint = tmp_path / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        if checkpoint.exists() and torch.load(checkpoint, weights_only=True)["step"] >= 4:
            break
        time.sleep(0.05)
    if process.poll() is not None:
        pytest.skip("the run finished before it could be stopped")
    os.kill(process.pid, stop)
    _, stderr = process.communicate(timeout=60)
    step = torch.load(checkpoint, weights_only=True)["step"]
    assert 4 <= step < 30
    if stop == signal.SIGKILL:  # possibly in the middle of a write: checkpoint.pt.tmp may be left, unused
        assert process.returncode == -signal.SIGKILL and step % 2 == 0
    else:
        assert process.returncode == 128 + stop, stderr
        assert f"stopped by {stop.name} after step {step}; {checkpoint} holds it: continue with --resume" in stderr
        assert not list(tmp_path.glob("*.tmp"))
    assert main(["train", "vit_digits", "--out-dir", str(tmp_path), "--resume", "--set", *STOPPABLE]) == 0
    assert losses(tmp_path) == uninterrupted_losses


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, device):
    _skip_training_on_xla(device)
    calls = {"n": 0}
    original = Setup.loss

    def loss(self, logits, target):
        calls["n"] += 1
        value = original(self, logits, target)
        return value * float("nan") if calls["n"] == 5 else value

    monkeypatch.setattr(Setup, "loss", loss)
    with pytest.raises(NonFiniteLossError, match=r"the loss became nan at step 4 .*checkpoint\.pt"):
        train(tiny(tmp_path, max_steps=10, checkpoint_every=2, device=str(device)))
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["step"] == 4


@pytest.mark.cpu_only("prints the preset list; no tensors")
def test_cli_lists_presets(capsys):
    assert main(["train", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in ("vit_digits", "text_tweets", "set_transformer_shapes3d", "signal_mnist1d", "seq2seq_reverse"):
        assert name in listed


@pytest.mark.cpu_only("two gloo processes on the CPU under torchrun")
def test_torchrun_two_processes_match_one_process(tmp_path):
    """DDP on 2 CPU processes (gloo) with a global batch of 32 follows the single-process run."""
    settings = ["epochs=1", "batch_size=32", "max_steps=4", "progress=false", "device=cpu"]
    settings += [f"model.{k}={v}" for k, v in TINY.items()]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    assert main(["train", "vit_digits", "--out-dir", str(single), "--set", *settings]) == 0
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += ["-m", "neuralode_tf", "train", "vit_digits", "--out-dir", str(ddp), "--set", *settings]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, check=True, env=env, capture_output=True, timeout=300)
    a = torch.load(single / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(ddp / "checkpoint.pt", weights_only=True)["model"]
    # Gradients are averaged in another order (all-reduce), so Adam steps agree to float rounding.
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-4
    assert json.loads((ddp / "metrics.json").read_text())["world_size"] == 2


@pytest.mark.cpu_only("CLI config files; the training loop runs on devices in the resume test")
def test_config_file_with_overrides(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        'preset = "vit_digits"\nepochs = 1\nbatch_size = 32\nwarmup_steps = 0\nmax_steps = 2\nprogress = false\n'
        "[model]\ndim = 16\ndepth = 2\nnum_heads = 2\n"
    )
    out = tmp_path / "out"
    assert main(["train", "--config", str(config), "--out-dir", str(out), "--set", "max_steps=3", "model.depth=1"]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["max_steps"] == 3 and saved["model"] == {"dim": 16, "depth": 1, "num_heads": 2}
    assert json.loads((out / "metrics.json").read_text())["steps"] == 3


@pytest.mark.cpu_only("counts parameters; no device computation")
@pytest.mark.parametrize("preset", ["ot_mnist_digits", "ot_imdb_tweets", "ot_modelnet40_shapes3d"])
def test_ot_presets_build_every_variant(preset):
    from neuralode_tf.train import OT_VARIANTS
    from neuralode_tf.train.presets import PRESETS

    settings = PRESETS[preset]
    small = {"ot_imdb_tweets": {"max_samples": 300}, "ot_modelnet40_shapes3d": {"num_train": 16, "num_test": 8}}
    data = settings.load_data(small.get(preset, {}))
    counts = {
        name: sum(p.numel() for p in settings.build_model(data, v).parameters())
        for name, v in OT_VARIANTS[preset].items()
    }
    baseline = counts.pop("baseline")
    assert len(set(counts.values())) == 1  # every continuous model has the same parameters
    assert baseline > counts["ot"]  # the continuous models are the smaller ones, as in the paper
    assert settings.config.grad_clip == 0.0  # Sinkformers' training code does not clip


@pytest.mark.cpu_only("compare_variants and step_sweep evaluate on the CPU")
def test_transport_cost_reaches_the_loss_and_the_metrics(tmp_path):
    from neuralode_tf.train import compare_variants, step_sweep, summarize

    variants = {"ot": dict(transport_cost=0.01, steps=4), "heavy": dict(transport_cost=100.0, steps=4)}
    rows = compare_variants(
        "ot_mnist_digits", variants, seeds=(0,), out_dir=tmp_path, epochs=1, warmup_steps=0, max_steps=6, progress=False
    )
    assert [row["non_finite"] for row in rows] == [False, False]
    metrics = {row["variant"]: (Path(row["out_dir"]) / "metrics.csv").read_text().splitlines() for row in rows}
    assert metrics["ot"][0].endswith(",regularization")
    first = {name: float(lines[1].split(",")[-1]) for name, lines in metrics.items()}
    assert first["ot"] > 0 and first["heavy"] == pytest.approx(first["ot"] * 1e4, rel=1e-4)  # same first batch
    table = summarize(rows)
    assert [t["variant"] for t in table] == ["ot", "heavy"] and table[0]["runs"] == 1
    sweep = step_sweep(rows[0]["out_dir"], steps=(1, 4))
    assert set(sweep) == {1, 4} and all(0.0 <= acc <= 1.0 for acc in sweep.values())


@pytest.mark.cpu_only("compare_variants evaluates on the CPU")
def test_a_diverging_run_is_counted_not_raised(tmp_path):
    from neuralode_tf.train import compare_variants, summarize

    rows = compare_variants(
        "ot_mnist_digits",
        {"diverging": dict(steps=2)},
        seeds=(0,),
        out_dir=tmp_path,
        lr=1e30,
        grad_clip=0.0,
        epochs=1,
        warmup_steps=0,
        max_steps=6,
        progress=False,
    )
    assert rows[0]["non_finite"] and summarize(rows)[0]["non_finite"] == 1


@pytest.mark.cpu_only("the compare CLI evaluates on the CPU")
def test_cli_compare_writes_the_table_and_the_sweep(tmp_path, capsys):
    settings = ["max_steps=3", "epochs=1", "warmup_steps=0", "model.steps=4"]
    argv = ["compare", "ot_mnist_digits", "--seeds", "0", "--variants", "baseline", "ot", "--sweep", "--set", *settings]
    assert main([*argv, "--out-dir", str(tmp_path)]) == 0
    table = (tmp_path / "table.md").read_text()
    assert "| baseline | 53,898 |" in table and "| ot | 14,666 |" in table and table == capsys.readouterr().out
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert rows[0]["sweep"] is None and sorted(map(int, rows[1]["sweep"])) == [1, 2, 4, 8, 16, 20]
    with open(tmp_path / "baseline" / "seed0" / "metrics.csv", newline="") as handle:
        losses = [float(record["loss"]) for record in csv.DictReader(handle)]
    assert len(losses) == 3 and rows[0]["curve"]["loss"] == [pytest.approx(sum(losses) / 3, rel=1e-12)]
    assert len(rows[1]["curve"]["accuracy"]) == 1  # one epoch


@pytest.mark.cpu_only("worker processes train on the CPU")
def test_compare_in_worker_processes_gives_the_rows_of_one_thread(tmp_path):
    settings = dict(max_steps=2, epochs=1, warmup_steps=0, progress=False)
    digits = OT_VARIANTS["ot_mnist_digits"]
    variants = {"baseline": digits["baseline"], "ot": {**digits["ot"], "steps": 2}}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = compare_variants("ot_mnist_digits", variants, (0, 1), tmp_path / "one", **settings)
    finally:
        torch.set_num_threads(threads)
    pooled = compare_variants("ot_mnist_digits", variants, (0, 1), tmp_path / "two", workers=2, **settings)
    strip = lambda rows: [{k: v for k, v in row.items() if k != "out_dir"} for row in rows]
    assert [(r["variant"], r["seed"]) for r in pooled] == [("baseline", 0), ("baseline", 1), ("ot", 0), ("ot", 1)]
    assert strip(pooled) == strip(alone)
    with pytest.raises(ValueError, match="workers must be a positive int"):
        compare_variants("ot_mnist_digits", variants, (0,), tmp_path / "none", workers=0, **settings)


@pytest.mark.cpu_only("reads image files and counts blocks")
def test_ot_catsdogs_preset_reads_the_real_data_only(tmp_path):
    from PIL import Image

    from neuralode_tf.train import OT_VARIANTS
    from neuralode_tf.train.presets import PRESETS

    preset = PRESETS["ot_catsdogs"]
    with pytest.raises(ValueError, match="'catsdogs' is read from files: give their folder with --set data.root"):
        preset.load_data({})
    for k in range(5):
        for animal in ("cat", "dog"):
            Image.new("RGB", (40, 40), (k * 40, 0, 0)).save(tmp_path / f"{animal}.{k}.jpg")
    data = preset.load_data({"root": str(tmp_path), "image_size": 32})
    models = {name: preset.build_model(data, v) for name, v in OT_VARIANTS["ot_catsdogs"].items()}
    assert models["ot"].encoder.field.field.inner_residuals and len(models["ot"].encoder.field.field.blocks) == 5
    assert len(models["node"].encoder.odes) == 5 and models["ot"](data.test.x).shape == (2, 2)


@pytest.mark.cpu_only("reads dataset files (IDX, IMDb folders, HDF5)")
def test_ot_presets_train_on_the_real_datasets_files(tmp_path):
    """The paper presets read the paper's datasets (here tiny files of their formats) at the paper's sizes."""
    import numpy as np

    from neuralode_tf.train.presets import PRESETS
    from tests.test_data import write_idx, write_imdb

    rng = np.random.default_rng(0)
    (tmp_path / "mnist").mkdir()
    for split, count in (("train", 4), ("t10k", 2)):
        write_idx(tmp_path / "mnist" / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (count, 28, 28)))
        write_idx(tmp_path / "mnist" / f"{split}-labels-idx1-ubyte", rng.integers(0, 10, count))
    write_imdb(tmp_path / "imdb")
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "ModelNet40_cloud.h5", "w") as f:
        f["tr_cloud"], f["test_cloud"] = rng.normal(size=(4, 50, 3)), rng.normal(size=(2, 50, 3))
        f["tr_labels"], f["test_labels"] = np.array([0, 1, 2, 3]), np.array([1, 2])
    real = {
        "ot_mnist": dict(root=str(tmp_path / "mnist")),
        "ot_imdb": dict(root=str(tmp_path / "imdb"), min_freq=1),
        "ot_modelnet40": dict(root=str(tmp_path)),
    }
    widths = {"ot_mnist": 64, "ot_imdb": 256, "ot_modelnet40": 200}  # Kan et al.'s, not the stand-ins'
    for preset, data in real.items():
        model = PRESETS[preset].build_model(PRESETS[preset].load_data(data), {})
        assert model.head.in_features == widths[preset]
        if preset == "ot_mnist":
            assert model.patch_embed.kernel_size == (7, 7)
        config = TrainConfig(
            preset=preset,
            epochs=1,
            batch_size=2,
            max_steps=2,
            progress=False,
            out_dir=str(tmp_path / preset),
            data=data,
        )
        result = train(config)
        assert result["steps"] == 2 and 0.0 <= result["test_accuracy"] <= 1.0


@pytest.mark.cpu_only("builds presets from generated data")
def test_transevolve_listops_preset_builds_the_five_models():
    from neuralode_tf.models import TextClassifier, TransEvolveClassifier
    from neuralode_tf.train.presets import PRESETS, VARIANTS

    preset = PRESETS["transevolve_listops"]
    data = preset.load_data({"num_train": 8, "num_test": 4, "max_length": 32})
    models = {name: preset.build_model(data, overrides) for name, overrides in VARIANTS["transevolve_listops"].items()}
    assert isinstance(models["transformer"], TextClassifier)
    assert all(isinstance(models[name], TransEvolveClassifier) for name in models if name != "transformer")
    x, mask = data.test.x[:2], data.test.mask[:2]
    assert all(model(x, mask).shape == (2, 10) for model in models.values())
    with pytest.raises(ValueError, match="unknown variant 'randomFF-3'"):
        preset.build_model(data, {"variant": "randomFF-3"})
