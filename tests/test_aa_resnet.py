"""AA-ResNet and EA-AA-ResNet on timm (Bello et al. 2019; Wang et al. 2021, §4.1, Tables 1-2)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("timm")

from neuralode_tf.models import aa_resnet, augmented_convolutions, create_model  # noqa: E402
from neuralode_tf.nn import AugmentedConv2d, LogitChain  # noqa: E402
from tests._resnets import SMALL, randomise_norms  # noqa: E402

TABLE_1 = {  # depth: (ResNet, AA-ResNet, EA-AA-ResNet) parameters in millions, as printed
    34: (21.8, 20.7, 20.7),
    50: (25.6, 25.8, 25.8),
    101: (44.5, 45.4, 45.4),
    152: (60.2, 61.6, 61.6),
}


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.cpu_only("counts parameters on the meta device")
@pytest.mark.parametrize("depth", sorted(TABLE_1))
def test_table_1_parameter_counts_at_the_printed_precision(depth):
    import timm

    with torch.device("meta"):
        counts = (
            count(timm.create_model(f"resnet{depth}")),
            count(aa_resnet(depth)),
            count(aa_resnet(depth, evolving=True)),
        )
    assert tuple(round(c / 1e6, 1) for c in counts) == TABLE_1[depth]


@pytest.mark.cpu_only("inspects a model built on the meta device")
def test_imagenet_chains_follow_the_map_shapes():
    """Stage 2 attends on 14x14 (pooled), so stages 2 and 3 chain (196 x 196 maps); stage 4 (7x7) restarts."""
    with torch.device("meta"):
        model = aa_resnet(50, evolving=True)
    convs = augmented_convolutions(model)
    assert [c.size for c in convs] == [(14, 14)] * 10 + [(7, 7)] * 3
    assert [c.evolution is not None for c in convs] == [False] + [True] * 9 + [False] + [True] * 2
    assert [c.starts_chain for c in convs] == [True] + [False] * 12
    evolution = sum(count(c.evolution) for c in convs if c.evolution is not None)
    assert evolution == 11 * (8 * 8 * 9 + 8)  # N_h^2 k^2 + N_h per chained layer, eq. 4


def relative_logits_by_loop(q: torch.Tensor, rel_height: torch.Tensor, rel_width: torch.Tensor, size) -> torch.Tensor:
    """Bello et al.'s eq. 4, entry by entry: S[i, j] = q_i · (r^H_{h(j)-h(i)} + r^W_{w(j)-w(i)})."""
    height, width = size
    out = torch.zeros(*q.shape[:2], height * width, height * width, dtype=q.dtype)
    for i in range(height * width):
        for j in range(height * width):
            (hi, wi), (hj, wj) = divmod(i, width), divmod(j, width)
            r = rel_height[hj - hi + height - 1] + rel_width[wj - wi + width - 1]
            out[..., i, j] = q[..., i, :] @ r
    return out


def test_relative_logits_are_bellos_equation(device):
    torch.manual_seed(0)
    conv = AugmentedConv2d(nn.Conv2d(6, 12, 3, padding=1), key_dim=8, value_dim=4, num_heads=2, size=(3, 4)).double()
    q = torch.randn(2, 2, 12, 4, dtype=torch.float64)
    expected = relative_logits_by_loop(q, conv.rel_height, conv.rel_width, (3, 4))
    got = conv.to(device)._relative_logits(q.to(device)).cpu()
    assert (got - expected).abs().max().item() < 1e-14


def test_augmented_convolution_shapes_and_parameters(device):
    conv = AugmentedConv2d(
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), key_dim=8, value_dim=8, num_heads=4, size=(5, 5)
    )
    conv = conv.to(device)
    x = torch.randn(2, 16, 9, 9, device=device)  # odd: the stride-2 convolution gives 5x5, and so does the pooling
    assert conv(x).shape == (2, 32, 5, 5)
    assert conv.conv.out_channels == 24 and conv.out_channels == 32
    assert count(conv) == 16 * 24 * 9 + (16 * 24 + 24) + (8 * 8 + 8) + 2 * 9 * 2  # conv, qkv, W^O, r^H and r^W
    with pytest.raises(ValueError, match="built for"):
        conv(torch.randn(2, 16, 12, 12, device=device))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(key_dim=6), "key_dim"),
        (dict(value_dim=0), "value_dim"),
        (dict(value_dim=32), "leaves no channel"),
        (dict(pool=3), "pool"),
        (dict(evolving=(0.5, 1.0, 3)), "LogitChain"),
    ],
)
@pytest.mark.cpu_only("checks arguments; nothing is computed")
def test_augmented_convolution_rejects_bad_settings(kwargs, match):
    settings = {**dict(key_dim=8, value_dim=8, num_heads=4, size=(4, 4)), **kwargs}
    with pytest.raises(ValueError, match=match):
        AugmentedConv2d(nn.Conv2d(16, 32, 3, padding=1), **settings)


