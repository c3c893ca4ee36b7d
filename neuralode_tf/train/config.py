"""Training configuration: a preset's settings, a config file, and command-line overrides."""

from __future__ import annotations

import copy
import json
import sys
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .._renamed import renamed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["TrainConfig", "ConfigError", "apply_overrides", "load_config", "base_settings"]


class ConfigError(ValueError):
    """A setting is unknown or has the wrong type; raised before a run writes anything."""


_OPTIMIZERS = ("adamw", "sgd")

_RANGES: dict[str, tuple[Any, str]] = {
    "epochs": (lambda v: v >= 1, ">= 1"),
    "batch_size": (lambda v: v >= 1, ">= 1"),
    "eval_batch_size": (lambda v: v >= 1, ">= 1"),
    "lr": (lambda v: 0 < v < float("inf"), "a finite number > 0"),
    "weight_decay": (lambda v: 0 <= v < float("inf"), "a finite number >= 0"),
    "warmup_steps": (lambda v: v >= 0, ">= 0"),
    "grad_clip": (lambda v: 0 <= v < float("inf"), "a finite number >= 0 (0: no clipping)"),
    "checkpoint_every": (lambda v: v >= 0, ">= 0 (0: at the end only)"),
    "eval_every": (lambda v: v >= 0, ">= 0 (0: the test split at the end only)"),
    "max_steps": (lambda v: v is None or v >= 1, "None or >= 1"),
    "threads": (lambda v: v is None or v >= 1, "None (the CPUs available) or >= 1"),
    "device": (lambda v: v in ("auto", "cpu", "cuda") or v.startswith("cuda:"), "'auto', 'cpu', 'cuda' or 'cuda:N'"),
}
"""The values each setting accepts beyond its type, and how to say so."""


class _FromPreset:
    """The default of every :class:`TrainConfig` field but ``preset``: the preset's own value."""

    def __repr__(self) -> str:
        return "<the preset's>"


_FROM_PRESET: Any = _FromPreset()


def _setting(base: Any) -> Any:
    """A :class:`TrainConfig` field that defaults to the preset's value; ``base`` is the value of a preset that
    does not set it (see :func:`base_settings`)."""
    return field(default=_FROM_PRESET, metadata={"base": base})


