"""Set Transformer, text classifier and seq2seq front-ends: equivalence with written-out blocks,
padding and permutation invariance, causality, decoding, and a tiny model learning to reverse."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from neuralode_tf import ContinuousDepth
from neuralode_tf.models import (
    PAD,
    Seq2Seq,
    SetTransformer,
    TextClassifier,
    create_model,
    decoder_field,
    isab_field,
    transformer_field,
)
from neuralode_tf.models.text import sinusoidal_positions

# --------------------------------------------------------------------------------------------
# Written-out reference blocks (explicit LayerNorm, linear maps and per-head softmax)
# --------------------------------------------------------------------------------------------


def _ln(x, norm):
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def _linear(x, layer):
    return x @ layer.weight.T + layer.bias


def _mlp(branch, x):
    return _linear(F.gelu(_linear(_ln(x, branch.norm), branch.fc1)), branch.fc2)


def _cross_attention(branch, x, context, key_real=None):
    """proj(concat_h softmax(q_h k_hᵀ / sqrt(d_h)) v_h) with q = W_q LN(x), (k, v) = W_kv context."""
    q = _linear(_ln(x, branch.norm), branch.q)
    k, v = _linear(context, branch.kv).chunk(2, dim=-1)
    d_h = q.shape[-1] // branch.num_heads
    heads = []
    for i in range(branch.num_heads):
        s = slice(i * d_h, (i + 1) * d_h)
        scores = q[..., s] @ k[..., s].transpose(-1, -2) / math.sqrt(d_h)
        if key_real is not None:
            scores = scores.masked_fill(~key_real[:, None, :], -math.inf)
        heads.append(scores.softmax(-1) @ v[..., s])
    return _linear(torch.cat(heads, dim=-1), branch.proj)


def _isab_stack(field, x, real):
    """The pre-norm ISAB stack: H = I + Att(I; LN x), H += rFF(H); x += Att(x; LN H); x += rFF(x)."""
    for j in range(int(field.depth)):
        block = field.layers[field.index(j)]
        induced, rff = block.terms[0].branch, block.terms[1].branch
        mab = induced.summary.mab
        h = induced.summary.seeds.expand(x.shape[0], -1, -1)
        h = h + _cross_attention(mab.attend.attn, h, _ln(x, mab.attend.norm_context), real)
        h = h + _mlp(mab.mlp, h)
        x = x + _cross_attention(induced.attend.attn, x, _ln(h, induced.attend.norm_context))
        x = x + _mlp(rff, x)
    return x


def _random_mask(lengths, width, device="cpu"):
    """(B, width) bool, True at the first lengths[b] positions."""
    return torch.arange(width, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]


def _sync(device):
    """End the traced step on XLA (a training loop must, or its graph grows with every step); a no-op elsewhere."""
    if torch.device(device).type == "xla":
        import torch_xla

        torch_xla.sync()


# --------------------------------------------------------------------------------------------
# Set Transformer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_sets", [None, 1])
def test_isab_field_one_lie_trotter_euler_step_per_block_is_the_pre_norm_isab_stack(num_sets, device):
    field = isab_field(16, 2, num_inducing=4, depth=3, num_sets=num_sets, mlp_hidden=24).to(device)
    x = torch.randn(3, 9, 16, device=device)
    real = _random_mask([9, 5, 1], 9, device)
    out = ContinuousDepth(field, t1=3, method="lie_trotter")(x, key_padding_mask=~real)
    expected = _isab_stack(field, x, real)
    assert (out - expected)[real].abs().max().item() <= 1e-5


def _garbage_padding(points, real, extra):
    """The same clouds with `extra` more padded slots, every padded slot full of huge values or NaN."""
    device = points.device
    padded = torch.cat([points, torch.zeros(points.shape[0], extra, points.shape[2], device=device)], dim=1)
    mask = torch.cat([real, torch.zeros(real.shape[0], extra, dtype=torch.bool, device=device)], dim=1)
    padded[~mask] = 1e4 * torch.randn(int((~mask).sum()), points.shape[2], device=device)
    padded[0, -1] = math.nan
    return padded, mask


@pytest.mark.parametrize(
    "encoder, solve",
    [
        ("isab", dict(method="lie_trotter")),
        ("isab", dict(method="rk4", steps=4)),
        ("sab", dict(method="euler", num_sets=1)),
    ],
)
def test_set_transformer_padding_never_changes_real_points_or_logits(encoder, solve, device):
    field = transformer_field(16, 2, 2) if encoder == "sab" else "split"
    model = SetTransformer(5, dim=16, num_heads=2, num_inducing=4, num_seeds=2, field=field, **solve).eval().to(device)
    lengths = [7, 3, 1]
    real = _random_mask(lengths, 7, device)
    points = torch.randn(3, 7, 3, device=device).masked_fill(~real[..., None], 0.0)
    features, _ = model.encode(points, real)
    logits = model(points, real)
    garbage, mask = _garbage_padding(points, real, extra=4)
    features_garbage, _ = model.encode(garbage, mask)
    assert (features_garbage[:, :7][real] - features[real]).abs().max().item() <= 1e-5
    assert (model(garbage, mask) - logits).abs().max().item() <= 1e-5
    for b, n in enumerate(lengths):  # each cloud alone, with no padding at all
        assert (model(points[b : b + 1, :n]) - logits[b]).abs().max().item() <= 1e-5


def test_set_transformer_is_invariant_to_the_order_of_the_points(device):
    model = SetTransformer(4, dim=16, num_heads=2, num_inducing=3).eval().to(device)
    points = torch.randn(2, 11, 3, device=device)
    shuffled = points[:, torch.randperm(11, device=device)]
    assert (model(shuffled) - model(points)).abs().max().item() <= 1e-5


def test_set_transformer_takes_a_torch_geometric_batch(device):
    data = pytest.importorskip("torch_geometric.data")
    model = create_model("set_transformer_shapes3d").eval().to(device)
    clouds = [torch.randn(n, 3, device=device) for n in (12, 5, 9)]
    batch = data.Batch.from_data_list([data.Data(pos=p) for p in clouds])
    real = _random_mask([12, 5, 9], 12, device)
    dense = torch.zeros(3, 12, 3, device=device)
    dense[real] = torch.cat(clouds)
    logits = model(batch)
    assert logits.shape == (3, 8)
    assert (logits - model(dense, real)).abs().max().item() <= 1e-5


def test_set_transformer_registered_models(device):
    big = create_model("set_transformer_modelnet40").to(device)
    assert big.head.out_features == 40 and big.embed.out_features == 256
    assert big.pool.seeds.shape == (1, 256) and big.dropout.p == 0.5
    layers = big.encoder.field.layers
    assert len(layers) == 2 and big.encoder.t1 == 2.0
    assert layers[0].terms[0].branch.summary.seeds.shape == (16, 256)
    assert layers[0].terms[0].branch.attend.attn.num_heads == 4
    small = create_model("set_transformer_shapes3d", method="rk4", steps=4).eval().to(device)
    assert small.head.out_features == 8 and small.embed.out_features == 64
    assert small(torch.randn(2, 30, 3, device=device)).shape == (2, 8) and small.encoder.stats.nfe == 16
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in big.parameters())


# --------------------------------------------------------------------------------------------
# Text classifier
# --------------------------------------------------------------------------------------------


def test_sinusoidal_positions_follow_vaswani(device):
    pe = sinusoidal_positions(7, 6, device=device)
    assert pe.device.type == device.type
    p, i = 5, 2
    assert pe[p, 2 * i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 6)), abs=1e-6)
    assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 6)), abs=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "max"])
@pytest.mark.parametrize("solve", [dict(), dict(method="rk4", steps=3, num_sets=1)])
def test_text_classifier_padding_never_changes_the_logits(pooling, solve, device):
    model = TextClassifier(30, 3, dim=16, num_heads=2, depth=2, pooling=pooling, **solve).eval().to(device)
    lengths = [6, 4, 1]
    pad = ~_random_mask(lengths, 6, device)
    tokens = torch.randint(1, 30, (3, 6), device=device).masked_fill(pad, PAD)
    logits = model(tokens)  # the mask defaults to tokens == PAD
    longer = torch.cat([tokens, torch.zeros(3, 5, dtype=torch.long, device=device)], dim=1)
    longer_pad = torch.cat([pad, torch.ones(3, 5, dtype=torch.bool, device=device)], dim=1)
    longer[longer_pad] = torch.randint(1, 30, (int(longer_pad.sum()),), device=device)  # padded slots hold real ids
    assert (model(longer, longer_pad) - logits).abs().max().item() <= 1e-5
    for b, n in enumerate(lengths):
        assert (model(tokens[b : b + 1, :n]) - logits[b]).abs().max().item() <= 1e-5


def test_text_classifier_takes_any_field_and_solve_settings(device):
    field = transformer_field(16, 4, 2, num_sets=2)
    model = TextClassifier(20, 2, dim=16, depth=4, field=field, method="midpoint", steps=2, adjoint="checkpoint")
    model.to(device)
    tokens = torch.randint(1, 20, (2, 5), device=device)
    model(tokens).sum().backward()
    assert model.encoder.field is field and model.encoder.stats.nfe == 4
    assert all(p.grad is not None for p in field.parameters())


# --------------------------------------------------------------------------------------------
# Seq2Seq
# --------------------------------------------------------------------------------------------

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
    src = torch.randint(3, 12, (2, 5), device=device).masked_fill(~_random_mask(lengths, 5, device), PAD)
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

    def decode(tgt_in, memory, src_padding_mask, tgt_padding_mask=None):
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
    tied = Seq2Seq(11, 13, dim=16, encoder_depth=3, encoder=encoder, decoder=decoder, method="heun", steps=2)
    tied.to(device)  # moving the model keeps the output projection tied, on every device
    assert tied.encoder.field is encoder and tied.decoder.field is decoder
    assert tied.output.weight is tied.tgt_embed.weight
    untied = Seq2Seq(11, 13, dim=16, tie_output=False).to(device)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(Seq2Seq(11, 13, dim=16).to(device)) == 13 * 16
    logits = tied(torch.randint(3, 11, (2, 4), device=device), torch.randint(3, 13, (2, 5), device=device))
    assert logits.shape == (2, 5, 13) and tied.decoder.stats.nfe == 4


def test_seq2seq_learns_to_reverse_a_short_sequence(device):
    vocab, length = 8, 5
    model = Seq2Seq(vocab, dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, mlp_hidden=64).to(device)
    loss = _train_reverse(model, steps=250, lr=3e-3, vocab=vocab, length=length, device=device)
    src, tgt = _reverse_batch(200, vocab, length, device)
    decoded = model.eval().greedy_decode(src, max_len=length + 1, bos=BOS, eos=EOS)
    decoded = F.pad(decoded, (0, length + 1 - decoded.shape[1]), value=PAD)
    accuracy = (decoded == tgt[:, 1:]).all(dim=1).float().mean().item()
    assert accuracy >= 0.95, f"sequence accuracy {accuracy:.2f} (loss {loss:.3f})"
