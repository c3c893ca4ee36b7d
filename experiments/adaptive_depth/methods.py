"""The methods of the adaptive-depth study, each a point of quality against layer evaluations per sample.

One **layer evaluation** is one evaluation of the whole field (every part of one layer on one state); a splitting
method's ``stats.nfe`` counts single parts, so it is divided by the subject's ``parts``. A batch-joint solve evaluates
every sample at every call, so its count per sample is ``nfe (in layers) + nfe_dense``. Per-sample methods solve one
sample at a time and report the mean of their counts. ``seconds`` is the wall-clock time of the point's solves and
readouts over the whole evaluation set.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from subjects import Subject, confidence
from torch import Tensor

from neuralode_tf.numerics import solve

TOLERANCES = (1e-1, 1e-2, 1e-3, 1e-4)
PER_SAMPLE_TOLERANCES = (1e-1, 1e-2, 1e-3)
CHANGE_THRESHOLDS = (0.2, 0.05, 0.01)  # mean KL(q_k || q_{k-1}) below which a sample exits after layer k
SPLITTING = ("lie_trotter", "strang")


class Unaligned(torch.nn.Module):
    """The field ``f(t, x)`` of a stack without its ``jump_times``: a solver's grid ignores the layer boundaries, so a
    step of length ``t1 / steps`` uses the layer its stages fall in and skips the others. Its ``parts`` (for the
    splitting methods) are the field's."""

    def __init__(self, field: torch.nn.Module):
        super().__init__()
        self.inner = field

    @property
    def parts(self):
        return self.inner.parts

    def forward(self, t: Tensor, x: Tensor) -> Tensor:
        return self.inner(t, x)


def _layers(subject: Subject, stats, method: str) -> float:
    evaluations = stats.nfe / subject.parts if method in SPLITTING else stats.nfe
    return evaluations + stats.nfe_dense


def _point(family: str, settings: dict, quality: dict, evaluations: float, seconds: float, **extra) -> dict:
    return dict(family=family, settings=settings, **quality, evaluations=evaluations, seconds=seconds, **extra)


def _timed(run: Callable[[], tuple]) -> tuple:
    start = time.perf_counter()
    with torch.no_grad():
        out = run()
    return (*out, time.perf_counter() - start)


def measure(subject: Subject, per_sample: bool = True, early_exit: bool = True) -> dict[str, dict]:
    """Every point of the study on ``subject``: ``{name: {family, settings, accuracy, ..., evaluations, seconds}}``."""
    s, points = subject, {}
    L, t1, discrete_method = s.layers, s.t1, s.discrete["method"]

    def joint(name: str, family: str, field: torch.nn.Module, t_end: float, **options) -> Tensor:
        solution, seconds = _timed(lambda: (solve(field, s.x0, [0.0, t_end], **options),))[0:2]
        logits = s.readout(solution.y1)
        evaluations = _layers(s, solution.stats, options["method"])
        points[name] = _point(family, options, s.quality(logits, s.targets), evaluations, seconds)
        return logits

    discrete = joint("discrete", "discrete", s.field, t1, **s.discrete)
    assert points["discrete"]["evaluations"] == L
    joint(f"{discrete_method}, 1 step (layer-aligned)", "fixed grid (layer-aligned)", s.field, t1,
          method=discrete_method, steps=1)  # fmt: skip
    aligned = points[f"{discrete_method}, 1 step (layer-aligned)"]
    assert aligned["evaluations"] == L and aligned["accuracy"] == points["discrete"]["accuracy"]
    for tol in TOLERANCES:
        joint(f"dopri5 joint, tol {tol:g}", "dopri5 (batch-joint)", s.field, t1, method="dopri5", rtol=tol, atol=tol)
    free = Unaligned(s.field)
    grids = [("euler", k) for k in range(1, L)] + [("midpoint", 1), ("rk4", 1)]
    if discrete_method in SPLITTING:
        grids += [(discrete_method, k) for k in range(1, L)]
    for method, steps in grids:
        joint(f"{method}, {steps} step{'s' * (steps > 1)}", "fixed grid (fewer steps)", free, t1, method=method,
              steps=steps)  # fmt: skip
    for k in range(1, L):
        joint(f"drop last {L - k} (depth {k})", "drop last layers", s.field, float(k), **s.discrete)
        assert points[f"drop last {L - k} (depth {k})"]["evaluations"] == k

    _layer_exits(s, points, discrete)
    if per_sample:
        for tol in PER_SAMPLE_TOLERANCES:
            _per_sample(s, points, f"dopri5 per sample, tol {tol:g}", "dopri5 (per sample)",
                        dict(method="dopri5", rtol=tol, atol=tol))  # fmt: skip
    if early_exit:
        for threshold in s.thresholds:
            _event_exit(s, points, threshold)
    return points


