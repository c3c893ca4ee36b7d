"""Wang et al. (2021), Table 1: parameters and FLOPs of ResNet, AA-ResNet and EA-AA-ResNet-34/50/101/152.

The models are timm's ``resnet{depth}`` and the library's :func:`~neuralode_tf.models.aa_resnet` (registered as
``aa_resnet{depth}`` and ``ea_aa_resnet{depth}``), built on the meta device: the counts need the shapes only, and
:class:`~neuralode_tf.flops.FlopCounter` counts one forward pass of a 224x224 image from the shapes of the operations
the model calls (2 per multiply-add: convolutions, matrix products, attention), the same on every torch build.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from neuralode_tf.flops import FlopCounter
from neuralode_tf.models import create_model

DEPTHS = (34, 50, 101, 152)
KINDS = ("resnet", "aa", "ea")


def _model(kind: str, depth: int) -> nn.Module:
    import timm

    with torch.device("meta"):
        if kind == "resnet":
            return timm.create_model(f"resnet{depth}")
        return create_model(f"{'ea_' if kind == 'ea' else ''}aa_resnet{depth}")


@functools.cache
def table1_costs() -> dict[tuple[str, int], tuple[int, int]]:
    """``(kind, depth) -> (parameters, FLOPs)`` of every model of Table 1."""
    costs = {}
    for kind in KINDS:
        for depth in DEPTHS:
            model = _model(kind, depth).eval()
            with FlopCounter() as flops, torch.no_grad():
                model(torch.empty(1, 3, 224, 224, device="meta"))
            costs[kind, depth] = (sum(p.numel() for p in model.parameters()), flops.total)
    return costs


def _row(kind: str, index: int, unit: float, suffix: str) -> str:
    return " / ".join(f"{table1_costs()[kind, depth][index] / unit:.1f}{suffix}" for depth in DEPTHS)


def resnet_parameters() -> str:
    return _row("resnet", 0, 1e6, "M")


def aa_parameters() -> str:
    return _row("aa", 0, 1e6, "M")


def ea_aa_parameters() -> str:
    return _row("ea", 0, 1e6, "M")


def resnet_flops() -> str:
    return _row("resnet", 1, 1e9, "G")


def aa_flops() -> str:
    return _row("aa", 1, 1e9, "G")


def ea_aa_flops() -> str:
    return _row("ea", 1, 1e9, "G")


def ea_extra_flops() -> str:
    """What evolving attention adds to AA-ResNet's FLOPs (the convolutions of eq. 4 on the logit maps)."""
    costs = table1_costs()
    return " / ".join(f"+{(costs['ea', d][1] - costs['aa', d][1]) / 1e9:.1f}G" for d in DEPTHS)

