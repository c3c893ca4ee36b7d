"""SGD with momentum and the step schedule of Wang et al. (2021, §4.1): the loop's SGD steps are the momentum update,
the ImageNet presets' learning rate follows the 5-epoch warm-up and the /10 decays at epochs 30, 60, 80 and 90, bad
settings are refused, and the other presets keep AdamW and their schedules."""

from __future__ import annotations

import math

import pytest
import torch

from neuralode_tf.continuous import regularization
from neuralode_tf.train import PRESETS, ConfigError, TrainConfig, load_checkpoint, train
from neuralode_tf.train._optim import optimizer_for, schedule_for
from neuralode_tf.train.cli import main
from neuralode_tf.train.loop import _permutation
from neuralode_tf.train.setup import build_setup

pytestmark = pytest.mark.cpu_only("short training runs and schedules on the CPU")


def test_the_imagenet_schedule_is_the_papers():
    """Wang et al. (2021, §4.1): "For the first 5 epochs, the learning rate is scaled linearly from 0 to 0.128, and
    then it is divided by 10 at epoch 30, 60, 80 and 90", on ImageNet's 5,004 steps per epoch (1,281,167 images in
    batches of 256)."""
    steps = 1_281_167 // 256
    config = TrainConfig("ea_aa_resnet34_imagenet")
    factor = schedule_for(config, steps, 100 * steps)
    warmup = 5 * steps
    for k in (0, 1, 2501, warmup - 1):
        assert factor(k) == (k + 1) / warmup
    assert math.isclose(factor(0) * config.lr, 0.128 / 25_020, rel_tol=1e-15) and factor(warmup - 1) == 1.0
    decays = {5: 1.0, 30: 0.1, 60: 0.01, 80: 1e-3, 90: 1e-4}  # from the first step of each epoch (counted from 0)
    for epoch, value in decays.items():
        before = factor(epoch * steps - 1)
        assert math.isclose(factor(epoch * steps), value, rel_tol=1e-15)
        assert math.isclose(factor(epoch * steps + steps - 1), value, rel_tol=1e-15)  # for the whole epoch
        assert epoch == 5 or math.isclose(before, 10 * value, rel_tol=1e-15)  # divided by 10
    assert math.isclose(factor(100 * steps - 1), 1e-4, rel_tol=1e-15)


def test_warmup_epochs_count_the_epochs_steps_and_keep_the_cosine_decay():
    """``warmup_epochs=E`` is ``warmup_steps=E S`` for ``S`` steps per epoch, with the step decays and without them
    (the cosine decay)."""
    for decays in ([], [3]):
        epochs = TrainConfig("vit_digits", warmup_steps=0, warmup_epochs=2, epochs=4, lr_decay_epochs=decays)
        steps = TrainConfig("vit_digits", warmup_steps=14, epochs=4, lr_decay_epochs=decays)
        by_epochs, by_steps = schedule_for(epochs, 7, 28), schedule_for(steps, 7, 28)
        assert [by_epochs(k) for k in range(30)] == [by_steps(k) for k in range(30)]


def test_sgd_steps_are_the_momentum_update(tmp_path):
    """Three steps of the loop with ``optimizer="sgd"`` are ``b ← μ b + g + λ θ`` (``b = g + λ θ`` first), then
    ``θ ← θ - η_k b``, computed here by hand from the same batches, to float32 rounding."""
    settings = dict(max_steps=3, epochs=1, batch_size=32, grad_clip=0.0, progress=False, out_dir=str(tmp_path))
    config = TrainConfig(
        "vit_digits",
        optimizer="sgd",
        lr=0.05,
        momentum=0.8,
        weight_decay=0.01,
        warmup_steps=0,
        lr_decay_epochs=[1],
        model=dict(dim=16, depth=1, num_heads=2),
        **settings,
    )
    train(config)
    torch.manual_seed(config.seed)
    setup = build_setup(config)
    model, device = setup.model, torch.device("cpu")
    parameters = [p for p in model.parameters() if p.requires_grad]
    buffers: list[torch.Tensor] = []
    order = _permutation(len(setup.train), config.seed, 0)
    model.train()
    for step in range(3):
        inputs, target = setup.batch(setup.train, order[32 * step : 32 * (step + 1)], device)
        model.zero_grad(set_to_none=True)
        (setup.loss(model(**inputs), target) + regularization(model)).backward()
        with torch.no_grad():
            for i, p in enumerate(parameters):
                direction = p.grad + config.weight_decay * p
                if step == 0:
                    buffers.append(direction.clone())
                else:
                    buffers[i] = config.momentum * buffers[i] + direction
                p -= config.lr * buffers[i]
    state = load_checkpoint(tmp_path / "checkpoint.pt")["model"]
    error = max((state[name] - p).abs().max().item() for name, p in model.named_parameters())
    assert error <= 1e-6, error  # 3e-8 measured: float32, the loop's SGD adds in another order


def test_bad_optimizer_settings_are_refused(tmp_path, capsys):
    with pytest.raises(ConfigError, match="setting optimizer='lamb' must be one of adamw, sgd"):
        TrainConfig("vit_digits", optimizer="lamb")
    for momentum in (1.0, -0.1):
        with pytest.raises(ConfigError, match=r"setting momentum=.* must lie in \[0, 1\)"):
            TrainConfig("vit_digits", optimizer="sgd", momentum=momentum)
    with pytest.raises(ConfigError, match="setting warmup_epochs=-1 must be >= 0"):
        TrainConfig("vit_digits", warmup_steps=0, warmup_epochs=-1)
    with pytest.raises(ConfigError, match=r"and 0 when warmup_steps is given \(warmup_steps=50\): set one of them"):
        TrainConfig("vit_digits", warmup_epochs=2)  # the preset's warmup_steps=50
    with pytest.raises(ConfigError, match="setting warmup_epochs=1.5 must be int"):
        TrainConfig("vit_digits", warmup_steps=0, warmup_epochs=1.5)
    with pytest.raises(SystemExit) as exit_:
        main(["train", "vit_digits", "--out-dir", str(tmp_path / "run"), "--set", "optimizer=sgdm"])
    assert exit_.value.code == 2 and "optimizer='sgdm' must be one of adamw, sgd" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_other_presets_keep_adamw_and_their_schedules():
    """Every preset but the ImageNet ones trains with AdamW at its learning rate and weight decay, and its
    schedule is the one before ``warmup_epochs`` existed: ``warmup_steps``, then the cosine or the step decays."""
    for name, preset in PRESETS.items():
        config = preset.config
        if name.endswith("_imagenet"):
            continue
        assert (config.optimizer, config.warmup_epochs) == ("adamw", 0), name
        optimizer = optimizer_for(config, torch.nn.Linear(2, 2))
        assert type(optimizer) is torch.optim.AdamW and optimizer.defaults["lr"] == config.lr
        assert optimizer.defaults["weight_decay"] == config.weight_decay
        factor, total, warmup = schedule_for(config, 10, 100), 100, config.warmup_steps
        milestones = [10 * epoch for epoch in config.lr_decay_epochs]
        for k in (0, warmup // 2, warmup, 37, 99):
            if k < warmup:
                expected = (k + 1) / warmup
            elif milestones:
                expected = 0.1 ** sum(k >= m for m in milestones)
            else:
                expected = 0.5 * (1 + math.cos(math.pi * min((k - warmup) / max(1, total - warmup), 1.0)))
            assert factor(k) == expected, (name, k)
