"""ViT and timm conversion: shapes, the discrete stacks they compute, weight sharing, registered ViTs, timm logits."""

from __future__ import annotations

import copy

import pytest
import torch

from neuralode_tf.fields import ParallelField, SplitField, WeightSharedField
from neuralode_tf.models import ViT, create_model, list_models, model_config, transformer_field
from neuralode_tf.models.converters.timm import continuous_from_timm
from neuralode_tf.nn import AttentionBranch, MLPBranch, timm_block_branches


def _branches(model: ViT) -> list[list[torch.nn.Module]]:
    """The residual branches of each parameter set of a ViT built from a named field."""
    return [[part.branch for part in layer.parts] for layer in model.encoder.field.layers]


def _discrete(model: ViT, images: torch.Tensor, parallel: bool) -> torch.Tensor:
    """The discrete pre-norm ViT written out with the model's modules: block m uses set m k / D."""
    x = model.patch_embed(images).flatten(2).transpose(1, 2)
    x = torch.cat([model.cls_token.expand(len(x), -1, -1), x], dim=1) + model.pos_embed
    sets = _branches(model)
    depth = int(model.encoder.t1)
    for m in range(depth):
        attn, mlp = sets[m * len(sets) // depth]
        if parallel:
            x = x + attn(x) + mlp(x)
        else:
            x = x + attn(x)
            x = x + mlp(x)
    return model.head(model.norm(x)[:, 0])


@pytest.mark.parametrize(("img_size", "patch_size", "in_chans"), [(8, 2, 1), ((12, 20), 4, 3)])
def test_vit_shapes(img_size, patch_size, in_chans, device):
    model = ViT(img_size, patch_size, in_chans, num_classes=7, dim=32, depth=2, num_heads=4).to(device)
    hw = (img_size, img_size) if isinstance(img_size, int) else img_size
    images = torch.randn(3, in_chans, *hw, device=device)
    tokens = model.forward_features(images)
    assert tokens.shape == (3, 1 + (hw[0] // patch_size) * (hw[1] // patch_size), 32)
    assert model.forward_head(tokens, pre_logits=True).shape == (3, 32)
    assert model(images).shape == (3, 7)


def test_vit_bad_shapes_raise(device):
    with pytest.raises(ValueError, match="divisible by patch_size"):
        ViT(10, 4, 1, 10, dim=16, depth=1, num_heads=2)
    model = ViT(8, 2, 1, 10, dim=16, depth=1, num_heads=2).to(device)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 1, 8, 8\)"):
        model(torch.randn(2, 3, 8, 8, device=device))


@pytest.mark.parametrize("num_sets", [None, 2])
@pytest.mark.parametrize(("field", "parallel"), [("split", False), ("parallel", True)])
def test_unit_steps_compute_the_discrete_stack(field, parallel, num_sets, device):
    """split + lie_trotter is the pre-norm ViT; parallel + euler is Zhong et al.'s parallel block."""
    model = ViT(8, 2, 1, 10, dim=32, depth=4, num_heads=4, field=field, num_sets=num_sets).to(device)
    assert model.encoder.solve_options["method"] == ("euler" if parallel else "lie_trotter")
    images = torch.randn(5, 1, 8, 8, device=device)
    assert (model(images) - _discrete(model, images, parallel)).abs().max().item() <= 1e-5


def test_other_solves_integrate_the_same_field(device):
    model = ViT(8, 2, 1, 10, dim=32, depth=3, num_heads=4, method="rk4", steps=6).to(device)
    images = torch.randn(2, 1, 8, 8, device=device)
    logits = model(images)
    assert model.encoder.stats.nfe == 6 * 4
    assert (logits - _discrete(model, images, parallel=False)).abs().max().item() > 1e-4


@pytest.mark.parametrize("num_sets", [12, 6, 4, 3, 2, 1])
def test_weight_sharing_parameter_counts(num_sets, device):
    """12 layers from k sets: k (4d² + 6d + 2dh + h + 3d) encoder parameters, plus the documented rest."""
    d, h, patch, chans, n_cls = 32, 128, 2, 1, 10
    model = ViT(8, patch, chans, n_cls, dim=d, depth=12, num_heads=4, num_sets=num_sets).to(device)
    per_set = (4 * d * d + 6 * d) + (2 * d * h + h + 3 * d)
    assert sum(p.numel() for p in model.encoder.parameters()) == num_sets * per_set
    n = (8 // patch) ** 2
    rest = (chans * patch * patch + 1) * d + (n + 2) * d + 2 * d + (d + 1) * n_cls
    assert sum(p.numel() for p in model.parameters()) == num_sets * per_set + rest


def test_zhong_table1_parameter_counts(device):
    """DeiT-Ti with 100 classes at 224/16 gives Zhong et al.'s Table 1 counts (in millions, rounded)."""
    for num_sets, millions in [(12, 5.5), (6, 2.9), (4, 2.0), (3, 1.5), (2, 1.1), (1, 0.7)]:
        model = create_model("deit_tiny", num_classes=100, field="parallel", num_sets=num_sets).to(device)
        assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == millions


def test_field_choices_and_errors(device):
    with pytest.raises(ValueError, match="positive divisor of depth"):
        transformer_field(16, 12, 2, num_sets=5)
    with pytest.raises(ValueError, match="unknown field 'serial'; valid: 'split', 'parallel', 'composed', 'node'"):
        ViT(8, 2, 1, 10, dim=16, depth=2, num_heads=2, field="serial")
    with pytest.raises(ValueError, match="inner_residuals=False and final_norm apply to field='composed' only"):
        ViT(8, 2, 1, 10, dim=16, depth=2, num_heads=2, field="split", inner_residuals=False)
    attention_only = transformer_field(16, 2, 2, attention_only=True).to(device)
    assert all(len(layer.parts) == 1 for layer in attention_only.layers)
    x = torch.randn(2, 5, 16, device=device)
    assert attention_only(0.0, x).shape == x.shape


def test_ready_made_field(device):
    attn, mlp = AttentionBranch(16, 2), MLPBranch(16)
    field = WeightSharedField([SplitField(attn, mlp)], depth=3)
    model = ViT(8, 2, 1, 10, dim=16, depth=3, field=field).to(device)
    assert model.encoder.field is field and model.encoder.solve_options["method"] == "lie_trotter"
    images = torch.randn(2, 1, 8, 8, device=device)
    assert (model(images) - _discrete(model, images, parallel=False)).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match=r"\['num_heads', 'num_sets'\] configure the model's own blocks"):
        ViT(8, 2, 1, 10, dim=16, depth=3, num_heads=2, num_sets=1, field=field)
    # parallel blocks have parts too, yet default to euler: their block is one Euler step of the sum
    parallel = WeightSharedField([ParallelField(attn, mlp)], depth=3)
    model = ViT(8, 2, 1, 10, dim=16, depth=3, field=parallel).to(device)
    assert model.encoder.solve_options["method"] == "euler"
    assert (model(images) - _discrete(model, images, parallel=True)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("name", [name for name in list_models() if model_config(name).builder is ViT])
def test_registered_vits_run_at_their_image_size(name, device):
    config = model_config(name).kwargs
    overrides = {}
    if device.type == "xla" and config.get("field") == "composed":
        # XLA compiles the fixed-grid solve as one graph: ot_catsdogs_ode's 20 steps of its 5 blocks took 7
        # minutes to compile on XLA's CPU backend. Fewer steps build and run the same preset.
        overrides = dict(steps=4)
    model = create_model(name, **overrides).to(device)
    logits = model(torch.randn(1, model.in_chans, *model.img_size, device=device))
    assert logits.shape == (1, config["num_classes"]) and torch.isfinite(logits).all()


def test_ot_mnist_settings(device):
    baseline, ode = create_model("ot_mnist_baseline"), create_model("ot_mnist_ode").to(device)
    assert [len(block) for block in ode.encoder.field.field.blocks] == [1]  # one attention-only block, composed
    assert baseline.encoder.t1 == ode.encoder.t1 == 1.0
    ode(torch.randn(2, 1, 28, 28, device=device))
    assert ode.encoder.stats.nfe == 20  # T = 1, 20 Euler steps
    # Kan et al.'s 18k and 93k (Table 2); Sinkformers' baseline also builds an unused FeedForward(128, 128)
    assert sum(p.numel() for p in ode.parameters()) == 17_546
    assert sum(p.numel() for p in baseline.parameters()) + 33_280 == 92_938
    assert create_model("vit_digits", num_classes=3).head.out_features == 3


# --------------------------------------------------------------------------------------------
# timm conversion
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def timm():
    return pytest.importorskip("timm")


@pytest.fixture(scope="module")
def _vit_tiny_cpu(timm):
    torch.manual_seed(0)
    kwargs = dict(pretrained=False, img_size=32, patch_size=4, num_classes=10, init_values=0.1)
    return timm.create_model("vit_tiny_patch16_224", **kwargs).eval()


@pytest.fixture
def vit_tiny(_vit_tiny_cpu, device):
    """The module's timm ViT, built once, copied onto the device for each test (tests may train it)."""
    return copy.deepcopy(_vit_tiny_cpu).to(device)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@torch.no_grad()
def test_timm_split_unit_steps_equal_the_original(vit_tiny, device):
    converted = continuous_from_timm(vit_tiny, field="split", method="lie_trotter", step_size=1)
    images = torch.randn(2, 3, 32, 32, device=device)
    assert _max_diff(converted(images), vit_tiny(images)) <= 1e-5
    assert converted.encoder.stats.nfe == 2 * 12


@torch.no_grad()
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(img_size=(24, 40), patch_size=8, depth=3),
        dict(img_size=16, patch_size=2, depth=2, global_pool="avg", class_token=False, fc_norm=True),
        dict(img_size=16, patch_size=4, depth=2, reg_tokens=2, no_embed_class=True),
    ],
)
def test_timm_other_shapes_and_pooling(timm, kwargs, device):
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=5, init_values=0.1, **kwargs)
    model.eval().to(device)
    hw = kwargs["img_size"] if isinstance(kwargs["img_size"], tuple) else (kwargs["img_size"],) * 2
    images = torch.randn(2, 3, *hw, device=device)
    assert _max_diff(continuous_from_timm(model)(images), model(images)) <= 1e-5


