"""timm ResNets (plain, AA- or EA-AA-) read as ODEs over the blocks of each stage that keep the feature map's shape."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ...continuous import ContinuousDepth
from ...fields import SplitField, WeightSharedField
from ...nn.aa_conv import AugmentedConv2d, LogitChain

__all__ = ["ContinuousResNet", "continuous_resnet"]


class ContinuousResNet(nn.Module):
    """A timm ResNet whose stages continue, after their first block, as a :class:`~neuralode_tf.ContinuousDepth`.

    **Reading.** A ResNet (v1) block ``x' = ReLU(x + R(x))`` (``R`` the residual branch: convolutions, batch
    norms, activations; He et al. 2016) is not an Euler step: its activation comes after the sum. As for
    post-norm transformers, the activation is read as a part of its own, the relaxation ``P(x) = ReLU(x) - x``,
    whose Euler step of size 1 is ``ReLU(x)``. The blocks ``m = 1 .. M`` after a stage's first (which changes
    the width and the resolution, so it stays a map) are one Lie-Trotter Euler step of size 1 each of

    .. math:: \\frac{dx}{dt} = R_m(x) + \\big(\\mathrm{ReLU}(x) - x\\big), \\qquad m = \\lceil t \\rceil \\in 1..M.

    **Evolving attention** (an EA-AA-ResNet of :func:`~neuralode_tf.models.aa_resnet`): the state is
    ``(x, A)``, the features and the attention logits carried from block to block. Block ``m`` reads ``A``
    through its augmented convolutions (eq. 4 of Wang et al. 2021, one after the other in a basic block) and
    gives the logits ``L_m(x, A)`` of its last one; the field is

    .. math:: \\frac{dx}{dt} = R_m(x, A) + \\big(\\mathrm{ReLU}(x) - x\\big), \\qquad \\frac{dA}{dt} = L_m(x, A) - A,

    so that an Euler step of size 1 replaces ``A`` by ``L_m``, as the discrete network does
    (:class:`~neuralode_tf.fields.EvolvingAttentionField` reads transformer blocks the same way). ``A``
    starts from the logits of the stage's first block and is handed on to the next stage's first block.

    With the default, one Lie-Trotter Euler step per block, the model computes the timm model's forward
    exactly (to rounding; ``tests/test_aa_resnet.py``); other methods and steps integrate the same ODE.
    Drop-path, if the model has it, is left out of the field (it would make the field random within a step).
    Batch norms run in the model's mode: in training mode every evaluation of the field normalises with its
    own batch statistics and updates the running ones, so solve with one evaluation per block, or in eval mode.

    Attributes:
        resnet: The timm model. Its stages stay in place, sharing their modules with the ODEs, so
            ``resnet(images)`` still runs the discrete network.
        tails: Per stage, the :class:`~neuralode_tf.ContinuousDepth` over its blocks after the first, or an
            identity for a stage of one block.
    """

    def __init__(self, resnet: Any, tails: nn.ModuleList):
        super().__init__()
        self.resnet = resnet
        self.tails = tails

    def forward_features(self, images: Tensor) -> Tensor:
        """timm's stem (``conv1``, ``bn1``, ``act1``, ``maxpool``), then each stage's first block and its ODE."""
        r = self.resnet
        x = r.maxpool(r.act1(r.bn1(r.conv1(images))))
        for stage, tail in enumerate(self.tails, start=1):
            x = tail(getattr(r, f"layer{stage}")[0](x))
        return x

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """timm's head (global pooling, dropout, ``fc``)."""
        return self.resnet.forward_head(x, pre_logits=pre_logits)

    def forward(self, images: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(images))