@dataclass
class TrainConfig:
    """Everything a run needs: a preset's settings, with any of them overridden.

    **A field that is not given takes the preset's value**, so ``TrainConfig("vit_digits")`` is the run of
    ``neuralode-tf train vit_digits`` and ``TrainConfig("vit_digits", epochs=5)`` that of
    ``neuralode-tf train vit_digits --set epochs=5``: both build their config with this class. A preset sets some
    fields (``neuralode-tf train PRESET --describe`` prints them all); the others take the base values given in
    parentheses below. ``model`` and ``data`` hold keyword arguments for the preset's model builder and dataset
    and replace the preset's (empty) ones.

    Attributes:
        preset: Name of the preset (see ``neuralode-tf train --list``).
        epochs: Passes over the training split (10).
        batch_size: Global batch size, split across processes under torchrun (64).
        lr, weight_decay, warmup_steps: AdamW (Adam when ``weight_decay=0``) with linear warm-up, then cosine
            decay (``1e-3``, 0, 0).
        optimizer: ``"adamw"`` (decoupled weight decay) or ``"sgd"``: SGD with ``momentum`` and the weight decay added
            to the gradient (L2), as in the ImageNet training of Wang et al. (2021, §4.1: "SGD with momentum 0.9 ...
            weight decay is 1e-4") (``"adamw"``).
        momentum: The momentum of ``"sgd"``, in ``[0, 1)``; AdamW does not read it (0.9).
        warmup_epochs: A linear warm-up over this many epochs instead of ``warmup_steps`` (at most one of them is
            non-zero): Wang et al.'s "for the first 5 epochs, the learning rate is scaled linearly from 0 to
            0.128" is ``warmup_epochs=5`` with ``lr=0.128`` (0).
        lr_decay_epochs: Instead of the cosine decay, divide the learning rate by 10 once each of these numbers
            of epochs is done: the step schedules of Kan et al. (2025, Appendix B), e.g. ``[35, 40]`` for MNIST
            ("5e-4 for the first 35 epochs, then 5e-5 until the 41st epoch, ... then 5e-6"), or after a warm-up
            Wang et al.'s (2021, §4.1) ``[30, 60, 80, 90]`` ("divided by 10 at epoch 30, 60, 80 and 90") (``[]``).
        grad_clip: Gradient-norm clipping; 0 disables it, as in the OT presets, since Sinkformers' code does not
            clip (1).
        grad_accumulation: Micro-batches per step: each process cuts its share of the batch into this many and
            back-propagates the mean of their losses, the transport cost included, so a step's gradient is that of
            the whole batch (each micro-batch's loss is a mean over as many targets) (1).
        seed: Seeds the model's initialisation and the data order of every epoch (0).
        out_dir: Where ``checkpoint.pt``, ``metrics.csv``, ``metrics.json`` and ``config.json`` go (``config.json``
            with each checkpoint, so an earlier run's files stay as they were until this run has one)
            (``runs/<preset>``).
        checkpoint_every: Write a checkpoint every this many steps (0: only at the end, or when SIGTERM or SIGINT
            stops the run) (0).
        max_steps: Stop after this many steps in total, for quick runs and tests (``None``).
        resume: Continue from ``out_dir/checkpoint.pt`` if it exists, loaded with ``weights_only=True`` (False).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (``"auto"``).
        threads: CPU threads of torch's operations during the run (``None``: torch's default bounded by the CPUs
            this process may use, its affinity mask and cgroup quota, shared among a ``torchrun`` job's local
            processes). Torch's own setting is restored afterwards; the number used is ``result["threads"]``.
        eval_batch_size: Batch size of the evaluation on the test split (256).
        eval_every: Evaluate the test split every this many epochs as well, in eval mode and without touching the
            random state, so training is unchanged: the test accuracy and mean test loss go to the columns
            ``test_accuracy`` and ``test_loss`` of ``metrics.csv`` at the last step of each such epoch and of the
            run (NaN on the other steps) and to the learning curves of ``neuralode-tf compare``, for learning-curve
            figures such as Kan et al.'s (2025) Figures 2-5 (0: only at the end, no such columns) (0).
        progress: Show the tqdm bar and print the result (True).
        model, data: Overrides of the model builder's and the dataset's keywords (``{}``).

    Every field is checked against its type on construction (an int is accepted where a float is expected, a bool
    is not accepted as a number), and an unknown preset is refused: both raise :class:`ConfigError` naming the
    setting. The keys of ``model`` and ``data`` are checked by :func:`~neuralode_tf.train.train` before it writes
    anything.
    """

    preset: str
    epochs: int = _setting(10)
    batch_size: int = _setting(64)
    lr: float = _setting(1e-3)
    weight_decay: float = _setting(0.0)
    warmup_steps: int = _setting(0)
    optimizer: str = _setting("adamw")
    momentum: float = _setting(0.9)
    warmup_epochs: int = _setting(0)
    lr_decay_epochs: list[int] = _setting([])
    grad_clip: float = _setting(1.0)
    grad_accumulation: int = _setting(1)
    seed: int = _setting(0)
    out_dir: str = _setting("runs/<preset>")
    checkpoint_every: int = _setting(0)
    max_steps: int | None = _setting(None)
    resume: bool = _setting(False)
    device: str = _setting("auto")
    threads: int | None = _setting(None)
    eval_batch_size: int = _setting(256)
    eval_every: int = _setting(0)
    progress: bool = _setting(True)
    model: dict[str, Any] = _setting({})
    data: dict[str, Any] = _setting({})

    def __post_init__(self) -> None:
        if isinstance(self.preset, str):
            self.preset = renamed("preset", self.preset, RENAMED_PRESETS, stacklevel=4)
        unset = [entry.name for entry in fields(self) if getattr(self, entry.name) is _FROM_PRESET]
        if unset:
            preset = _preset_config(self.preset)
            for name in unset:
                setattr(self, name, copy.deepcopy(getattr(preset, name)))
        hints = typing.get_type_hints(TrainConfig)
        for entry in fields(self):
            value, kinds = getattr(self, entry.name), _kinds(hints[entry.name])
            if not any(_is(value, kind) for kind in kinds):
                expected = " or ".join("None" if kind is type(None) else kind.__name__ for kind in kinds)
                raise ConfigError(f"setting {entry.name}={value!r} must be {expected}, not {type(value).__name__}")
        for name, (accepts, what) in _RANGES.items():
            if not accepts(getattr(self, name)):
                raise ConfigError(f"setting {name}={getattr(self, name)!r} must be {what}")
        if not all(_is(epoch, int) and epoch >= 1 for epoch in self.lr_decay_epochs):
            raise ConfigError(f"setting lr_decay_epochs={self.lr_decay_epochs!r} must list epochs >= 1")
        if self.grad_accumulation < 1:
            raise ConfigError(f"setting grad_accumulation={self.grad_accumulation!r} must be >= 1")
        if self.optimizer not in _OPTIMIZERS:
            raise ConfigError(f"setting optimizer={self.optimizer!r} must be one of {', '.join(_OPTIMIZERS)}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"setting momentum={self.momentum!r} must lie in [0, 1)")
        if self.warmup_epochs < 0 or (self.warmup_epochs and self.warmup_steps):
            raise ConfigError(
                f"setting warmup_epochs={self.warmup_epochs!r} must be >= 0, and 0 when warmup_steps is given "
                f"(warmup_steps={self.warmup_steps!r}): set one of them"
            )


def base_settings(preset: str) -> dict[str, Any]:
    """Every :class:`TrainConfig` field of the preset ``preset`` that sets none: the base values, with
    ``out_dir="runs/<preset>"`` (for :func:`~neuralode_tf.train.presets.register_preset`)."""
    base = {entry.name: copy.deepcopy(entry.metadata["base"]) for entry in fields(TrainConfig) if entry.metadata}
    return {**base, "preset": preset, "out_dir": f"runs/{preset}"}


PRESET_CONFIGS: dict[str, TrainConfig] = {}
"""Each preset's run by name, which unset fields are filled from. :func:`~neuralode_tf.train.presets.register_preset`
adds every preset it makes, so this module imports none of them (the presets are built from it)."""


RENAMED_PRESETS: dict[str, str] = {
    "set_shapes3d": "set_transformer_shapes3d",
    "transformer_mnist1d": "signal_mnist1d",
    "ea_digits_vit": "ea_vit_digits",
    "ea_tweets_text": "ea_text_tweets",
    "ea_digits_resnet": "ea_aa_resnet_digits",
    "ea_reverse_seq2seq": "ea_seq2seq_reverse",
    "zhong_reverse_seq2seq": "zhong_seq2seq_reverse",
    "ot_catsdogs_vit": "ot_catsdogs",
    "ot_mnist_vit": "ot_mnist_digits",
    "ot_imdb_text": "ot_imdb_tweets",
    "ot_modelnet_set": "ot_modelnet40_shapes3d",
    "ot_gpt2_owt": "ot_gpt2_openwebtext",
    "lm_tweets_char": "nanogpt_tweets_char",
    "zhong_lm_tweets_char": "zhong_nanogpt_tweets_char",
}
"""The presets' former names, each now ``<model>_<dataset>``: ``TrainConfig``, ``PRESETS[...]``, ``VARIANTS[...]``
and the command line still accept them, with a :class:`DeprecationWarning`, until the next release."""


def _preset_config(name: Any) -> TrainConfig:
    if name not in PRESET_CONFIGS:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(PRESET_CONFIGS)}")
    return PRESET_CONFIGS[name]