@torch.no_grad()
def test_timm_parallel_is_the_parallel_block(vit_tiny, device):
    images = torch.randn(2, 3, 32, 32, device=device)
    converted = continuous_from_timm(vit_tiny, field="parallel")
    assert converted.encoder.solve_options["method"] == "euler"
    x = vit_tiny.norm_pre(vit_tiny.patch_drop(vit_tiny._pos_embed(vit_tiny.patch_embed(images))))
    for block in vit_tiny.blocks:
        attn, mlp = timm_block_branches(block)
        x = x + attn(x) + mlp(x)
    assert _max_diff(converted(images), vit_tiny.forward_head(vit_tiny.norm(x))) <= 1e-5


@torch.no_grad()
def test_timm_rk4_runs_and_differs(vit_tiny, device):
    images = torch.randn(2, 3, 32, 32, device=device)
    converted = continuous_from_timm(vit_tiny, method="rk4", steps=12)
    logits = converted(images)
    assert torch.isfinite(logits).all() and converted.encoder.stats.nfe == 4 * 12
    assert _max_diff(logits, vit_tiny(images)) > 1e-4


@torch.no_grad()
def test_timm_composed_is_one_field_for_the_whole_stack(vit_tiny, device):
    images = torch.randn(2, 3, 32, 32, device=device)
    x = vit_tiny.norm_pre(vit_tiny.patch_drop(vit_tiny._pos_embed(vit_tiny.patch_embed(images))))
    one_step = continuous_from_timm(vit_tiny, field="composed")
    assert one_step.encoder.t1 == 1.0 and one_step.encoder.stats is None
    # One Euler step with the blocks' own skips: the discrete stack's output plus an extra skip.
    expected = vit_tiny.forward_head(vit_tiny.norm(x + vit_tiny.blocks(x)))
    assert _max_diff(one_step(images), expected) <= 1e-5
    assert one_step.encoder.stats.nfe == 1
    # XLA compiles a fixed-grid solve as one graph: 20 steps of the 12 blocks took 5-10 minutes to compile on
    # XLA's CPU backend, 4 steps 30 s. The checks are the same for any number of steps.
    steps = 4 if device.type == "xla" else 20
    several = continuous_from_timm(vit_tiny, field="composed", steps=steps, transport_cost=0.01)
    logits = several(images)
    assert torch.isfinite(logits).all() and several.encoder.stats.nfe == steps
    assert several.encoder.regularization.item() > 0


