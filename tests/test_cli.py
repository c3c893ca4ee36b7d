"""The ``neuralode-tf`` entry points a new user takes first: a preset from Python is the CLI's run, ``train
--describe`` lists the keys a preset accepts, and ``demo`` prints what its docstring claims."""

from __future__ import annotations

import argparse
import inspect
import json
import math
from dataclasses import asdict, replace

import pytest
import torch

from neuralode_tf.models import ViT
from neuralode_tf.numerics import solve
from neuralode_tf.train import PRESETS, ConfigError, TrainConfig, train
from neuralode_tf.train import demo as demo_command
from neuralode_tf.train._describe import model_keys
from neuralode_tf.train.cli import main

pytestmark = pytest.mark.cpu_only("command-line runs on the CPU")


def test_a_preset_from_python_is_the_command_line_run(tmp_path, capsys):
    """``TrainConfig(name, **settings)`` takes the preset's values for the other fields, as ``neuralode-tf train name
    --set ...`` does: the same config, and bit for bit the same parameters and metrics."""
    assert TrainConfig("vit_digits") == PRESETS["vit_digits"].config  # not the base values (lr=1e-3, ...)
    assert TrainConfig("vit_digits", epochs=5) == replace(PRESETS["vit_digits"].config, epochs=5)
    assert TrainConfig("vit_digits").lr == 2e-3 and TrainConfig("ot_mnist").lr_decay_epochs == [35, 40]
    python = train(TrainConfig("vit_digits", max_steps=2, progress=False, out_dir=str(tmp_path / "python")))
    argv = ["train", "vit_digits", "--out-dir", str(tmp_path / "cli"), "--set", "max_steps=2", "progress=false"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == python
    saved = {run: json.loads((tmp_path / run / "config.json").read_text()) for run in ("python", "cli")}
    expected = {**asdict(PRESETS["vit_digits"].config), "max_steps": 2, "progress": False}
    assert {**saved["python"], "out_dir": None} == {**saved["cli"], "out_dir": None} == {**expected, "out_dir": None}
    states = {run: torch.load(tmp_path / run / "checkpoint.pt", weights_only=True) for run in ("python", "cli")}
    assert states["python"]["history"] == states["cli"]["history"]
    assert all(torch.equal(value, states["cli"]["model"][key]) for key, value in states["python"]["model"].items())


def test_a_config_resolves_the_preset_and_checks_it():
    config = TrainConfig("vit_digits", model={"dim": 16})
    config.model["depth"] = 2  # a copy: the preset keeps its settings
    assert PRESETS["vit_digits"].config.model == {} and config.out_dir == "runs/vit_digits"
    with pytest.raises(ConfigError, match=r"unknown preset 'vit_digit'; valid: vit_digits, "):
        TrainConfig("vit_digit")
    with pytest.raises(ConfigError, match="setting epochs='5' must be int, not str"):
        TrainConfig("vit_digits", epochs="5")


def test_describe_prints_the_settings_and_the_keys_of_the_preset(capsys):
    assert main(["train", "vit_digits", "--describe", "--set", "epochs=5", "model.depth=2"]) == 0
    text = capsys.readouterr().out
    title, training, model, data = text.split("\n\n")
    assert title == f"vit_digits: {PRESETS['vit_digits'].description}"
    settings = dict(line.split(maxsplit=1) for line in training.splitlines()[1:])
    assert settings == {
        key: json.dumps(value)
        for key, value in asdict(TrainConfig("vit_digits", epochs=5)).items()
        if key not in ("preset", "model", "data")
    }
    assert (settings["epochs"], settings["lr"]) == ("5", "0.002")
    assert model.startswith("model settings (--set model.KEY=VALUE) of ViT:")
    rows = dict(line.split(maxsplit=1) for line in model.splitlines()[1:-1])
    # the ViT's keywords, in its signature's order, at the preset's values (and the overrides')
    keywords = [name for name, p in inspect.signature(ViT).parameters.items() if p.kind is not p.VAR_KEYWORD]
    assert list(rows) == [name for name in keywords if name in rows]
    assert {"patch_size", "dim", "depth", "num_heads", "field", "num_sets", "mlp_hidden"} <= set(rows)
    assert rows["dim"] == "48" and rows["depth"] == "2" and rows["field"] == '"parallel"' and rows["num_heads"] == "4"
    encoder = "(inner_residuals, t1, transport_cost, jacobian_cost)"
    other = f"  other keywords go to its encoder {encoder} and the ODE solve: method, step_size"
    assert model.splitlines()[-1].startswith(other)
    assert data.startswith("data settings (--set data.KEY=VALUE) of the dataset 'digits':") and "  seed" in data


def test_describe_shows_the_builders_keywords_and_the_solve_settings_a_preset_gives(capsys):
    assert main(["train", "ot_mnist_digits", "--describe"]) == 0
    model = capsys.readouterr().out.split("\n\n")[2]
    rows = dict(line.split(maxsplit=1) for line in model.splitlines()[1:-1])
    assert (rows["field"], rows["steps"], rows["transport_cost"]) == ('"composed"', "20", "0.01")  # Kan et al.'s
    preset = PRESETS["transevolve_listops"]
    keys = model_keys(preset, preset.load_data({"num_train": 8, "num_test": 4}), {})
    assert keys.model == "TransEvolveClassifier" and list(keys.values)[0] == "variant"
    assert keys.values["variant"] == "randomFF-2" and keys.values["num_blocks"] == 2
    assert main(["train", "ot_mnist", "--describe"]) == 0  # a dataset read from files
    assert "the model could not be built: dataset 'mnist' is read from files" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["train", "vit_digits", "--describe", "--set", "model.dimm=8"])
    assert exit_.value.code == 2
    assert "with model={'dimm': 8}, data={}: unknown solve setting 'dimm'" in capsys.readouterr().err


