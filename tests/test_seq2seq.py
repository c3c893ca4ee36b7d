"""The seq2seq front-end: its decoder is causal, source padding never changes the memory or the logits, decoding
(greedy, beam search, exhaustively checked) and pluggable fields, and a tiny model learning to reverse."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from neuralode_tf.models import PAD, Seq2Seq, decoder_field, transformer_field
from tests._conditioned import padding_mask


def _sync(device):
    """End the traced step on XLA (a training loop must, or its graph grows with every step); a no-op elsewhere."""
    if torch.device(device).type == "xla":
        import torch_xla

        torch_xla.sync()


BOS, EOS = 1, 2  # symbols are 3 .. vocab - 1


@pytest.mark.parametrize("solve", [dict(), dict(method="rk4", steps=2)])
def test_seq2seq_decoder_is_causal(solve, device):
    model = Seq2Seq(10, dim=16, num_heads=2, **solve).to(device)
    embedded = []
    model.tgt_embed.register_forward_hook(lambda module, args, out: embedded.append(out) or out.retain_grad())
    src, tgt_in = torch.randint(3, 10, (2, 5), device=device), torch.randint(3, 10, (2, 6), device=device)
    i = 2
    model(src, tgt_in)[:, i].sum().backward()
    grad = embedded[0].grad
    assert grad[:, i + 1 :].abs().max().item() == 0.0
    assert grad[:, : i + 1].abs().amin(dim=-1).min().item() > 0.0


def test_seq2seq_encoder_padding_never_changes_memory_or_logits(device):
    model = Seq2Seq(12, dim=16, num_heads=2).eval().to(device)
    lengths = [5, 2]
    src = torch.randint(3, 12, (2, 5), device=device).masked_fill(padding_mask(lengths, 5, device), PAD)
    tgt_in = torch.randint(3, 12, (2, 4), device=device)
    memory, src_pad = model.encode(src)
    logits = model(src, tgt_in)
    longer = torch.cat([src, torch.randint(3, 12, (2, 3), device=device)], dim=1)
    longer_pad = torch.cat([src_pad, torch.ones(2, 3, dtype=torch.bool, device=device)], dim=1)
    memory_longer, _ = model.encode(longer, longer_pad)
    assert (memory_longer[:, :5][~src_pad] - memory[~src_pad]).abs().max().item() <= 1e-5
    assert (model(longer, tgt_in, longer_pad) - logits).abs().max().item() <= 1e-5


def _train_reverse(model, steps, lr, vocab, length, batch_size=64, device="cpu"):
    """Adam on the reverse task: src -> BOS, reversed src, EOS. Returns the last loss."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        src, tgt = _reverse_batch(batch_size, vocab, length, device)
        loss = F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        _sync(device)
    return loss.item()


def _reverse_batch(n, vocab, length, device="cpu"):
    src = torch.randint(3, vocab, (n, length), device=device)
    bos, eos = torch.full((n, 1), BOS, device=device), torch.full((n, 1), EOS, device=device)
    return src, torch.cat([bos, src.flip(1), eos], dim=1)


@pytest.fixture(scope="module")
def _half_trained_cpu():
    """A model trained briefly on reversal: its outputs depend on the source but are still uncertain.
    Trained once on the CPU, so every device decodes the same model (training on the device is
    test_seq2seq_learns_to_reverse_a_short_sequence)."""
    torch.manual_seed(0)
    model = _half_trained_model()
    _train_reverse(model, steps=60, lr=1e-2, vocab=9, length=4, batch_size=32)
    return model.state_dict(), torch.randint(3, 9, (12, 4))


def _half_trained_model():
    return Seq2Seq(9, dim=16, num_heads=2, encoder_depth=1, decoder_depth=1)


@pytest.fixture
def half_trained(_half_trained_cpu, device):
    state, src = _half_trained_cpu
    model = _half_trained_model()
    model.load_state_dict(state)
    return model.eval().to(device), src.to(device)


def _well_formed(tokens):
    """Each row: tokens without PAD up to its first EOS, PAD after it."""
    for row in tokens.tolist():
        end = row.index(EOS) + 1 if EOS in row else len(row)
        assert PAD not in row[:end] and all(t == PAD for t in row[end:])


def test_greedy_equals_beam_search_of_size_one(half_trained):
    model, src = half_trained
    greedy = model.greedy_decode(src, max_len=7, bos=BOS, eos=EOS)
    _well_formed(greedy)
    assert greedy.unique().numel() > 4  # decoding made real choices
    assert torch.equal(model.beam_search(src, beam_size=1, max_len=7, bos=BOS, eos=EOS), greedy)


@pytest.mark.parametrize("beam_size", [2, 4])
def test_beam_search_scores_at_least_greedy(half_trained, beam_size):
    model, src = half_trained
    with torch.no_grad():
        greedy = model.score(src, model.greedy_decode(src, 7, BOS, EOS), BOS)
        beam_tokens = model.beam_search(src, beam_size, 7, BOS, EOS)
        beam = model.score(src, beam_tokens, BOS)
    _well_formed(beam_tokens)
    assert (beam >= greedy - 1e-5).all() and (beam > greedy + 1e-3).any()