@torch.no_grad()
def test_timm_node_is_one_ode_per_block_without_its_outer_skip(vit_tiny, device):
    images = torch.randn(2, 3, 32, 32, device=device)
    converted = continuous_from_timm(vit_tiny, field="node")
    assert len(converted.encoder.odes) == 12
    x = vit_tiny.norm_pre(vit_tiny.patch_drop(vit_tiny._pos_embed(vit_tiny.patch_embed(images))))
    for block in vit_tiny.blocks:  # one Euler step of dx/dt = F(x + G(x)) per block
        attn, mlp = timm_block_branches(block)
        x = x + mlp(x + attn(x))
    assert _max_diff(converted(images), vit_tiny.forward_head(vit_tiny.norm(x))) <= 1e-5
    assert converted.encoder.stats.nfe == 12


def test_timm_parameters_are_shared(vit_tiny, device):
    model = vit_tiny  # a copy for this test: training it leaves the module's fixture intact
    converted = continuous_from_timm(model)
    assert {id(p) for p in converted.parameters()} == {id(p) for p in model.parameters()}
    qkv = model.blocks[5].attn.qkv.weight
    before = qkv.detach().clone()
    optimizer = torch.optim.SGD(converted.parameters(), lr=0.1)
    converted(torch.randn(2, 3, 32, 32, device=device)).square().sum().backward()
    optimizer.step()
    assert _max_diff(qkv, before) > 0
    with torch.no_grad():
        images = torch.randn(2, 3, 32, 32, device=device)
        assert _max_diff(converted(images), model(images)) <= 1e-5


def test_timm_errors(timm, vit_tiny, device):
    from timm.models.vision_transformer import ParallelScalingBlock

    parallel_scaling = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=16, patch_size=8, depth=1, block_fn=ParallelScalingBlock
    ).to(device)
    with pytest.raises(TypeError, match="ParallelScalingBlock is not a timm Block"):
        continuous_from_timm(parallel_scaling)
    with pytest.raises(ValueError, match="unknown field 'sequential'"):
        continuous_from_timm(vit_tiny, field="sequential")
    with pytest.raises(TypeError, match="Linear is not a timm VisionTransformer"):
        continuous_from_timm(torch.nn.Linear(2, 2).to(device))
