"""TransEvolve attention materialised term by term as the official code computes it, and the outputs and
gradients of any evaluation mode, shared by the TransEvolve field and model tests."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from neuralode_tf.fields import TransEvolveAttention


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def randn(*shape: int, device: torch.device) -> torch.Tensor:
    """Drawn on the CPU, then moved: the same values on every device under test."""
    return torch.randn(*shape).to(device)


def official_attention(
    attn: TransEvolveAttention,
    x0: torch.Tensor,
    keys_from: torch.Tensor,
    values_from: torch.Tensor,
    layer: int,
    mask: torch.Tensor,
) -> torch.Tensor:
    """The official ``Layer1`` + ``Layer2`` at integer depth ``layer``: every term of eq. 6, materialised (notes
    §1.3, §1.4, §1.6), then eq. 9 (eq. 13 for cross-attention).

    Queries come from the block input ``x0``, keys from ``keys_from`` (``x0`` for self-attention, the encoder
    output for ``Layer1(x, enc)``) and the values are ``LN_l(values_from)`` (the current tokens, or the encoder
    output). ``mask`` is added to the logits (``-inf``, or the code's ``-1e9``, at masked keys).
    """
    d, heads = attn.dim, attn.num_heads
    q = torch.einsum("ab,...lb->...la", attn.w_q[:, :d], x0)
    k = torch.einsum("ab,...lb->...la", attn.w_k[:, :d], keys_from)
    q0, k0 = q.unflatten(-1, (heads, -1)), k.unflatten(-1, (heads, -1))
    a0 = torch.einsum("...shd,...lhd->...hsl", q0, k0) / math.sqrt(q0.shape[-1])
    time_q = attn.w_q[:, d:].reshape(-1, heads, d // heads)
    time_k = attn.w_k[:, d:].reshape(-1, heads, d // heads)
    a2 = torch.einsum("dnt,dnt->nt", time_q, time_k)
    a1k = torch.einsum("dnt,...ld->...nlt", time_q, k)
    a1q = torch.einsum("dnt,...ld->...nlt", time_k, q)
    rate = np.float32(layer) * np.float32(math.pi / 64.0)
    p = np.arange(d // 2, dtype=np.float32)
    signal = torch.from_numpy(np.concatenate([np.sin(rate * p), np.cos(rate * p)])).to(attn.coeffs.device)
    tee = (signal * attn.coeffs[layer]).reshape(heads, d // heads)
    logits = (
        a0
        + torch.einsum("...nlt,nt->...nl", a1q, tee)[..., :, None]
        + torch.einsum("...nlt,nt->...nl", a1k, tee)[..., None, :]
        + torch.einsum("nt,nt->n", a2, tee * tee)[:, None, None]
    )
    probs = (logits + mask).softmax(-1)
    h = F.layer_norm(values_from, (d,), attn.norm_weight[layer], attn.norm_bias[layer]).unflatten(-1, (heads, -1))
    return torch.einsum("...nlk,...knd->...lnd", probs, h).flatten(-2) @ attn.w_o[layer]


def evaluate(
    attn: TransEvolveAttention,
    mode: str,
    x0: torch.Tensor,
    other: torch.Tensor,
    t: float,
    padding: torch.Tensor | None,
    memory_padding: torch.Tensor | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Output of ``attn`` in ``mode`` at depth ``t``, and the gradients of a fixed random projection of it with
    respect to ``x0``, ``other`` and every parameter (unused ones as zeros).

    Self-attention: the state is that of ``x0`` with ``padding``, applied to the current tokens ``other``.
    Cross-attention: ``other`` is the encoder output with ``memory_padding``, ``padding`` the target's, and the
    current tokens are ``x0`` (the increment does not depend on them).
    """
    attn.mode = mode
    x0, other = x0.clone().requires_grad_(), other.clone().requires_grad_()
    if attn.cross_attention:
        out = attn(t, x0, attn.prepare(x0, padding, other, memory_padding))
    else:
        out = attn(t, other, attn.prepare(x0, padding))
    probe = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype).to(out.device)
    inputs = [x0, other, *attn.parameters()]
    grads = torch.autograd.grad((out * probe).sum(), inputs, allow_unused=True)
    return out.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip(inputs, grads)]
