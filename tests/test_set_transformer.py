"""The Set Transformer front-end: its ISAB field is the written-out pre-norm ISAB stack, padding never changes the
real points or the logits (dense batches with a ``key_padding_mask`` and torch_geometric batches alike), and the
output is invariant to the order of the points."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from neuralode_tf import ContinuousDepth
from neuralode_tf.models import ReferenceSetTransformer, SetTransformer, create_model, isab_field, transformer_field
from tests._conditioned import padding_mask

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
        induced, rff = block.parts[0].branch, block.parts[1].branch
        mab = induced.summary.mab
        h = induced.summary.seeds.expand(x.shape[0], -1, -1)
        h = h + _cross_attention(mab.attend.attn, h, _ln(x, mab.attend.norm_context), real)
        h = h + _mlp(mab.mlp, h)
        x = x + _cross_attention(induced.attend.attn, x, _ln(h, induced.attend.norm_context))
        x = x + _mlp(rff, x)
    return x


# --------------------------------------------------------------------------------------------
# Set Transformer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_sets", [None, 1])
def test_isab_field_one_lie_trotter_euler_step_per_block_is_the_pre_norm_isab_stack(num_sets, device):
    field = isab_field(16, 2, num_inducing=4, depth=3, num_sets=num_sets, mlp_hidden=24).to(device)
    x = torch.randn(3, 9, 16, device=device)
    real = ~padding_mask([9, 5, 1], 9, device)
    out = ContinuousDepth(field, t1=3, method="lie_trotter")(x, key_padding_mask=~real)
    expected = _isab_stack(field, x, real)
    assert (out - expected)[real].abs().max().item() <= 1e-5


def _garbage_padding(points, pad, extra):
    """The same clouds with `extra` more padded slots, every padded slot full of huge values or NaN; and their
    key_padding_mask."""
    device = points.device
    padded = torch.cat([points, torch.zeros(points.shape[0], extra, points.shape[2], device=device)], dim=1)
    mask = torch.cat([pad, torch.ones(pad.shape[0], extra, dtype=torch.bool, device=device)], dim=1)
    padded[mask] = 1e4 * torch.randn(int(mask.sum()), points.shape[2], device=device)
    padded[0, -1] = math.nan
    return padded, mask


def _point_features(model, points, pad):
    """The encoder's output at the points, as the model computes it before pooling."""
    return model.encoder(model.embed(points.masked_fill(pad.unsqueeze(-1), 0.0)), key_padding_mask=pad)


@pytest.mark.parametrize(
    "encoder, solve",
    [
        ("isab", dict(method="lie_trotter")),
        ("isab", dict(method="rk4", steps=4)),
        ("sab", dict(method="euler")),
    ],
)
def test_set_transformer_padding_never_changes_real_points_or_logits(encoder, solve, device):
    field = transformer_field(16, 2, 2) if encoder == "sab" else "split"
    model = SetTransformer(5, dim=16, num_heads=2, num_inducing=4, num_seeds=2, field=field, **solve).eval().to(device)
    lengths = [7, 3, 1]
    pad = padding_mask(lengths, 7, device)
    points = torch.randn(3, 7, 3, device=device).masked_fill(pad[..., None], 0.0)
    features = _point_features(model, points, pad)
    logits = model(points, key_padding_mask=pad)
    garbage, mask = _garbage_padding(points, pad, extra=4)
    features_garbage = _point_features(model, garbage, mask)
    assert (features_garbage[:, :7][~pad] - features[~pad]).abs().max().item() <= 1e-5
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
    pad = padding_mask([12, 5, 9], 12, device)
    dense = torch.zeros(3, 12, 3, device=device)
    dense[~pad] = torch.cat(clouds)
    logits = model(batch)
    assert logits.shape == (3, 8)
    assert (logits - model(dense, key_padding_mask=pad)).abs().max().item() <= 1e-5


def test_a_padded_dense_batch_is_the_torch_geometric_batch(device):
    """``to_dense_batch`` marks the real points (True), ``key_padding_mask`` the padding: a dense batch padded with
    garbage and passed with ``~mask`` gives the logits of the torch_geometric batch it came from, for the Set
    Transformer and for Lee et al.'s reference model."""
    data = pytest.importorskip("torch_geometric.data")
    from torch_geometric.utils import to_dense_batch

    torch.manual_seed(0)
    batch = data.Batch.from_data_list([data.Data(pos=torch.randn(n, 3)) for n in (4, 9, 1)]).to(device)
    dense, real = to_dense_batch(batch.pos, batch.batch)
    dense = dense.masked_fill(~real[..., None], 1e3)  # what a padded slot holds never matters
    models = (
        SetTransformer(5, dim=16, num_heads=2, num_inducing=3, num_seeds=2),
        ReferenceSetTransformer(5, dim=16, num_heads=2, num_inducing=3, dropout=0.0),
        ReferenceSetTransformer(5, dim=16, num_heads=2, num_inducing=3, dropout=0.0, field="composed", steps=2),
    )
    for model in models:
        model.eval().to(device)
        logits = model(batch)
        assert logits.shape == (3, 5)
        assert (model(dense, key_padding_mask=~real) - logits).abs().max().item() <= 1e-5
        assert torch.equal(model.forward_head(model.forward_features(dense, ~real)), model(dense, ~real))


def test_set_transformer_registered_models(device):
    big = create_model("set_transformer_modelnet40").to(device)
    assert big.head.out_features == 40 and big.embed.out_features == 256
    assert big.pool.seeds.shape == (1, 256) and big.dropout.p == 0.5
    layers = big.encoder.field.layers
    assert len(layers) == 2 and big.encoder.t1 == 2.0
    assert layers[0].parts[0].branch.summary.seeds.shape == (16, 256)
    assert layers[0].parts[0].branch.attend.attn.num_heads == 4
    small = create_model("set_transformer_shapes3d", method="rk4", steps=4).eval().to(device)
    assert small.head.out_features == 8 and small.embed.out_features == 64
    assert small(torch.randn(2, 30, 3, device=device)).shape == (2, 8) and small.encoder.stats.nfe == 16
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in big.parameters())

