"""The trained models of the adaptive-depth study, each reduced to what the methods need (:class:`Subject`).

* ``vit_digits``: the preset (4 parallel blocks, Euler with unit steps on ``[0, 4]``), on scikit-learn's digits;
  quality is test accuracy.
* ``nanogpt_tweets_char``: the preset's ``baseline`` (a reduced nanoGPT: 3 pre-norm blocks, d = 96, read as a split
  field, one Lie-Trotter step per block) on the tweets' characters; quality is next-character accuracy and perplexity on
  the validation windows.
* ``gpt2_tweets_char``: a Hugging Face ``GPT2LMHeadModel`` (4 blocks, d = 96, 3 heads, no dropout) trained here by
  a plain PyTorch loop on the same characters, then converted with ``from_transformers``: the converted model's
  default solve is the Hugging Face forward, checked in the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from torch import Tensor, nn

from neuralode_tf.dynamics import depth_trajectory, find_depth_module, readout_for
from neuralode_tf.dynamics.readouts import ReadoutInputs
from neuralode_tf.models import from_transformers
from neuralode_tf.train import TrainConfig, load_run, train
from neuralode_tf.train.setup import build_setup

LM_WINDOWS = 128  # validation windows of 64 characters scored for the language models
LM_THRESHOLDS = (0.3, 0.4, 0.5)  # of a window's mean top probability (the models' accuracy is about 30 %)
GPT2 = dict(n_layer=4, n_embd=96, n_head=3, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
GPT2_TRAINING = dict(steps=600, batch=32, lr=2e-3, warmup=30)


@dataclass
class Subject:
    """A trained model read as ``dx/dt = f(t, x)`` on ``[0, t1]`` from ``x0``, with its head and its quality.

    ``field`` is the model's own (with its layer boundaries, ``jump_times``); the model's discrete forward is the
    solve with ``discrete`` (``layers`` layer evaluations). ``parts`` is how many part evaluations a splitting
    method makes per layer (``stats.nfe`` counts parts for those). ``readout(x)`` is the model's head on a state;
    ``quality(logits, targets)`` gives ``{"accuracy": %, ...}``; ``confidence(logits)`` one number per sample (the
    top softmax probability, averaged over a window's positions for a language model).
    """

    name: str
    model: nn.Module
    field: nn.Module
    x0: Tensor
    targets: Tensor
    t1: float
    layers: int
    parts: int
    discrete: dict
    readout: Callable[[Tensor], Tensor]
    quality: Callable[[Tensor, Tensor], dict]
    thresholds: tuple[float, ...]
    train_result: dict


def confidence(logits: Tensor) -> Tensor:
    """Per sample: the top softmax probability, averaged over the positions of a sequence's logits."""
    top = logits.softmax(-1).amax(-1)
    return top if top.ndim == 1 else top.flatten(1).mean(-1)


def _classification_quality(logits: Tensor, targets: Tensor) -> dict:
    return {"accuracy": 100.0 * (logits.argmax(-1) == targets).double().mean().item()}


def _lm_quality(logits: Tensor, targets: Tensor) -> dict:
    loss = nn.functional.cross_entropy(logits.flatten(0, -2).double(), targets.flatten()).item()
    return {
        "accuracy": 100.0 * (logits.argmax(-1) == targets).double().mean().item(),
        "loss": loss,
        "perplexity": math.exp(loss),
    }


def _subject(name: str, model: nn.Module, inputs: dict, targets: Tensor, quality, thresholds, result) -> Subject:
    """Read ``model`` on ``inputs``: its depth module, initial state and head; check the solve is its forward."""
    model.eval()
    module = find_depth_module(model)
    with torch.no_grad():
        start = depth_trajectory(model, [module.t0], **inputs)
        output = model(**inputs)
    if any(value is not None for value in start.conditioning.values()):
        raise ValueError(f"{name}: the study solves without conditioning, got {dict(start.conditioning)}")
    readout = readout_for(model)
    read = ReadoutInputs((), inputs, start.conditioning)
    discrete = dict(module.solve_options)
    layers = len(module.field.jump_times) + 1
    parts = len(module.field.parts) if discrete["method"] in ("lie_trotter", "strang") else 1
    assert module.stats is not None and module.stats.nfe == layers * parts, (module.stats, layers, parts)
    subject = Subject(
        name,
        model,
        module.field,
        start.states[0],
        targets,
        float(module.t1),
        layers,
        parts,
        discrete,
        lambda x: readout(model, x, read),
        quality,
        thresholds,
        result,
    )
    return subject, output


def vit_digits(seed: int, workdir: Path) -> Subject:
    out = workdir / f"vit_digits_seed{seed}"
    result = train(TrainConfig("vit_digits", seed=seed, progress=False, out_dir=str(out)))
    _, setup = load_run(out)
    inputs, targets = setup.batch(setup.test, torch.arange(len(setup.test)), torch.device("cpu"))
    subject, output = _subject(
        "vit_digits", setup.model, inputs, targets, _classification_quality, (0.9, 0.99, 0.999), result
    )
    assert abs(_classification_quality(output, targets)["accuracy"] - 100 * result["test_accuracy"]) < 1e-9
    return subject


def nanogpt_tweets_char(seed: int, workdir: Path) -> Subject:
    out = workdir / f"nanogpt_tweets_char_seed{seed}"
    result = train(TrainConfig("nanogpt_tweets_char", seed=seed, progress=False, out_dir=str(out)))
    _, setup = load_run(out)
    inputs, targets = setup.batch(setup.test, torch.arange(LM_WINDOWS), torch.device("cpu"))
    return _subject("nanogpt_tweets_char", setup.model, inputs, targets, _lm_quality, LM_THRESHOLDS, result)[0]


def gpt2_tweets_char(seed: int, workdir: Path) -> Subject:
    """Train a small ``GPT2LMHeadModel`` on the tweets' characters (AdamW, linear warm-up, cosine decay), convert it."""
    setup = build_setup(TrainConfig("nanogpt_tweets_char"))
    train_split, test_split = setup.train, setup.test
    torch.manual_seed(seed)
    sizes = dict(vocab_size=train_split.vocab_size, n_positions=train_split.block_size)
    config = transformers.GPT2Config(**sizes, bos_token_id=None, eos_token_id=None, **GPT2)
    hf = transformers.GPT2LMHeadModel(config).train()
    steps, batch, warmup = GPT2_TRAINING["steps"], GPT2_TRAINING["batch"], GPT2_TRAINING["warmup"]
    optimizer = torch.optim.AdamW(hf.parameters(), lr=GPT2_TRAINING["lr"], weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)),
    )
    generator = torch.Generator().manual_seed(seed)
    for step in range(steps):
        rows = torch.randint(len(train_split), (batch,), generator=generator)
        inputs, targets = setup.batch(train_split, rows, torch.device("cpu"), epoch=step)
        logits = hf(input_ids=inputs["tokens"]).logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    hf.eval()
    inputs, targets = setup.batch(test_split, torch.arange(LM_WINDOWS), torch.device("cpu"))
    converted = from_transformers(hf).eval()
    subject, output = _subject(
        "gpt2_tweets_char", converted, {"input_ids": inputs["tokens"]}, targets, _lm_quality, LM_THRESHOLDS, {}
    )
    with torch.no_grad():
        reference = hf(input_ids=inputs["tokens"]).logits
    gap = (output - reference).abs().max().item()
    assert gap < 1e-4, f"the converted GPT-2 is not the Hugging Face forward: max |Δ| = {gap:.2e}"
    subject.train_result = {"steps": steps, "final_train_loss": loss.item(), **_lm_quality(output, targets)}
    return subject


SUBJECTS: dict[str, Callable[[int, Path], Subject]] = {
    "vit_digits": vit_digits,
    "nanogpt_tweets_char": nanogpt_tweets_char,
    "gpt2_tweets_char": gpt2_tweets_char,
}
