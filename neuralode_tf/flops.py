"""Analytic FLOP counts from explicit per-operation formulas, the same on every torch build.

Wang et al. (2021, §4.3) report FLOPs "following the code by HAT" (Wang et al. 2020): the
multiply-adds of one forward pass of a pseudo sample, times 2, without the output softmax.
:class:`FlopCounter` counts a forward pass the same way, operation by operation, as the model calls
them through the torch API (it is a :class:`~torch.overrides.TorchFunctionMode`, so it sees the calls
the model makes, not the kernels a particular torch build dispatches them to):

=====================================================  =============================================
operation                                              FLOPs (2 per multiply-add)
=====================================================  =============================================
``F.linear(x, W)``, ``W`` of shape ``(out, in)``        ``2 · x.numel() · out``
``a @ b``, ``matmul``, ``mm``, ``bmm``, ``addmm``,      ``2 · B · m · k · n`` for ``(B, m, k) @ (B, k, n)``
``baddbmm`` (any broadcast batch ``B``)
``F.scaled_dot_product_attention(q, k, v)``            ``2 · B · L · S · E`` (scores ``q kᵀ``) ``+ 2 · B · L · S · E_v``
with ``q: (B, L, E)``, ``k: (B, S, E)``,               (their application to ``v``), dense: a causal or
``v: (B, S, E_v)``                                     padding mask does not reduce it
``F.conv1d/2d/3d``, weight ``(C_out, C_in / g, *k)``    ``2 · output.numel() · C_in / g · prod(k)``
``torch.einsum`` of two operands                       ``2 ·`` the product of the sizes of all its indices
=====================================================  =============================================

Everything else (normalisation, softmax, activations, element-wise arithmetic, bias additions) is
left out, as it is by the matrix-product counts that papers report. HAT's profiler also counts
element-wise products and layer norms, which is why its totals can exceed these by a fraction of a
percent on small models (Transformer-Lite: 158.31M printed against 157.82M here).

:func:`seq2seq_flops` applies it to an encoder-decoder, in HAT's convention.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

__all__ = ["FlopCounter", "seq2seq_flops"]


class FlopCounter(TorchFunctionMode):
    """Context manager that counts the FLOPs of the matrix products, attention and convolutions run inside it.

    ``total`` is the sum and ``by_operation`` the split into ``"linear"``, ``"matmul"``,
    ``"attention"``, ``"convolution"`` and ``"einsum"``. Forward operations only: what autograd runs in
    ``backward()`` is not seen. The formulas are in the module docstring.

    Example::

        with FlopCounter() as flops, torch.no_grad():
            model(x)
        print(flops.total, dict(flops.by_operation))
    """

    def __init__(self) -> None:
        super().__init__()
        self.by_operation: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_operation.values())

    def __torch_function__(self, func: Callable, types: Any, args: Sequence = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        rule = _RULES.get(func)
        if rule is not None:
            operation, formula = rule
            self.by_operation[operation] += formula(out, *args, **kwargs)
        return out


def _product_flops(a: Tensor, b: Tensor) -> int:
    """``2 · B · m · k · n`` for ``a (…, m, k) @ b (…, k, n)``, with torch.matmul's 1-D and broadcast rules."""
    a_shape = (1, *a.shape) if a.dim() == 1 else tuple(a.shape)
    b_shape = (*b.shape, 1) if b.dim() == 1 else tuple(b.shape)
    batch = torch.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    return 2 * math.prod(batch) * a_shape[-2] * a_shape[-1] * b_shape[-1]


def _matmul(out: Tensor, a: Tensor, b: Tensor, *_: Any, **__: Any) -> int:
    return _product_flops(a, b)


def _rmatmul(out: Tensor, b: Tensor, a: Tensor, *_: Any, **__: Any) -> int:  # a @ b called as b.__rmatmul__(a)
    return _product_flops(a, b)


def _addmm(out: Tensor, bias: Tensor, a: Tensor, b: Tensor, *_: Any, **__: Any) -> int:
    return _product_flops(a, b)


def _linear(out: Tensor, x: Tensor, weight: Tensor, *_: Any, **__: Any) -> int:
    return 2 * x.numel() * (weight.shape[0] if weight.dim() == 2 else 1)


