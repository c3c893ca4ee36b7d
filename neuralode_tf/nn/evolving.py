"""Evolving attention (Wang et al. 2021): attention logits carried from block to block through a convolution."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._conditioning import check_padding_mask
from ._empty_rows import softmax_weights
from .attention import _AttentionParameters

__all__ = ["EvolvingAttentionBranch", "evolve_logits"]


def evolve_logits(
    prev: Tensor,
    scores: Tensor,
    conv: nn.Conv2d,
    *,
    alpha: float,
    beta: float,
    hidden: Tensor | None = None,
    padding: tuple[int, int, int, int] | None = None,
    kernel_mask: Tensor | None = None,
) -> Tensor:
    """The evolved attention logits of Wang et al. (2021), eq. 4, from the previous block's ``prev`` and this
    block's ``scores``:

    .. math::

        A^i_{\\mathrm{input}} = \\alpha\\, A^{i-1} + (1 - \\alpha)\\, S^i, \\qquad
        A^i = \\beta\\, \\mathrm{ReLU}\\big(\\mathrm{Conv}(Z)\\big) + (1 - \\beta)\\, A^i_{\\mathrm{input}},

    where ``Z`` is ``A^i_input`` with the entries ``hidden`` set to 0, so that nothing stored there reaches another
    entry through the kernel, and ``Conv`` is ``conv``, an ``H → H`` ``k × k`` convolution over the heads' maps
    ``(*batch, H, n, m)``, applied to ``Z`` padded with zeros by ``padding`` (``(left, right, top, bottom)`` of the
    (query, key) map; default the centred "same" padding ``(k - 1) / 2`` on each side) with its weight multiplied
    by ``kernel_mask`` (default: none). :class:`EvolvingAttentionBranch` zeroes its masked entries of ``prev`` and
    ``scores`` before the call (so they are 0 in the skip term too) and gives the padding and kernel mask of its
    variant; :class:`~neuralode_tf.models.converters.huggingface.EvolvingTransformersAttention` hides padded rows and
    columns from the convolution only, so that with ``α = β = 0`` every row is the Hugging Face model's.
    """
    mixed = alpha * prev + (1.0 - alpha) * scores
    zeroed = mixed if hidden is None else mixed.masked_fill(hidden, 0.0)
    return beta * F.relu(_convolve(zeroed, conv, padding, kernel_mask)) + (1.0 - beta) * mixed


def _convolve(z: Tensor, conv: nn.Conv2d, padding: tuple[int, int, int, int] | None, mask: Tensor | None) -> Tensor:
    """The head-mixing convolution of ``(*batch, H, n, m)`` maps, zero-padded by ``padding``, kernel masked."""
    r = (conv.kernel_size[0] - 1) // 2
    flat = F.pad(z.reshape(-1, *z.shape[-3:]), (r, r, r, r) if padding is None else padding)
    weight = conv.weight if mask is None else conv.weight * mask
    return F.conv2d(flat, weight, conv.bias).reshape(z.shape)


class EvolvingAttentionBranch(_AttentionParameters):
    """Pre-LayerNorm multi-head attention whose logits evolve with depth (Wang et al. 2021, eq. 4).

    Given the tokens ``x`` and the logit map ``A^{i-1}`` of the previous block, shape ``(H, n, m)``
    per sample, block ``i`` computes

    .. math::

        A^i_{\\mathrm{input}} &= \\alpha\\, A^{i-1} + (1 - \\alpha)\\, \\frac{Q K^\\top}{\\sqrt{d_h}}(x), \\\\
        A^i &= \\beta\\, \\mathrm{ReLU}\\big(\\mathrm{Conv}(A^i_{\\mathrm{input}})\\big)
              + (1 - \\beta)\\, A^i_{\\mathrm{input}}, \\\\
        \\mathrm{out} &= \\big[\\mathrm{softmax}(A^i_1 + M) V_1, \\dots,
                              \\mathrm{softmax}(A^i_H + M) V_H\\big]\\, W_o

    (eq. 4 for the logits, eq. 5 for the value projection), with ``Q = LN(x) W_q``, ``K = kv W_k``,
    ``V = kv W_v`` per head, ``kv = LN(x)`` for self-attention and the given ``context`` for
    cross-attention (as in :class:`~neuralode_tf.nn.AttentionBranch`, whose parameter layout
    ``norm``, ``qkv`` or ``q``/``kv``, ``proj`` this branch shares, so
    ``load_state_dict(attention.state_dict(), strict=False)`` copies a vanilla branch). ``Conv`` is a
    ``k × k`` convolution whose ``H`` input and output channels are the heads (``H·H·k² + H``
    parameters, the only ones added to vanilla attention) and ``M`` is ``-inf`` at masked keys.
    :meth:`forward` returns the increment ``out`` and ``A^i``, which the next block receives as its
    ``A^{i-1}``. With ``α = β = 0`` the branch is vanilla attention.

    **Official code.** ``pkuyym/EvolvingAttention`` computes
    ``M = (1 - β_c)·logits + β_c·prev``, ``A = α_c·act(Conv(M)) + (1 - α_c)·M``: its ``β_c`` weighs the
    previous logits and its ``α_c`` the convolution, so ``α = β_c`` and ``β = α_c`` here (the TF
    defaults ``α_c = 1``, ``β_c = 0.5`` are the paper's ImageNet setting ``α = 0.5``, ``β = 1``, §4.1).
    ``act`` is ReLU in the TF code and the paper, LeakyReLU in the PyTorch code; this branch uses ReLU.

    **Masks.** Padded keys, and with ``causal=True`` keys after the query, are masked; for
    self-attention padded tokens are also queries, whose rows are masked and whose increments are
    zero (other branches of a field, such as an MLP, still move them; real tokens never see them,
    :class:`~neuralode_tf.fields.EvolvingAttentionField`). Masked entries never reach the
    convolution: they are set to 0 before it (the previous logits are read only at unmasked entries,
    so anything stored at masked ones is ignored) and to ``-inf`` in the softmax after it. The
    returned ``A^i`` holds 0 at masked entries, so it stays finite when carried as an ODE state. A
    query that may see no key at all (a cross-attention memory that is all padding) has all its attention
    weights zero, as in :class:`~neuralode_tf.nn.AttentionBranch`.

    **Convolution geometry** (§3.5, Fig. 3). Write ``Z`` for the zeroed input map, zero outside
    ``0..n-1 × 0..m-1``, ``W[a, b]`` (``a, b = 0 .. k-1``) for the kernel and ``r = (k - 1) / 2``. Entry
    ``(i, j)`` (query ``i``, key ``j``) of the convolution is:

    * encoder self-attention and non-causal cross-attention: the standard "same" convolution
      ``Σ_{a,b} W[a, b] Z[i - r + a, j - r + b]``, the ``k × k`` window centred at ``(i, j)``;
    * causal (decoder) self-attention, Fig. 3(b): ``Σ_{b ≤ a} W[a, b] Z[i - 2r + a, j - 2r + b]``. It
      reads only the ``k × k`` block whose lower-right corner is ``(i, j)`` (rows ``i-2r .. i``, columns
      ``j-2r .. j``: the "upper-left pixels"), and in that block only the ``k(k+1)/2`` entries whose
      column offset does not exceed their row offset (6 for ``k = 3``, the paper's "receptive field of
      6": ``(i-2, j-2), (i-1, j-2), (i-1, j-1), (i, j-2), (i, j-1), (i, j)``). This is the paper's
      recipe, a "same" convolution with the kernel's upper-right triangle (``b > a``) masked, whose
      output is shifted ``r`` rows down and ``r`` columns right (1 pixel for ``3 × 3``); the first
      ``r`` rows and columns, which a shift leaves undefined, are here the convolution of the zero
      padding. Every entry read has row ``≤ i`` and column ``≤ j ≤ i``, so the logits of query ``i``
      depend on tokens ``≤ i`` only, in every block; the shift alone ensures that, the kernel mask
      follows the paper;
    * causal cross-attention (encoder-decoder attention of a decoder), Fig. 3(c):
      ``Σ_{a,b} W[a, b] Z[i - 2r + a, j - r + b]``: an unmasked kernel shifted ``r`` positions along the
      query axis, so that it reads the current and earlier decoder queries ``i-2r .. i`` and the
      memory keys ``j-r .. j+r`` around ``j`` (the memory is visible to every query). The paper's "only
      takes the left pixels ... a standard 3×3 convolution with 1 pixel shifting to the right" is this
      shift when queries are drawn along the horizontal axis; a shift along the memory axis would
      let query ``i`` read the logits of query ``i + 1`` and see the next decoder token.

    Args:
        dim: Width ``d`` of the tokens.
        num_heads: Number of heads ``H``; must divide ``dim``.
        alpha: ``α ∈ [0, 1]``, the weight of the previous logits (paper's α; the official code's β).
        beta: ``β ∈ [0, 1]``, the weight of the convolution (paper's β; the official code's α).
        kernel_size: ``k``, odd (the paper uses 3, with 1 and 5 as ablations).
        causal: Decoder: for self-attention, mask keys after the query and use the convolution of
            Fig. 3(b); for cross-attention, use that of Fig. 3(c) (the memory itself is not masked).
        cross_attention: Queries from ``x``, keys and values from the ``context`` (encoder memory).
        context_dim: Width of the context (default ``dim``); cross-attention only.
        bias: Whether the projections have biases.

    Shapes:
        ``x``: ``(*batch, n, dim)``; ``context``: ``(*batch, m, context_dim)`` (``m = n`` for
        self-attention); logit maps: ``(*batch, H, n, m)``. ``key_padding_mask``: bool ``(*batch, m)``
        and ``query_padding_mask``: bool ``(*batch, n)``, **True at padding**.

    Inside a field, per-batch conditioning comes from :meth:`bind`.
    """

    kernel_mask: Tensor

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        alpha: float = 0.5,
        beta: float = 0.5,
        kernel_size: int = 3,
        causal: bool = False,
        cross_attention: bool = False,
        context_dim: int | None = None,
        bias: bool = True,
    ):
        if context_dim is not None and not cross_attention:
            raise ValueError("context_dim is for cross-attention: pass cross_attention=True")
        memory_dim = (dim if context_dim is None else context_dim) if cross_attention else None
        super().__init__(dim, num_heads, causal=causal, context_dim=memory_dim, bias=bias)
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if not (isinstance(kernel_size, int) and kernel_size > 0 and kernel_size % 2 == 1):
            raise ValueError(f"kernel_size must be a positive odd integer, got {kernel_size!r}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.kernel_size = kernel_size
        self.conv = nn.Conv2d(num_heads, num_heads, kernel_size)
        r, k = (kernel_size - 1) // 2, kernel_size
        kernel_mask = torch.ones(k, k)
        if causal and not cross_attention:
            kernel_mask = kernel_mask.tril()  # keep W[a, b] with b <= a
            self._padding = (k - 1, 0, k - 1, 0)  # (left, right, top, bottom) of the (query, key) map
        elif causal:
            self._padding = (r, r, k - 1, 0)
        else:
            self._padding = (r, r, r, r)
        self.register_buffer("kernel_mask", kernel_mask, persistent=False)

    def bind(
        self,
        *,
        key_padding_mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
    ) -> None:
        """Set the per-batch conditioning used when ``forward`` is not given it explicitly.

        Self-attention masks ``key_padding_mask`` (the tokens' own padding) as keys and queries and
        ignores the other two. Cross-attention attends to ``memory`` with ``memory_key_padding_mask`` on its
        keys and takes ``key_padding_mask`` as the padding of its queries (their rows are then left out
        of the convolution and their increments are zero).
        """
        if self.is_cross_attention:
            self._bound = {
                "context": memory,
                "key_padding_mask": memory_key_padding_mask,
                "query_padding_mask": key_padding_mask,
            }
        else:
            self._bound = {"key_padding_mask": key_padding_mask}

    def forward(
        self,
        x: Tensor,
        prev_logits: Tensor,
        context: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        query_padding_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The increment ``W_o · [softmax(A^i_h + M) V_h]_h`` and the logits ``A^i`` (0 at masked entries).

        ``prev_logits`` is ``A^{i-1}``; only its unmasked entries are read.
        """
        context, key_padding_mask, query_padding_mask = self._conditioning(
            x, context, key_padding_mask, query_padding_mask
        )
        q, k, v = self._project(x, context)
        blocked, dead = self._masks(key_padding_mask, query_padding_mask, q.shape[-2], k.shape[-2], x.device)
        current = self._scores(q, k)
        if dead is not None:  # read as 0, in the convolution and the skip term alike
            prev_logits, current = prev_logits.masked_fill(dead, 0.0), current.masked_fill(dead, 0.0)
        logits = evolve_logits(
            prev_logits,
            current,
            self.conv,
            alpha=self.alpha,
            beta=self.beta,
            padding=self._padding,
            kernel_mask=self.kernel_mask,
        )
        weights = softmax_weights(logits, blocked)
        out = self.proj((weights @ v).transpose(-3, -2).flatten(-2))
        if query_padding_mask is not None:
            out = out.masked_fill(query_padding_mask.unsqueeze(-1), 0.0)
        return out, logits if dead is None else logits.masked_fill(dead, 0.0)

    def initial_logits(
        self,
        x: Tensor,
        context: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        query_padding_mask: Tensor | None = None,
    ) -> Tensor:
        """The vanilla logits ``Q Kᵀ / √d_h`` of ``x``, 0 at masked entries: the ``A^0`` before the first block.

        With it, the first block's convolution input is ``α Q Kᵀ/√d_h + (1 - α) Q Kᵀ/√d_h``, i.e.
        the first block has no previous map to mix in.
        """
        context, key_padding_mask, query_padding_mask = self._conditioning(
            x, context, key_padding_mask, query_padding_mask
        )
        q, k, _ = self._project(x, context)
        scores = self._scores(q, k)
        _, dead = self._masks(key_padding_mask, query_padding_mask, q.shape[-2], k.shape[-2], x.device)
        return scores if dead is None else scores.masked_fill(dead, 0.0)

    def _conditioning(
        self, x: Tensor, context: Tensor | None, key_padding_mask: Tensor | None, query_padding_mask: Tensor | None
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """Explicit arguments, else the bound ones, checked against ``x``; self-attention's queries share the
        keys' padding."""
        context, key_padding_mask = self._conditioned(x, context, key_padding_mask)
        if not self.is_cross_attention:
            if query_padding_mask is not None:
                raise ValueError(
                    "self-attention takes its query padding from key_padding_mask; omit query_padding_mask"
                )
            return context, key_padding_mask, key_padding_mask
        query_padding_mask, name, bound = self._given_or_bound("query_padding_mask", query_padding_mask)
        check_padding_mask(query_padding_mask, name, x.shape[:-1], "x", bound=bound)
        return context, key_padding_mask, query_padding_mask

    @staticmethod
    def _scores(q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5

    def _masks(
        self, key_padding_mask: Tensor | None, query_padding_mask: Tensor | None, n: int, m: int, device: torch.device
    ) -> tuple[Tensor | None, Tensor | None]:
        """``(blocked, dead)``, bool, broadcastable to the logits, or ``None`` where nothing is masked.

        ``blocked``: keys the softmax must not see (padded keys; future keys of causal
        self-attention). ``dead``: ``blocked`` and the rows of padded queries, entries that are
        zeroed before the convolution and in the carried logits.
        """
        blocked = None if key_padding_mask is None else key_padding_mask[..., None, None, :]
        if self.causal and not self.is_cross_attention:
            future = torch.ones(n, m, dtype=torch.bool, device=device).triu(1)
            blocked = future if blocked is None else blocked | future
        if query_padding_mask is None:
            return blocked, blocked
        rows = query_padding_mask[..., None, :, None]
        return blocked, rows if blocked is None else blocked | rows

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}, beta={self.beta}, kernel_size={self.kernel_size}, causal={self.causal}"
