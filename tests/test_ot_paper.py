"""Kan et al. (2025) as the paper defines it: eq. 12, Appendix B's sizes and settings, post-LN blocks, ln_f option."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from torch import nn

from neuralode_tf.continuous import regularization
from neuralode_tf.data import Splits, TensorSplit, Vocabulary
from neuralode_tf.fields import BlockIncrementField, ComposedField, Sublayer
from neuralode_tf.models import ReferenceSetTransformer, TextClassifier, ViT, stack_encoder
from neuralode_tf.models.frontends.set_reference import ReferenceMAB, reference_isab
from neuralode_tf.nn import AttentionBranch, MLPBranch
from neuralode_tf.train import OT_VARIANTS, PRESETS, ConfigError, TrainConfig, train
from tests._problems import tokens


def _images(channels: int, side: int, classes: int) -> Splits:
    split = TensorSplit(x=torch.zeros(1, channels, side, side), y=torch.zeros(1, dtype=torch.long))
    return Splits("images", "image", split, split, "shape only", classes=tuple(map(str, range(classes))))


PAPER_SHAPES = {  # the data's shapes only: no file is read
    "ot_mnist": lambda: _images(1, 28, 10),  # 28x28x1, 10 classes
    "ot_catsdogs": lambda: _images(3, 224, 2),  # Sinkformers resize to 224x224x3, 2 classes
    "ot_imdb": lambda: Splits(  # Sinkformers' 16,000-token sentencepiece vocabulary, 2 classes
        "imdb", "tokens", [], [], "shape only", classes=("neg", "pos"), vocab=Vocabulary(f"w{i}" for i in range(15_998))
    ),
    "ot_modelnet40": lambda: Splits("modelnet40_h5", "points", [], [], "shape only", classes=tuple("c" * 40)),
}


def _counts(preset: str) -> dict[str, tuple[int, int]]:
    """(whole model, transformer blocks) per variant, built on the meta device; the blocks are the encoder's
    parameters but the ISABs' inducing points, which Kan et al.'s Table 1 leaves out."""
    counts = {}
    for name, overrides in OT_VARIANTS[preset].items():
        with torch.device("meta"):
            model = PRESETS[preset].build_model(PAPER_SHAPES[preset](), overrides)
        blocks = sum(p.numel() for n, p in model.encoder.named_parameters() if not n.endswith("inducing"))
        counts[name] = (sum(p.numel() for p in model.parameters()), blocks)
    continuous = {counts[name] for name in counts if name != "baseline"}
    assert len(continuous) == 1  # every continuous model has the same parameters
    return {"baseline": counts["baseline"], "continuous": continuous.pop()}


@pytest.mark.cpu_only("counts parameters on the meta device; no computation")
def test_mnist_counts_are_table_2():
    counts = _counts("ot_mnist")  # Table 2 counts whole models
    assert counts["continuous"][0] == 17_546 and f"{counts['continuous'][0] / 1e3:.0f}k" == "18k"
    # Sinkformers' ViT_only_Att also builds a FeedForward(128, 128) it never calls: 33,280 parameters in their 93k
    assert counts["baseline"][0] == 59_658 and f"{(counts['baseline'][0] + 33_280) / 1e3:.0f}k" == "93k"


@pytest.mark.cpu_only("counts parameters on the meta device; no computation")
def test_catsdogs_counts_are_table_3():
    counts = _counts("ot_catsdogs")
    assert counts["baseline"] == (1_899_138, 1_774_848) and counts["continuous"][1] == 1_479_040
    assert (f"{counts['baseline'][1] / 1e6:.2f}M", f"{counts['continuous'][1] / 1e6:.2f}M") == ("1.77M", "1.48M")


@pytest.mark.cpu_only("counts parameters on the meta device; no computation")
def test_imdb_counts_are_table_4():
    counts = _counts("ot_imdb")
    assert counts["baseline"][1] == 4_738_560 and counts["continuous"][1] == 2_369_280
    assert (f"{counts['baseline'][1] / 1e6:.2f}M", f"{counts['continuous'][1] / 1e6:.2f}M") == ("4.74M", "2.37M")


@pytest.mark.cpu_only("counts parameters on the meta device; no computation")
def test_modelnet_counts_are_table_1():
    counts = _counts("ot_modelnet40")
    assert counts["baseline"] == (1_145_384, 862_464) and counts["continuous"][1] == 646_400  # 1,145,384: Sinkformers'
    assert (f"{counts['baseline'][1] / 1e6:.2f}M", f"{counts['continuous'][1] / 1e6:.2f}M") == ("0.86M", "0.65M")


@pytest.mark.cpu_only("reads the presets' settings")
def test_paper_presets_have_appendix_b_settings():
    settings = {  # epochs, batch, lr, decays, data options, {variant: (steps, λ)}
        "ot_mnist": (45, 100, 5e-4, [35, 40], {}, {"ot": (20, 0.01), "ot_unregularized": (20, None)}),
        "ot_catsdogs": (250, 64, 3e-5, [], {}, {"ot": (20, 0.01), "node_regularized": (20, 0.005)}),
        "ot_imdb": (15, 64, 1e-4, [12], {"max_length": 512}, {"ot": (8, 0.5), "node_regularized": (8, 0.5)}),
        "ot_modelnet40": (200, 64, 1e-3, [150], {"num_points": 5000}, {"ot": (8, 1.0), "node_regularized": (8, 0.1)}),
    }
    for preset, (epochs, batch, lr, decays, data, variants) in settings.items():
        config = PRESETS[preset].config
        assert (config.epochs, config.batch_size, config.lr, config.lr_decay_epochs) == (epochs, batch, lr, decays)
        assert config.grad_clip == config.weight_decay == config.warmup_steps == 0  # Sinkformers: Adam, no clipping
        assert data.items() <= PRESETS[preset].dataset_options.items()
        for name, (steps, weight) in variants.items():
            assert (OT_VARIANTS[preset][name]["steps"], OT_VARIANTS[preset][name]["transport_cost"]) == (steps, weight)
    assert "node" not in OT_VARIANTS["ot_mnist"]  # one attention-only block: the N-ODE Transformer is the OT one
    assert OT_VARIANTS["ot_imdb"]["ot_slight"]["transport_cost"] == 0.01  # Table 4's † rows


def test_node_transformer_is_the_ot_transformer_without_a_feed_forward_layer(device):
    """Kan et al. §5.2: with one attention-only block, eq. 12 and eq. 7 are the same model."""
    data = PAPER_SHAPES["ot_mnist"]()
    ot = dict(OT_VARIANTS["ot_mnist"]["ot"], steps=5)
    models = [
        PRESETS["ot_mnist"].build_model(data, dict(ot, field=f)).double().to(device) for f in ("composed", "node")
    ]
    with torch.no_grad():
        for p, q in zip(models[0].parameters(), models[1].parameters(), strict=True):
            q.copy_(p)
    images = torch.rand(3, 1, 28, 28, dtype=torch.float64).to(device)
    logits = [model(images) for model in models]
    costs = [regularization(model) for model in models]
    assert (logits[0] - logits[1]).abs().max().item() == 0.0 and (costs[0] - costs[1]).abs().item() == 0.0


def test_node_field_drops_only_the_feed_forward_skip(device):
    torch.manual_seed(0)
    x = tokens(device=device)
    g, f = AttentionBranch(16, 2).double().to(device), MLPBranch(16).double().to(device)
    assert (BlockIncrementField((g, f))(0.0, x) - f(x + g(x))).abs().max().item() == 0.0
    assert (BlockIncrementField((g,))(0.0, x) - (x + g(x))).abs().max().item() == 0.0  # nothing to drop
    n1, n2 = nn.LayerNorm(16).double().to(device), nn.LayerNorm(16).double().to(device)
    post = (Sublayer(g, norm=n1), Sublayer(f, norm=n2))
    assert (BlockIncrementField(post)(0.0, x) - n2(f(n1(x + g(x))))).abs().max().item() == 0.0
    assert (ComposedField([post])(0.0, x) - n2(n1(x + g(x)) + f(n1(x + g(x))))).abs().max().item() == 0.0


def test_reference_isab_is_lee_et_al_mab_of_mab(device):
    torch.manual_seed(0)
    block = nn.ModuleList(reference_isab(3, 16, 2, 4)).double().to(device)
    induced = block[0].branch
    points = torch.randn(2, 7, 3, dtype=torch.float64).to(device)
    summary = induced.summary(induced.inducing.expand(2, -1, -1), points)
    isab = induced.mab(points, summary)  # MAB_1(X, MAB_0(I, X)), the reference ISAB
    assert (ComposedField([block])(0.0, points) - isab).abs().max().item() <= 1e-12
    o = block[0](points)  # LN_0(fc_q(X) + attend(X, H)); N-ODE: LN_1(ReLU(fc_o(O))), the rFF without its skip
    assert (BlockIncrementField(block)(0.0, points) - block[1](o, residual=False)).abs().max().item() <= 1e-12
    assert sum(p.numel() for p in ReferenceMAB(256, 3, 256, 4).parameters()) == 134_656  # (d_q + 2 d_kv + d + 8) d


@pytest.mark.parametrize("field", ["discrete", "composed", "node"])
def test_reference_set_transformer_ignores_padding(field, device):
    torch.manual_seed(0)
    solve_settings = {} if field == "discrete" else dict(steps=3, transport_cost=1.0)
    model = ReferenceSetTransformer(5, dim=16, num_heads=2, num_inducing=4, field=field, **solve_settings)
    model = model.double().eval().to(device)
    points = torch.randn(2, 6, 3, dtype=torch.float64).to(device)
    padded = torch.cat([points, torch.full((2, 3, 3), 7.0, dtype=torch.float64, device=device)], dim=1)
    pad = torch.arange(9, device=device) >= 6
    assert (model(padded, key_padding_mask=pad.expand(2, -1)) - model(points)).abs().max().item() <= 1e-10
    with pytest.raises(ValueError, match="field='split' cannot read them"):
        ReferenceSetTransformer(5, dim=16, num_heads=2, field="split")


def test_post_norm_relu_blocks_are_sinkformers_imdb_encoder(device):
    torch.manual_seed(0)
    model = TextClassifier(50, 2, dim=16, num_heads=2, depth=2, norm="post", activation="relu", field="discrete")
    model = model.double().to(device)
    (attend, feed), _ = model.encoder.stack.blocks
    assert isinstance(attend.branch.norm, nn.Identity) and attend.norm.eps == 1e-6
    assert isinstance(feed.branch.act, nn.ReLU) and isinstance(feed.branch.norm, nn.Identity)
    x = tokens(device=device)
    expected = x
    for g, f in model.encoder.stack.blocks:  # LN(x + MHA(x)), then LN(u + W2 ReLU(W1 u + b1) + b2)
        u = g.norm(expected + g.branch.proj(_heads(g.branch, expected)))
        expected = f.norm(u + f.branch.fc2(torch.relu(f.branch.fc1(u))))
    assert (model.encoder(x) - expected).abs().max().item() <= 1e-12
    with pytest.raises(ValueError, match="cannot read them"):
        TextClassifier(50, 2, dim=16, num_heads=2, norm="post")  # "split" has no post-norm reading


def _heads(attention: AttentionBranch, x: torch.Tensor) -> torch.Tensor:
    q, k, v = (z.unflatten(-1, (attention.num_heads, -1)).transpose(-3, -2) for z in attention.qkv(x).chunk(3, -1))
    weights = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)
    return (weights @ v).transpose(-3, -2).flatten(-2)


def test_discrete_reading_is_the_split_stack_for_pre_norm_blocks(device):
    torch.manual_seed(0)
    sets = [(AttentionBranch(16, 2), MLPBranch(16)) for _ in range(2)]
    sets = [tuple(b.double().to(device) for b in branches) for branches in sets]
    x = tokens(device=device)
    assert (stack_encoder("discrete", 2, sets)(x) - stack_encoder("split", 2, sets)(x)).abs().max().item() == 0.0
    with pytest.raises(ValueError, match="is no ODE and takes no"):
        stack_encoder("discrete", 2, sets, steps=4)


def test_field_norm_puts_a_layer_norm_in_the_composed_field(device):
    """The released code's ln_f inside the field: the transport cost then no longer grows with the state's norm."""
    torch.manual_seed(0)
    common = dict(img_size=8, patch_size=2, in_chans=1, num_classes=3, dim=16, depth=2, num_heads=2, field="composed")
    plain = ViT(**common, steps=4, transport_cost=1.0).double().to(device)
    normed = ViT(**common, field_norm=True, steps=4, transport_cost=1.0).double().to(device)
    norm = normed.encoder.field.field.final_norm
    assert isinstance(norm, nn.LayerNorm) and sum(p.numel() for p in norm.parameters()) == 32
    x = tokens(n=17, device=device)
    blocks = normed.encoder.field.field.blocks
    assert (normed.encoder.field.field(0.0, x) - norm(ComposedField(blocks)(0.0, x))).abs().max().item() == 0.0
    cost = {}
    for name, model in (("plain", plain), ("normed", normed)):
        for scale in (1.0, 10.0):
            model.encoder(scale * x)
            cost[name, scale] = model.encoder.regularization.item()
    assert cost["plain", 10.0] > 50 * cost["plain", 1.0]  # ||f||² ≈ ||x||² with the blocks' skips
    assert cost["normed", 10.0] == pytest.approx(cost["normed", 1.0], rel=1e-3) == pytest.approx(0.5, rel=1e-3)
    with pytest.raises(ValueError, match="final_norm apply to field='composed' only"):
        ViT(**{**common, "field": "node"}, field_norm=True)


@pytest.mark.cpu_only("trains on the CPU and reads metrics.csv")
def test_lr_decay_epochs_divide_the_learning_rate_by_ten(tmp_path):
    settings = dict(epochs=3, batch_size=512, lr=1e-3, warmup_steps=0, lr_decay_epochs=[1, 2], progress=False)
    train(replace(PRESETS["ot_mnist_digits"].config, out_dir=str(tmp_path), model={"steps": 2}, **settings))
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    lrs = [float(row.split(",")[5]) for row in rows[1:]]  # the rate after each step: 2 steps per epoch
    assert lrs == pytest.approx([1e-3, 1e-4, 1e-4, 1e-5, 1e-5, 1e-5])
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["lr_decay_epochs"] == [1, 2] and saved["grad_clip"] == 0.0
    with pytest.raises(ConfigError, match="lr_decay_epochs"):
        TrainConfig(preset="ot_mnist", lr_decay_epochs=[0])