@pytest.mark.parametrize("length_penalty", [0.0, 1.5, -1.5])
def test_wide_beam_search_is_exhaustive_search(length_penalty, device):
    """With a beam as wide as the number of prefixes, beam search finds the best sequence by
    ``log p / lp(length)``, which is checked against enumerating every sequence."""
    vocab, max_len = 6, 4
    model = Seq2Seq(vocab, dim=8, num_heads=2, encoder_depth=1, decoder_depth=1).eval().to(device)
    # logits by (previous token, position, next token)
    table = 2.0 * torch.randn(vocab, max_len, vocab, device=device)

    def decode(tgt_in, memory, src_key_padding_mask, tgt_key_padding_mask=None):
        return table[tgt_in, torch.arange(tgt_in.shape[1], device=device)] + 3.0 * memory[:, :1, :vocab]

    model.decode = decode  # a decoder whose distribution is easy to enumerate, still source-dependent
    src = torch.randint(3, vocab, (3, 5), device=device)
    symbols = range(1, vocab)
    sequences = [
        [*seq, *[PAD] * (max_len - n)]
        for n in range(1, max_len + 1)
        for seq in itertools.product(symbols, repeat=n)
        if EOS not in seq[:-1] and (seq[-1] == EOS or n == max_len)
    ]
    sequences = torch.tensor(sequences, device=device)
    penalty = ((5.0 + sequences.ne(PAD).sum(1)) / 6.0) ** length_penalty
    beam = model.beam_search(src, (vocab - 1) ** (max_len - 1), max_len, BOS, EOS, length_penalty=length_penalty)
    beam = F.pad(beam, (0, max_len - beam.shape[1]), value=PAD)
    for b in range(3):
        scores = model.score(src[b : b + 1].expand(len(sequences), -1), sequences, BOS) / penalty
        assert torch.equal(beam[b], sequences[scores.argmax()])
    assert torch.equal(model.beam_search(src, 1, max_len, BOS, EOS), model.greedy_decode(src, max_len, BOS, EOS))


def test_seq2seq_fields_are_pluggable_and_output_can_be_untied(device):
    encoder = transformer_field(16, 3, 2, num_sets=1)
    decoder = decoder_field(16, 2, depth=2, mlp_hidden=8)
    tied = Seq2Seq(11, 13, dim=16, encoder_depth=3, field=(encoder, decoder), method="heun", steps=2)
    tied.to(device)  # moving the model keeps the output projection tied, on every device
    assert tied.encoder.field is encoder and tied.decoder.field is decoder
    assert tied.output.weight is tied.tgt_embed.weight
    untied = Seq2Seq(11, 13, dim=16, tie_output=False).to(device)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(Seq2Seq(11, 13, dim=16).to(device)) == 13 * 16
    logits = tied(torch.randint(3, 11, (2, 4), device=device), torch.randint(3, 13, (2, 5), device=device))
    assert logits.shape == (2, 5, 13) and tied.decoder.stats.nfe == 4
    with pytest.raises(TypeError, match=r"a pair \(encoder field, decoder field\)"):
        Seq2Seq(11, dim=16, field=encoder)
    with pytest.raises(ValueError, match=r"\['num_sets'\] configure the model's own blocks"):
        Seq2Seq(11, 13, dim=16, encoder_depth=3, field=(encoder, decoder), num_sets=1)


def test_seq2seq_learns_to_reverse_a_short_sequence(device):
    vocab, length = 8, 5
    model = Seq2Seq(vocab, dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, mlp_hidden=64).to(device)
    loss = _train_reverse(model, steps=250, lr=3e-3, vocab=vocab, length=length, device=device)
    src, tgt = _reverse_batch(200, vocab, length, device)
    decoded = model.eval().greedy_decode(src, max_len=length + 1, bos=BOS, eos=EOS)
    decoded = F.pad(decoded, (0, length + 1 - decoded.shape[1]), value=PAD)
    accuracy = (decoded == tgt[:, 1:]).all(dim=1).float().mean().item()
    assert accuracy >= 0.95, f"sequence accuracy {accuracy:.2f} (loss {loss:.3f})"



def test_token_ids_outside_the_vocabulary_are_named(device):
    """An id outside its vocabulary raises ``ValueError`` naming the argument (``src`` or ``tgt_in``), the id, its
    (batch, token) position and that vocabulary's size."""
    model = Seq2Seq(10, 12, dim=16, num_heads=2).eval().to(device)
    src, tgt_in = torch.randint(3, 10, (2, 5), device=device), torch.randint(3, 10, (2, 4), device=device)
    with pytest.raises(ValueError, match=r"src holds token id 10 at \(batch 0, token 2\).*vocab_size=10"):
        model(src.index_fill(1, torch.tensor([2], device=device), 10), tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in holds token id 12 at \(batch 0, token 3\).*vocab_size=12"):
        model(src, tgt_in.index_fill(1, torch.tensor([3], device=device), 12))
    with pytest.raises(ValueError, match=r"tgt_in holds token id -1 at \(batch 0, token 0\)"):
        model.greedy_decode(src, 3, bos=-1, eos=EOS)
    assert model(src, tgt_in.index_fill(1, torch.tensor([3], device=device), 11)).shape == (2, 4, 12)