def test_relative_embeddings_are_learned_parameters(device):
    """The released code drew fresh random relative embeddings at every call; here they are fixed and trained."""
    torch.manual_seed(0)
    model = aa_resnet(18, **SMALL).eval()
    randomise_norms(model)
    model = model.to(device)
    x = torch.randn(2, 3, 8, 8, device=device)
    assert torch.equal(model(x), model(x))
    model(x).sum().backward()
    parameters = {id(p) for p in model.parameters()}
    convs = augmented_convolutions(model)
    assert all(id(c.rel_height) in parameters and id(c.rel_width) in parameters for c in convs)
    assert all(c.rel_height.grad is not None for c in convs)
    assert sum(c.rel_height.grad.abs().sum() + c.rel_width.grad.abs().sum() for c in convs) > 0


@pytest.mark.cpu_only("checks arguments; nothing is computed")
def test_bad_depth_and_stages():
    with pytest.raises(ValueError, match="depth"):
        aa_resnet(42)
    with pytest.raises(ValueError, match="stages"):
        aa_resnet(18, stages=(5,))


def small_pair(device, alpha: float, beta: float, kernel_size: int = 3) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    aa = aa_resnet(18, **SMALL).double().eval()
    ea = aa_resnet(18, evolving=True, alpha=alpha, beta=beta, kernel_size=kernel_size, **SMALL).double().eval()
    missing, unexpected = ea.load_state_dict(aa.state_dict(), strict=False)
    assert not unexpected and all(".evolution." in name for name in missing)
    randomise_norms(aa)
    ea.load_state_dict(aa.state_dict(), strict=False)
    return aa.to(device), ea.to(device)


def test_alpha_beta_zero_is_the_aa_resnet(device):
    aa, ea = small_pair(device, 0.0, 0.0)
    x = torch.randn(3, 3, 8, 8, dtype=torch.float64, device=device)
    assert (ea(x) - aa(x)).abs().max().item() <= 1e-12
    _, ea_default = small_pair(device, 0.5, 1.0)
    assert (ea_default(x) - aa(x)).abs().max().item() > 1e-7  # the rule changes the model (5 orders above rounding)


def logits_of(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The logits each augmented convolution leaves in the chain."""
    out = []
    convs = augmented_convolutions(model)
    hooks = [c.register_forward_hook(lambda m, i, o: out.append(m._chain.logits)) for c in convs]
    model(x)
    for h in hooks:
        h.remove()
    return out


def test_evolving_rule_reads_the_previous_logits_of_the_same_shape(device):
    """With α = 1, β = 0 (A^i = A^{i-1}) every layer of a chain carries its first layer's logits unchanged."""
    _, ea = small_pair(device, 1.0, 0.0)
    logits = logits_of(ea, torch.randn(2, 3, 8, 8, dtype=torch.float64, device=device))
    convs = augmented_convolutions(ea)
    assert [c.size for c in convs] == [(8, 8)] * 4 + [(4, 4)] * 4
    assert all(torch.equal(logits[i], logits[0]) for i in range(1, 4))
    assert logits[4].shape[-1] == 16  # stage 2 restarts the chain with its own (16 x 16) maps
    assert all(torch.equal(logits[i], logits[4]) for i in range(5, 8))


def test_evolving_rule_is_equation_4(device):
    """Layer 2's logits from layer 1's by eq. 4, recomputed by hand from its own vanilla logits."""
    _, ea = small_pair(device, 0.3, 0.6)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, device=device)
    convs = augmented_convolutions(ea)
    inputs = []
    hook = convs[1].register_forward_hook(lambda m, i, o: inputs.append(i[0]))
    logits = logits_of(ea, x)
    hook.remove()
    _, vanilla = convs[1].attend(inputs[0], None)  # no previous map: the layer's own logits S
    mixed = 0.3 * logits[0] + 0.7 * vanilla
    conv = convs[1].evolution
    expected = 0.6 * torch.relu(nn.functional.conv2d(mixed, conv.weight, conv.bias, padding=1)) + 0.4 * mixed
    assert (logits[1] - expected).abs().max().item() < 1e-13


@pytest.mark.parametrize("name", ["aa_resnet_digits", "ea_aa_resnet_digits"])
def test_reduced_models_train_a_step(name, device):
    torch.manual_seed(0)
    model = create_model(name).to(device)
    x, y = torch.rand(4, 1, 8, 8, device=device), torch.tensor([0, 1, 2, 3], device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.cpu_only("inspects the modules; nothing is computed")
def test_logit_chain_is_shared():
    model = aa_resnet(18, evolving=True, **SMALL)
    chains = {id(c._chain) for c in augmented_convolutions(model)}
    assert len(chains) == 1 and isinstance(augmented_convolutions(model)[0]._chain, LogitChain)


@pytest.mark.cpu_only("inspects models built on the meta device")
@pytest.mark.parametrize("depth", sorted(TABLE_1))
def test_every_depth_takes_the_papers_resnet34_setting(depth):
    """The paper gives α = 0.5, β = 1 for EA-AA-ResNet-34 only; the other depths default to the same."""
    with torch.device("meta"):
        model = create_model(f"ea_aa_resnet{depth}")
    assert {c.evolving for c in augmented_convolutions(model)} == {(0.5, 1.0, 3)}
