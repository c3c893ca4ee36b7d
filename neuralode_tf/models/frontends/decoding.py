"""Decoding for the encoder-decoder front-ends: teacher forcing, sequence scores, greedy decoding and beam search
with the length penalty of Wu et al. (2016)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ...numerics import CausalityWarning
from .text import PAD, _padding

__all__ = ["EncoderDecoder"]


class EncoderDecoder(nn.Module):
    """Teacher forcing, scoring and decoding shared by the encoder-decoder front-ends.

    A subclass defines :meth:`encode` (source tokens to memory) and :meth:`decode` (target prefix
    and memory to next-token logits); this class turns them into the teacher-forced
    ``forward``, the sequence log-probability :meth:`score`, :meth:`greedy_decode` and
    :meth:`beam_search`. The decoder must be causal in the target positions for teacher forcing and
    decoding to agree. Id :data:`~neuralode_tf.models.frontends.text.PAD` (0) is padding and is never
    generated.
    """

    def encode(self, src: Tensor, src_key_padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The memory ``(B, S, dim)`` of ``src`` ``(B, S)`` and its padding mask (default ``src == PAD``)."""
        raise NotImplementedError

    def decode(
        self, tgt_in: Tensor, memory: Tensor, src_key_padding_mask: Tensor, tgt_key_padding_mask: Tensor | None = None
    ) -> Tensor:
        """Next-token logits ``(B, T, vocab)`` at every position of ``tgt_in`` ``(B, T)``, given the memory."""
        raise NotImplementedError

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
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
        memory, src_key_padding_mask = self.encode(src, src_key_padding_mask)
        if not causal_prefixes:
            return self.decode(tgt_in, memory, src_key_padding_mask, tgt_key_padding_mask)
        tgt_key_padding_mask = _padding(tgt_in, tgt_key_padding_mask, "tgt_in", "tgt_key_padding_mask")
        with _solved_by_prefix():
            return torch.cat(
                [
                    self.decode(tgt_in[:, :end], memory, src_key_padding_mask, tgt_key_padding_mask[:, :end])[:, -1:]
                    for end in range(1, tgt_in.shape[1] + 1)
                ],
                dim=1,
            )

    def score(self, src: Tensor, tokens: Tensor, bos: int, src_key_padding_mask: Tensor | None = None) -> Tensor:
        """``log p(tokens | src)`` ``(B,)``: the sum of the log-probabilities of ``tokens`` ``(B, T)``
        (without ``bos``, ``PAD`` after ``eos``) that decoding maximises, with ``PAD`` excluded from the softmax."""
        tgt_in = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], dim=1)
        log_probs = _log_probs(self(src, tgt_in, src_key_padding_mask))
        picked = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return picked.masked_fill(tokens.eq(PAD), 0.0).sum(dim=-1)

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, max_len: int, bos: int, eos: int, src_key_padding_mask: Tensor | None = None
    ) -> Tensor:
        """The most probable next token, step by step: tokens ``(B, T)``, ``T <= max_len``.

        Rows hold the generated tokens without ``bos``, up to and including ``eos``, then ``PAD``.
        """
        memory, src_key_padding_mask = self.encode(src, src_key_padding_mask)
        seqs = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            token = self._next_log_probs(seqs, memory, src_key_padding_mask).argmax(dim=-1).masked_fill(done, PAD)
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
        src_key_padding_mask: Tensor | None = None,
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
        memory, src_key_padding_mask = self.encode(src, src_key_padding_mask)
        memory, src_key_padding_mask = memory.repeat_interleave(k, 0), src_key_padding_mask.repeat_interleave(k, 0)
        seqs = torch.full((batch * k, 1), bos, dtype=torch.long, device=src.device)
        scores = torch.full((batch, k), -torch.inf, device=src.device)
        scores[:, 0] = 0.0  # one live hypothesis to start with; the other slots fill on the first step
        lengths = torch.zeros(batch, k, dtype=torch.long, device=src.device)
        done = torch.zeros(batch, k, dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            log_probs = self._next_log_probs(seqs, memory, src_key_padding_mask).view(batch, k, -1)
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

    def _next_log_probs(self, seqs: Tensor, memory: Tensor, src_key_padding_mask: Tensor) -> Tensor:
        """Log-probabilities ``(N, vocab)`` of the token after the prefixes ``seqs`` ``(N, t)``."""
        with _solved_by_prefix():
            return _log_probs(self.decode(seqs, memory, src_key_padding_mask)[:, -1])


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
    """``lp(n) = ((5 + n) / 6) ** alpha`` of Wu et al. (2016, eq. 14), for hypotheses of ``n`` tokens."""
    return ((5.0 + lengths) / 6.0) ** alpha
