"""A small continuous-depth encoder-decoder transformer, with greedy and beam-search decoding."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..continuous import ContinuousDepth
from ..fields import EvolvingAttentionField, EvolvingAttentionStack, SplitField, WeightSharedField
from ..nn import AttentionBranch, EvolvingAttentionBranch, MLPBranch
from ..numerics import CausalityWarning
from .blocks import _evolving_settings, transformer_field
from .text import PAD, TokenEmbedding, _padding

__all__ = ["decoder_field", "EncoderDecoder", "Seq2Seq"]


def decoder_field(
    dim: int,
    num_heads: int,
    depth: int,
    *,
    num_sets: int | None = None,
    mlp_hidden: int | None = None,
    evolving: Mapping[str, Any] | None = None,
) -> WeightSharedField:
    """The pre-norm transformer decoder as a field on ``[0, depth]``.

    .. math:: \\frac{dy}{dt} = \\mathrm{CausalSelfAttn}_{\\sigma(t)}(y) + \\mathrm{CrossAttn}_{\\sigma(t)}(y; m)
        + \\mathrm{MLP}_{\\sigma(t)}(y)

    A :class:`~neuralode_tf.fields.WeightSharedField` of ``num_sets`` (default ``depth``) blocks
    ``SplitField(AttentionBranch(causal=True), AttentionBranch(context_dim=dim), MLPBranch)``; the
    encoder memory ``m`` reaches the cross-attention through ``bind(memory=...)``. One
    ``lie_trotter`` Euler step per unit of time is the pre-norm decoder stack of Vaswani et al.
    (2017, §3.1): masked self-attention, then encoder-decoder attention, then the MLP, each added
    to ``y``. Every part is causal in the target positions, so every fixed-grid solve of the field
    is too (exactly: later target tokens change earlier outputs by 0.0); an adaptive solve is not
    (:mod:`neuralode_tf.numerics.causality`, ``EncoderDecoder.forward(..., causal_prefixes=True)``).

    With ``evolving`` settings (a dict, possibly empty) both attentions are
    :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es with those settings and ``causal=True``: the
    decoder convolutions of Wang et al. (2021, §3.5, Fig. 3(b) and 3(c)), which read no later target
    position, so the field stays causal (with the same proviso on adaptive solves); and the
    field an :class:`~neuralode_tf.fields.EvolvingAttentionStack` carrying both logit maps. The settings
    are used as given; the paper's decoder has no skip connection, ``alpha=0`` (§4.3), which
    :class:`Seq2Seq` ``(field="evolving")`` passes.
    """
    if evolving is None:
        blocks = [
            SplitField(
                AttentionBranch(dim, num_heads, causal=True),
                AttentionBranch(dim, num_heads, context_dim=dim),
                MLPBranch(dim, mlp_hidden),
            )
            for _ in range(num_sets or depth)
        ]
        return WeightSharedField(blocks, depth)
    layers = [
        EvolvingAttentionField(
            EvolvingAttentionBranch(dim, num_heads, causal=True, **evolving),
            EvolvingAttentionBranch(dim, num_heads, causal=True, cross_attention=True, **evolving),
            MLPBranch(dim, mlp_hidden),
        )
        for _ in range(num_sets or depth)
    ]
    return EvolvingAttentionStack(layers, depth)


class EncoderDecoder(nn.Module):
    """Teacher forcing, scoring and decoding shared by the encoder-decoder front-ends.

    A subclass defines :meth:`encode` (source tokens to memory) and :meth:`decode` (target prefix
    and memory to next-token logits); this class turns them into the teacher-forced
    ``forward``, the sequence log-probability :meth:`score`, :meth:`greedy_decode` and
    :meth:`beam_search`. The decoder must be causal in the target positions for teacher forcing and
    decoding to agree. Id :data:`~neuralode_tf.models.text.PAD` (0) is padding and is never
    generated.
    """

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, dim)`` of ``src`` ``(B, S)`` and its padding mask (default ``src == PAD``)."""
        raise NotImplementedError

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_padding_mask: Tensor, tgt_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Next-token logits ``(B, T, vocab)`` at every position of ``tgt_in`` ``(B, T)``, given the memory."""
        raise NotImplementedError

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_padding_mask: Tensor | None = None,
        tgt_padding_mask: Tensor | None = None,
        *,
        causal_prefixes: bool = False,
    ) -> Tensor:
        """Teacher-forced logits ``(B, T, tgt_vocab)``: position ``i`` predicts ``tgt_in[:, i + 1]``.

        Masks are True at padding; by default they are ``src == PAD`` and ``tgt_in == PAD``.

        With a fixed-grid decoder solve, the logits at position ``i`` depend on ``tgt_in[:, : i + 1]``
        only: they are the ones decoding computes. An adaptive decoder solve chooses its steps from
        all positions, so later tokens change earlier logits by about the tolerance
        (:mod:`neuralode_tf.numerics.causality`). ``causal_prefixes=True`` decodes each prefix
        ``tgt_in[:, : i + 1]`` on its own (``T`` decoder solves instead of one) and keeps its last
        position: exactly the logits that :meth:`greedy_decode` and :meth:`beam_search` compute,
        whatever the solver.
        """
        memory, src_padding_mask = self.encode(src, src_padding_mask)
        if not causal_prefixes:
            return self.decode(tgt_in, memory, src_padding_mask, tgt_padding_mask)
        tgt_padding_mask = _padding(tgt_in, tgt_padding_mask, "tgt_in", "tgt_padding_mask")
        with _solved_by_prefix():
            return torch.cat(
                [
                    self.decode(tgt_in[:, :end], memory, src_padding_mask, tgt_padding_mask[:, :end])[:, -1:]
                    for end in range(1, tgt_in.shape[1] + 1)
                ],
                dim=1,
            )

    def score(self, src: Tensor, tokens: Tensor, bos: int, src_padding_mask: Tensor | None = None) -> Tensor:
        """``log p(tokens | src)`` ``(B,)``: the sum of the log-probabilities of ``tokens`` ``(B, T)``
        (without ``bos``, ``PAD`` after ``eos``) that decoding maximises, with ``PAD`` excluded from the softmax."""
        tgt_in = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], dim=1)
        log_probs = _log_probs(self(src, tgt_in, src_padding_mask))
        picked = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return picked.masked_fill(tokens.eq(PAD), 0.0).sum(dim=-1)

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, max_len: int, bos: int, eos: int, src_padding_mask: Tensor | None = None
    ) -> Tensor:
        """The most probable next token, step by step: tokens ``(B, T)``, ``T <= max_len``.

        Rows hold the generated tokens without ``bos``, up to and including ``eos``, then ``PAD``.
        """
        memory, src_padding_mask = self.encode(src, src_padding_mask)
        seqs = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            token = self._next_log_probs(seqs, memory, src_padding_mask).argmax(dim=-1).masked_fill(done, PAD)
            seqs = torch.cat([seqs, token.unsqueeze(1)], dim=1)
            done = done | token.eq(eos)
            if bool(done.all()):
                break
        return seqs[:, 1:]

    @torch.no_grad()
    def beam_search(
        self,
        src: Tensor,
        beam_size: int,
        max_len: int,
        bos: int,
        eos: int,
        *,
        length_penalty: float = 0.0,
        src_padding_mask: Tensor | None = None,
    ) -> Tensor:
        """Beam search: for each source, the best of ``beam_size`` hypotheses kept at every step.

        Hypotheses are ranked by ``log p(y | src) / lp(|y|)`` with the length penalty of Wu et al.
        (2016, eq. 14), ``lp(n) = ((5 + n) / 6) ** length_penalty`` (``0``: plain log-probability),
        where ``|y|`` counts the tokens up to and including ``eos``. A finished hypothesis stays in
        the beam with its score until better ones push it out. The search stops when every
        hypothesis has ended or after ``max_len`` tokens. ``beam_size=1`` is greedy decoding.

        Returns:
            Tokens ``(B, T)`` as in :meth:`greedy_decode`.
        """
        batch, k = src.shape[0], beam_size
        memory, src_padding_mask = self.encode(src, src_padding_mask)
        memory, src_padding_mask = memory.repeat_interleave(k, 0), src_padding_mask.repeat_interleave(k, 0)
        seqs = torch.full((batch * k, 1), bos, dtype=torch.long, device=src.device)
        scores = torch.full((batch, k), -torch.inf, device=src.device)
        scores[:, 0] = 0.0  # one live hypothesis to start with; the other slots fill on the first step
        lengths = torch.zeros(batch, k, dtype=torch.long, device=src.device)
        done = torch.zeros(batch, k, dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            log_probs = self._next_log_probs(seqs, memory, src_padding_mask).view(batch, k, -1)
            vocab = log_probs.shape[-1]
            stay = torch.full_like(log_probs, -torch.inf)
            stay[..., PAD] = 0.0  # a finished hypothesis continues with PAD at no cost
            candidates = scores.unsqueeze(-1) + torch.where(done.unsqueeze(-1), stay, log_probs)
            cand_lengths = lengths + (~done).long()
            ranked = candidates / _length_penalty(cand_lengths, length_penalty).unsqueeze(-1)
            best = ranked.flatten(1).topk(k, dim=-1).indices
            beam, token = best // vocab, best % vocab
            scores = candidates.flatten(1).gather(1, best)
            lengths = cand_lengths.gather(1, beam)
            done = done.gather(1, beam) | token.eq(eos)
            seqs = seqs.view(batch, k, -1).gather(1, beam.unsqueeze(-1).expand(-1, -1, seqs.shape[-1]))
            seqs = torch.cat([seqs, token.unsqueeze(-1)], dim=-1).flatten(0, 1)
            if bool(done.all()):
                break
        top = (scores / _length_penalty(lengths, length_penalty)).argmax(dim=-1)
        tokens = seqs.view(batch, k, -1)[torch.arange(batch, device=src.device), top, 1:]
        return tokens[:, : int(lengths.gather(1, top.unsqueeze(1)).max())]

    def _next_log_probs(self, seqs: Tensor, memory: Tensor, src_padding_mask: Tensor) -> Tensor:
        """Log-probabilities ``(N, vocab)`` of the token after the prefixes ``seqs`` ``(N, t)``."""
        with _solved_by_prefix():
            return _log_probs(self.decode(seqs, memory, src_padding_mask)[:, -1])


class Seq2Seq(EncoderDecoder):
    """Encoder-decoder transformer (Vaswani et al. 2017) with continuous-depth encoder and decoder.

    .. math::

        m = LN\\big(x(D_e)\\big),\\; \\frac{dx}{dt} = f_{enc}(t, x),\\; x(0) = \\mathrm{emb}(src); \\qquad
        \\mathrm{logits} = LN\\big(y(D_d)\\big)\\, W_{out}^\\top,\\; \\frac{dy}{dt} = f_{dec}(t, y; m),\\;
        y(0) = \\mathrm{emb}(tgt_{in})

    Embeddings are :class:`~neuralode_tf.models.text.TokenEmbedding` (scaled, with sinusoidal
    positions); ``W_out`` is the target embedding matrix when ``tie_output`` (Press & Wolf 2017;
    Vaswani et al. 2017, §3.4), else its own matrix; with ``share_embeddings`` source and target
    use one table (a shared vocabulary, as Vaswani et al. for WMT En-De). Id
    :data:`~neuralode_tf.models.text.PAD` (0) is padding and is never generated; ``bos`` and
    ``eos`` are chosen by the caller. Teacher forcing and decoding come from :class:`EncoderDecoder`.

    The fields are pluggable: ``encoder`` and ``decoder`` take any field on ``[0, encoder_depth]``
    and ``[0, decoder_depth]``. :class:`~neuralode_tf.ContinuousDepth` calls ``bind`` on every
    submodule of a field that has one, with ``key_padding_mask`` (the encoder: source padding;
    the decoder: target padding), and for the decoder also ``memory`` ``(B, S, dim)`` and
    ``memory_padding_mask`` ``(B, S)``; a decoder field must be causal in the target positions
    for teacher forcing and decoding to agree.

    Args:
        src_vocab_size: Source token ids (``PAD`` included).
        tgt_vocab_size: Target token ids (default: ``src_vocab_size``).
        dim, num_heads: Width and attention heads of the default fields.
        encoder_depth, decoder_depth: Depth-time of the encoder and the decoder (blocks of the default fields).
        encoder, decoder: Fields to use instead of :func:`~neuralode_tf.models.transformer_field` and
            :func:`decoder_field`.
        num_sets: Independent parameter sets of each default field (weight sharing across depth).
        mlp_hidden: Hidden width of the default fields' MLPs (default ``4 * dim``).
        field: The default fields' attention: ``"split"`` (vanilla) or ``"evolving"``, the EA-Transformer
            of Wang et al. (2021, §4.3): evolving attention in the encoder self-attention, the decoder
            self-attention and the encoder-decoder attention, each with its own convolution
            (:func:`~neuralode_tf.models.transformer_field` and :func:`decoder_field` with ``evolving``
            settings), and skip connections in the encoder only.
        evolving: For ``field="evolving"``: settings of the
            :class:`~neuralode_tf.nn.EvolvingAttentionBranch` es (``alpha``, ``beta``, ``kernel_size``).
            The encoder's take them as given; the decoder's take ``α = 0``, no skip connection (eq. 4:
            ``A^i_input`` is the block's own logits; §4.1 defines "w/o skip" as ``α = 0``, and §4.3 uses
            skips "only in the encoder network as we find they harm the performance of a decoder"), and
            the rest as given, so their convolutions (``β``, ``kernel_size``) stay.
        tie_output: Share the output projection with the target embedding.
        share_embeddings: One embedding table for source and target (needs equal vocabulary sizes).
        method, steps, step_size, **solve_kwargs: Solve settings of both
            :class:`~neuralode_tf.ContinuousDepth` stacks. The default, ``lie_trotter`` with one
            Euler step per unit of time, is the discrete pre-norm transformer.

    The parameter count is ``sum(p.numel() for p in model.parameters())`` (a tied matrix counts once).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int | None = None,
        dim: int = 64,
        num_heads: int = 4,
        encoder_depth: int = 2,
        decoder_depth: int = 2,
        *,
        encoder: nn.Module | None = None,
        decoder: nn.Module | None = None,
        num_sets: int | None = None,
        mlp_hidden: int | None = None,
        field: str = "split",
        evolving: Mapping[str, Any] | None = None,
        tie_output: bool = True,
        share_embeddings: bool = False,
        method: str = "lie_trotter",
        steps: int | None = None,
        step_size: float | None = None,
        **solve_kwargs: Any,
    ):
        super().__init__()
        tgt_vocab_size = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        if share_embeddings and tgt_vocab_size != src_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src_vocab_size={src_vocab_size}, "
                f"tgt_vocab_size={tgt_vocab_size}"
            )
        if field not in ("split", "evolving"):
            raise ValueError(
                f"Seq2Seq builds field='split' or 'evolving', got {field!r}; pass encoder=/decoder= fields"
            )
        evolving = _evolving_settings(field, evolving)
        sizes = dict(num_sets=num_sets, mlp_hidden=mlp_hidden)
        if encoder is None:
            encoder = transformer_field(dim, encoder_depth, num_heads, field=field, evolving=evolving, **sizes)
        if decoder is None:  # skip connections in the encoder only (Wang et al. 2021, §4.3): α = 0 in the decoder
            decoder_evolving = None if evolving is None else {**evolving, "alpha": 0.0}
            decoder = decoder_field(dim, num_heads, decoder_depth, evolving=decoder_evolving, **sizes)
        solve_kwargs.update(method=method, steps=steps, step_size=step_size)
        self.src_embed = TokenEmbedding(src_vocab_size, dim)
        self.tgt_embed = self.src_embed if share_embeddings else TokenEmbedding(tgt_vocab_size, dim)
        self.encoder = ContinuousDepth(encoder, t1=encoder_depth, **solve_kwargs)
        self.decoder = ContinuousDepth(decoder, t1=decoder_depth, **solve_kwargs)
        self.encoder_norm = nn.LayerNorm(dim)
        self.decoder_norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, tgt_vocab_size, bias=False)
        self.tie_output = tie_output
        if tie_output:
            self.output.weight = self.tgt_embed.weight

    def _apply(self, fn: Any, recurse: bool = True) -> Seq2Seq:
        # A conversion that cannot happen in place (e.g. .to() an XLA device) gives each submodule its own
        # new Parameter, which would untie the output projection from the target embedding: re-tie it.
        super()._apply(fn, recurse)
        if self.tie_output:
            self.output.weight = self.tgt_embed.weight
        return self

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, dim)`` of ``src`` ``(B, S)`` and its padding mask (default ``src == PAD``)."""
        src_padding_mask = _padding(src, src_padding_mask, "src", "src_padding_mask")
        x = self.encoder(self.src_embed(src, src_padding_mask), key_padding_mask=src_padding_mask)
        return self.encoder_norm(x), src_padding_mask

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_padding_mask: Tensor, tgt_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Next-token logits ``(B, T, tgt_vocab)`` at every position of ``tgt_in`` ``(B, T)``, given the memory."""
        tgt_padding_mask = _padding(tgt_in, tgt_padding_mask, "tgt_in", "tgt_padding_mask")
        y = self.decoder(
            self.tgt_embed(tgt_in, tgt_padding_mask),
            key_padding_mask=tgt_padding_mask,
            memory=memory,
            memory_padding_mask=src_padding_mask,
        )
        return self.output(self.decoder_norm(y))


@contextlib.contextmanager
def _solved_by_prefix() -> Iterator[None]:
    """Decoding reads only the last position of each prefix, which no later token reaches: the
    :class:`~neuralode_tf.numerics.CausalityWarning` of an adaptive decoder solve does not apply."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalityWarning)
        yield


def _log_probs(logits: Tensor) -> Tensor:
    """Log-softmax over the vocabulary with ``PAD`` excluded (it is never a prediction)."""
    return logits.index_fill(-1, torch.tensor([PAD], device=logits.device), -torch.inf).log_softmax(dim=-1)


def _length_penalty(lengths: Tensor, alpha: float) -> Tensor:
    return ((5.0 + lengths) / 6.0) ** alpha