def _attention(out: Tensor, q: Tensor, k: Tensor, v: Tensor, *_: Any, **__: Any) -> int:
    batch = math.prod(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    queries, keys = q.shape[-2], k.shape[-2]
    return 2 * batch * queries * keys * (q.shape[-1] + v.shape[-1])


def _convolution(out: Tensor, x: Tensor, weight: Tensor, *_: Any, **__: Any) -> int:
    return 2 * out.numel() * math.prod(weight.shape[1:])


def _einsum(out: Tensor, equation: str, *operands: Any) -> int:
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    if len(operands) == 1:
        return 0  # a permutation or a reduction: no products
    if len(operands) != 2:
        raise NotImplementedError(f"FlopCounter counts einsum of two operands, got {len(operands)} in {equation!r}")
    sizes: dict[str, int] = {}
    ellipsis: list[tuple[int, ...]] = []
    for spec, operand in zip(inputs, operands, strict=True):
        letters = re.sub(r"\.\.\.", "", spec)
        explicit = len(letters)
        if "..." in spec:
            head = spec.index("...")
            ellipsis.append(tuple(operand.shape[head : operand.dim() - (explicit - head)]))
            dims = list(operand.shape[:head]) + list(operand.shape[operand.dim() - (explicit - head) :])
        else:
            dims = list(operand.shape)
        for letter, size in zip(letters, dims, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), size)
    broadcast = math.prod(torch.broadcast_shapes(*ellipsis)) if ellipsis else 1
    return 2 * broadcast * math.prod(sizes.values())


_RULES: dict[Callable, tuple[str, Callable[..., int]]] = {
    F.linear: ("linear", _linear),
    F.scaled_dot_product_attention: ("attention", _attention),
    torch.einsum: ("einsum", _einsum),
    **{fn: ("convolution", _convolution) for fn in (F.conv1d, F.conv2d, F.conv3d)},
    **{
        fn: ("matmul", _matmul)
        for fn in (
            torch.matmul,
            torch.mm,
            torch.bmm,
            Tensor.matmul,
            Tensor.mm,
            Tensor.bmm,
            Tensor.__matmul__,
        )
    },
    Tensor.__rmatmul__: ("matmul", _rmatmul),
    **{fn: ("matmul", _addmm) for fn in (torch.addmm, torch.baddbmm, Tensor.addmm, Tensor.baddbmm)},
}


class _EncoderDecoder(Protocol):
    """What :func:`seq2seq_flops` uses of a model (as :class:`~neuralode_tf.models.Seq2Seq` has it)."""

    output: nn.Linear

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]: ...

    def decode(self, tgt_in: Tensor, memory: Tensor, src_key_padding_mask: Tensor) -> Tensor: ...


def seq2seq_flops(model: nn.Module, source_length: int = 30, target_length: int = 30) -> int:
    """FLOPs of an encoder-decoder on one source/target pair, in HAT's convention (Wang et al. 2021, §4.3).

    ``model`` has ``encode(src)``, ``decode(tgt, memory, src_key_padding_mask)`` and an ``output``
    :class:`~torch.nn.Linear` (as :class:`~neuralode_tf.models.Seq2Seq` has). The forward pass of one
    pseudo pair of ``source_length`` and ``target_length`` tokens (no padding) is counted with
    :class:`FlopCounter`, and the output projection, ``2 · target_length · d · vocabulary``, is taken
    off (HAT counts "without the final softmax"). For a continuous-depth model the count is that of the
    solve the model is set to run: every field evaluation counts.
    """
    for name in ("encode", "decode", "output"):
        if not hasattr(model, name):
            raise TypeError(f"seq2seq_flops needs an encoder-decoder with {name!r}; got {type(model).__name__}")
    if source_length < 1 or target_length < 1:
        raise ValueError(f"lengths must be >= 1, got source_length={source_length}, target_length={target_length}")
    if not isinstance(model.output, nn.Linear):
        raise TypeError(f"seq2seq_flops needs an nn.Linear output; got {type(model.output).__name__}")
    encoder_decoder = cast(_EncoderDecoder, model)  # what the checks above found
    parameter = next(model.parameters())
    vocab_size, dim = model.output.out_features, model.output.in_features
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(3, vocab_size, (1, source_length), generator=generator).to(parameter.device)
    tgt = torch.randint(3, vocab_size, (1, target_length), generator=generator).to(parameter.device)
    with FlopCounter() as counter, torch.no_grad():
        encoder_decoder.decode(tgt, *encoder_decoder.encode(src))
    return counter.total - 2 * target_length * dim * vocab_size