def _kinds(hint: Any) -> tuple[type, ...]:
    """The classes a type hint allows: ``int | None`` -> ``(int, NoneType)``, ``dict[str, Any]`` -> ``(dict,)``."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return tuple(typing.get_origin(kind) or kind for kind in allowed)


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, (int, float) if kind is float else kind)


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a JSON or TOML config file into a dict of :class:`TrainConfig` fields; another key raises
    :class:`ConfigError`."""
    path = Path(path)
    if path.suffix not in (".toml", ".json"):
        raise ConfigError(f"config files must be .json or .toml, got {path.name}")
    try:
        text = path.read_text()
        values = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except OSError as error:
        raise ConfigError(f"cannot read the config file {str(path)!r}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"the config file {str(path)!r} is not valid {path.suffix[1:].upper()}: {error}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"the config file {str(path)!r} must hold a table of settings, got {type(values).__name__}")
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        raise ConfigError(f"unknown settings {unknown} in {path}; valid: {sorted(_FIELDS)}")
    return values


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides; dotted keys reach into ``model`` and ``data`` (``model.dim=64``), which
    start from ``values``' dicts (empty ones if ``values`` has none).

    Values are parsed as JSON where possible (numbers, booleans, null, lists), else kept as strings. An unknown
    top-level key raises :class:`ConfigError` naming it and the valid ones; value types are checked when the
    :class:`TrainConfig` is built.
    """
    values = dict(values)
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep:
            raise ConfigError(f"override {override!r} must look like key=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        head, dot, rest = key.partition(".")
        if dot:
            if head not in ("model", "data"):
                raise ConfigError(f"dotted overrides must start with model. or data., got {key!r}")
            values[head] = {**values.get(head, {}), rest: value}
        elif key in _FIELDS:
            values[key] = value
        else:
            raise ConfigError(f"unknown setting {key!r}; valid: {sorted(_FIELDS)} or model.<arg>, data.<arg>")
    return values


_FIELDS = {entry.name for entry in fields(TrainConfig)}