def continuous_resnet(resnet: nn.Module, **solve_options: Any) -> ContinuousResNet:
    """The timm ResNet ``resnet`` (plain, or from :func:`~neuralode_tf.models.aa_resnet`) with each stage's
    blocks after the first read as an ODE (:class:`ContinuousResNet`), sharing its modules.

    Args:
        resnet: A timm ``ResNet`` of ``BasicBlock`` or ``Bottleneck`` blocks.
        **solve_options: Settings of each stage's :class:`~neuralode_tf.ContinuousDepth` on ``[0, M]`` (``M``
            blocks): ``method`` (default ``"lie_trotter"``), ``step_size`` (per block; 1 by default), ``gradient``,
            ``rtol``, ... ``steps`` is refused: the stages have different lengths, give ``step_size``.
    """
    from timm.models.resnet import BasicBlock, Bottleneck

    if "steps" in solve_options:
        raise ValueError("continuous_resnet: stages differ in length; give step_size (per block) instead of steps")
    solve_options.setdefault("method", "lie_trotter")
    tails: list[nn.Module] = []
    for stage in range(1, 5):
        blocks = list(getattr(resnet, f"layer{stage}", ()))
        if not blocks or not all(isinstance(b, (BasicBlock, Bottleneck)) for b in blocks):
            raise TypeError("continuous_resnet reads timm ResNets of BasicBlock or Bottleneck blocks (layer1-layer4)")
        if any(b.downsample is not None for b in blocks[1:]):
            raise TypeError(f"layer{stage} changes shape after its first block")
        if len(blocks) == 1:
            tails.append(nn.Identity())
            continue
        chain = _chain(blocks)
        layers = [SplitField(_ResidualPart(b, chain is not None), _ActivationPart(b)) for b in blocks[1:]]
        field = WeightSharedField(layers, len(layers)) if chain is None else _EvolvingStage(layers, chain)
        tails.append(ContinuousDepth(field, t1=len(layers), **solve_options))
    return ContinuousResNet(resnet, nn.ModuleList(tails))


def _chain(blocks: list[nn.Module]) -> LogitChain | None:
    """The logit chain the stage's evolving convolutions share, or ``None`` (no evolving attention)."""
    chains = {id(c._chain): c._chain for b in blocks for c in b.modules() if isinstance(c, AugmentedConv2d)}
    evolving = [c for c in chains.values() if c is not None]
    return evolving[0] if evolving else None


class _EvolvingStage(WeightSharedField):
    """The stage's blocks after the first on ``[0, M]``, on the state ``(x, A)``."""

    def __init__(self, layers: Sequence[nn.Module], chain: LogitChain):
        super().__init__(layers, len(layers))
        self._chain = chain

    def initial_state(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(x, A)``: the features and the logits the stage's first block left."""
        logits = self._chain.logits
        if logits is None:
            raise RuntimeError("the stage's first block left no attention logits")
        return x, logits

    def final_state(self, y: tuple[Tensor, Tensor]) -> tuple[Tensor, None]:
        """The features; the logits go on to the next stage's first block."""
        self._chain.logits = y[1]
        return y[0], None


class _ResidualPart(nn.Module):
    """``R(x)`` of a timm block (its modules in timm's order, without the shortcut and the last activation);
    on ``(x, A)``: ``(R(x, A), L(x, A) - A)``."""

    def __init__(self, block: nn.Module, evolving: bool):
        super().__init__()
        self.block = block
        self.evolving = evolving

    def forward(self, t: Tensor, y: Any) -> Any:
        x, logits = y if self.evolving else (y, None)
        b: Any = self.block
        carried = [logits]

        def conv(module: nn.Module, h: Tensor) -> Tensor:
            if not isinstance(module, AugmentedConv2d):
                return module(h)
            out, new = module.attend(h, carried[0])
            carried[0] = carried[0] if new is None else new
            return out

        if hasattr(b, "conv3"):  # Bottleneck
            h = b.act1(b.bn1(b.conv1(x)))
            h = b.bn3(b.conv3(b.aa(b.act2(b.drop_block(b.bn2(conv(b.conv2, h)))))))
        else:  # BasicBlock
            h = b.aa(b.act1(b.drop_block(b.bn1(conv(b.conv1, x)))))
            h = b.bn2(conv(b.conv2, h))
        if b.se is not None:
            h = b.se(h)
        return (h, carried[0] - y[1]) if self.evolving else h


class _ActivationPart(nn.Module):
    """``σ(x) - x`` for the block's last activation ``σ`` (a relaxation, :class:`ContinuousResNet`); the logits do
    not move. An in-place activation is applied out of place: it would overwrite the state."""

    def __init__(self, block: nn.Module):
        super().__init__()
        activation: Any = block.act3 if hasattr(block, "act3") else block.act2
        self.activation = copy.copy(activation)
        if getattr(self.activation, "inplace", False):
            self.activation.inplace = False

    def forward(self, t: Tensor, y: Any) -> Any:
        if isinstance(y, tuple):
            x, logits = y
            return self.activation(x) - x, torch.zeros_like(logits)
        return self.activation(y) - y