def _layer_exits(s: Subject, points: dict, final: Tensor) -> None:
    """Early exit at layer boundaries, from the readouts after each layer: a sample exits at the first layer whose
    readout is confident (top probability ``>= p``) or has stopped changing (``KL(q_k || q_{k-1}) < ε``). The
    batched readouts compute every layer; a sample's cost is the layers it needs. Head applications are not counted.
    """
    start = time.perf_counter()
    with torch.no_grad():
        states = solve(s.field, s.x0, torch.arange(s.layers + 1, dtype=torch.float64) * (s.t1 / s.layers),
                       **s.discrete).ys  # fmt: skip
        logits = torch.stack([s.readout(x) for x in states[1:]])  # (L, B, ...)
    assert torch.equal(logits[-1], final)
    log_q = logits.log_softmax(-1)
    kl = (log_q[1:].exp() * (log_q[1:] - log_q[:-1])).sum(-1)  # KL(q_k || q_{k-1}), k = 2..L
    kl = kl if kl.ndim == 2 else kl.flatten(2).mean(-1)
    seconds = time.perf_counter() - start
    rules = {f"exit at layer, p >= {p:g}": ("early exit (confident)", dict(threshold=p),
                                            torch.stack([confidence(z) for z in logits]) >= p) for p in s.thresholds}
    for eps in CHANGE_THRESHOLDS:
        settled = torch.cat([torch.zeros_like(kl[:1], dtype=torch.bool), kl < eps])  # no exit after the first layer
        rules[f"exit when KL < {eps:g}"] = ("early exit (stops changing)", dict(kl_threshold=eps), settled)
    for name, (family, settings, exits) in rules.items():
        exits = exits.clone()
        exits[-1] = True
        layer = exits.double().argmax(0)  # first exit (0-based)
        chosen = logits[layer, torch.arange(len(layer))]
        evaluations = (layer + 1).double().mean().item()
        points[name] = _point(family, settings, s.quality(chosen, s.targets), evaluations, seconds)


def _per_sample(s: Subject, points: dict, name: str, family: str, options: dict) -> None:
    """One solve per sample with ``options``: its quality and the mean count."""
    logits, evaluations = [], 0.0
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(len(s.x0)):
            solution = solve(s.field, s.x0[i : i + 1], [0.0, s.t1], **options)
            logits.append(s.readout(solution.y1))
            evaluations += _layers(s, solution.stats, options["method"])
    quality = s.quality(torch.cat(logits), s.targets)
    points[name] = _point(family, options, quality, evaluations / len(s.x0), time.perf_counter() - start)


def _event_exit(s: Subject, points: dict, threshold: float) -> None:
    """Per sample, the discrete solve with the event ``g(t, x) = confidence(readout(x)) - p``, watched from the first
    layer's output on (as the layer exits: the readout of the embedding, ``t = 0``, is no prediction; a tied
    unembedding makes it confidently predict the current token): the solve stops where ``g`` first turns
    positive, located on the dense output between layers. A sample confident after the first layer exits there."""
    unit = s.t1 / s.layers
    options = dict(s.discrete, step_size=unit)
    logits, evaluations, depths = [], 0.0, []
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(len(s.x0)):
            first = solve(s.field, s.x0[i : i + 1], [0.0, unit], **options)
            evaluations += _layers(s, first.stats, options["method"])
            x, depth = first.y1, unit
            if confidence(s.readout(x)).item() < threshold:
                solution = solve(s.field, x, [unit, s.t1], **options,
                                 event=lambda t, y: confidence(s.readout(y)).squeeze(0) - threshold)  # fmt: skip
                evaluations += _layers(s, solution.stats, options["method"])
                x, depth = solution.y1, s.t1 if solution.event_t is None else float(solution.event_t)
            logits.append(s.readout(x))
            depths.append(depth)
    quality = s.quality(torch.cat(logits), s.targets)
    points[f"event exit, p >= {threshold:g}"] = _point(
        "early exit (event)",
        dict(options, threshold=threshold),
        quality,
        evaluations / len(s.x0),
        time.perf_counter() - start,
        mean_exit_depth=sum(depths) / len(depths),
    )