@pytest.mark.parametrize("preset", ["vit_digits", "signal_mnist1d"])
def test_an_unknown_model_key_fails_naming_the_keys_describe_lists(preset, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", preset, "--out-dir", str(tmp_path / "run"), "--set", "model.dimm=8"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    data = PRESETS[preset].load_data({})
    keys = model_keys(PRESETS[preset], data, {})
    assert f"unknown setting 'model.dimm' for preset {preset!r}" in error
    assert f"{keys.model} takes {', '.join(keys.values)}, and passes other keywords on to its encoder" in error
    assert f"neuralode-tf train {preset} --describe" in error and not (tmp_path / "run").exists()
    assert "vocab_size" not in keys.values  # the ViT has none; SignalClassifier sets its own (1) for TextClassifier
    # every key listed is accepted: with all of them at their values the model is the preset's
    built = {name: p.shape for name, p in PRESETS[preset].build_model(data, keys.values).state_dict().items()}
    assert built == {name: p.shape for name, p in PRESETS[preset].build_model(data, {}).state_dict().items()}


SMALL_DEMO = ["--dim", "8", "--num-heads", "2", "--tokens", "4", "--batch", "2"]


def demo_table(capsys, argv: list[str]) -> list[dict[str, str]]:
    """The rows of the table ``neuralode-tf demo`` prints, by column."""
    assert main(["demo", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("method")))
    rows = []
    for line in lines[header + 1 : header + 1 + len(demo_command.RUNS)]:
        words = line.split()
        rows.append(dict(zip(["method", "backend", "error", "evals", "steps", "ms"], [words[0], *words[-5:]])))
    return rows


def discrete_stack(field, x: torch.Tensor, depth: int) -> torch.Tensor:
    """The discrete pre-norm transformer: layer ``i`` (parameter set ``i k / D``) is ``x + G(x)``, then ``+ F(.)``."""
    sets = len(field.layers)
    for i in range(depth):
        for part in field.layers[i * sets // depth].parts:
            x = x + part(torch.tensor(float(i), dtype=x.dtype), x)
    return x


@pytest.mark.parametrize("sets", [1, 4])
def test_the_demo_prints_what_it_claims(sets, capsys):
    """The first row (Lie-Trotter, unit steps) is the discrete transformer: its error is the discrete network's
    error against the float64 dopri5 reference; every error is finite, and more steps bring it down."""
    rows = demo_table(capsys, [*SMALL_DEMO, "--sets", str(sets)])
    assert [row["method"] for row in rows] == [method for method, _ in demo_command.RUNS]
    errors = [float(row["error"]) for row in rows]
    assert all(math.isfinite(error) for error in errors)
    args = argparse.Namespace(dim=8, num_heads=2, tokens=4, batch=2, depth=4, sets=sets, seed=0)
    field, x = demo_command.problem(args)
    with torch.no_grad():
        discrete = discrete_stack(field, x, depth=4)
        torch.testing.assert_close(solve(field, x, [0.0, 4.0], method="lie_trotter", step_size=1.0).y1, discrete)
        reference = solve(field, x, [0.0, 4.0], method="dopri5", rtol=1e-10, atol=1e-10).y1
    assert rows[0]["error"] == f"{(discrete - reference).abs().max().item():.3e}"
    assert (rows[0]["evals"], rows[0]["steps"]) == ("8", "4")  # 4 unit steps of one attention and one MLP part
    assert errors[1] < errors[0] and errors[2] < errors[1]  # Lie-Trotter with 64 steps, then Strang
    assert max(errors[5:]) < 1e-4  # rk4 with 8 steps, dopri5 and tsit5 at rtol = atol = 1e-6


def test_adaptive_solvers_pay_for_the_jumps_of_independent_layers(capsys):
    """With ``--sets 4`` the field jumps at integer times, and both adaptive solvers take more steps."""
    one, four = (demo_table(capsys, [*SMALL_DEMO, "--sets", str(sets)]) for sets in (1, 4))
    for adaptive in (6, 7):  # dopri5 (torchdiffeq), tsit5 (torchode)
        assert int(four[adaptive]["steps"]) > int(one[adaptive]["steps"])
    assert (one[6]["backend"], one[7]["backend"]) == ("torchdiffeq", "torchode")


def test_demo_help_lists_its_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    options = ("--dim", "--num-heads", "--tokens", "--batch", "--depth", "--sets", "--seed", "--threads")
    assert all(option in shown for option in options)
    assert "The first row, Lie-Trotter with Euler and unit" in shown


@pytest.mark.parametrize("argv", [["--sets", "3"], ["--sets", "0"], ["--depth", "6", "--sets", "4"]])
def test_demo_refuses_sets_that_do_not_divide_the_depth(argv, capsys):
    """The help says the number of parameter sets divides the depth: another one is a usage error (exit code 2) whose
    one line names --sets, the depth and the valid divisors."""
    with pytest.raises(SystemExit) as exit_:
        main(["demo", *SMALL_DEMO, *argv])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    depth, divisors = ("6", "1, 2, 3, 6") if "--depth" in argv else ("4", "1, 2, 4")
    assert error.startswith("neuralode-tf: error: --sets ") and f"must divide --depth {depth}" in error
    assert error.endswith(f"valid: {divisors}")


def test_demo_refuses_threads_below_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", *SMALL_DEMO, "--threads", "0"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == "neuralode-tf: error: --threads must be a positive integer, got 0"
