"""The ViT's norm placements, dropout and stochastic depth (Zhong et al. 2022, Figure 2 and Table 2), against the
blocks written out by hand."""

from __future__ import annotations

import pytest
import torch

from neuralode_tf.fields import StochasticDepth
from neuralode_tf.models import ViT

SMALL = dict(img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, depth=4, num_heads=2)


def _model(device: torch.device, **settings) -> ViT:
    torch.manual_seed(0)
    return ViT(**{**SMALL, **settings}).double().to(device)


def _images(device: torch.device, batch: int = 5) -> torch.Tensor:
    return torch.randn(batch, 1, 8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)


def _layers(model: ViT) -> list:
    """The parallel field's layer at each unit of depth (a set may serve several layers)."""
    field = model.encoder.field
    return [field.layers[field.index(i)] for i in range(SMALL["depth"])]


def _encoded(model: ViT, images: torch.Tensor) -> torch.Tensor:
    captured = {}
    hook = model.encoder.register_forward_hook(lambda module, args, out: captured.update(out=out))
    model(images)
    hook.remove()
    return captured["out"]


@pytest.mark.parametrize("num_sets", [4, 1])
def test_shared_norm_is_one_layernorm_read_by_both_branches(device, num_sets):
    """``norm="shared"``: each unit step is ``x + G(LN x) + F(LN x)``, exactly, with one LayerNorm a set."""
    model = _model(device, field="parallel", norm="shared", num_sets=num_sets).eval()
    images = _images(device)
    x = model.tokens(images)
    for layer in _layers(model):
        attention, mlp = (part.branch for part in layer.parts)
        assert attention[0] is mlp[0]  # one norm
        u = attention[0](x)
        x = x + (attention[1](u) + mlp[1](u))  # an Euler step adds the field's sum
    assert (_encoded(model, images) - x).abs().max().item() == 0.0
    pre = _model(device, field="parallel", num_sets=num_sets)
    saved = sum(p.numel() for p in pre.parameters()) - sum(p.numel() for p in model.parameters())
    assert saved == num_sets * 2 * SMALL["dim"]  # one LayerNorm (weight and bias) fewer a set


def test_output_norm_normalises_each_branch_output(device):
    """``norm="output"``: each unit step is ``x + LN_1(G(x)) + LN_2(F(x))``, exactly."""
    model = _model(device, field="parallel", norm="output").eval()
    images = _images(device)
    x = model.tokens(images)
    for layer in _layers(model):
        (attention, attention_norm), (mlp, mlp_norm) = (part.branch for part in layer.parts)
        assert isinstance(attention_norm, torch.nn.LayerNorm) and attention.norm.__class__ is torch.nn.Identity
        x = x + (attention_norm(attention(x)) + mlp_norm(mlp(x)))
    assert (_encoded(model, images) - x).abs().max().item() == 0.0


def _hand_stochastic_depth(model: ViT, images: torch.Tensor, rate: float, sequential: bool) -> torch.Tensor:
    """DeiT's stochastic depth on the discrete blocks: layer ``i`` drops each branch per sample with probability
    ``rate · i / (D - 1)``, masks drawn attention first, then MLP (the order the field evaluates its parts)."""
    depth = SMALL["depth"]
    x = model.tokens(images)

    def dropped(out: torch.Tensor, p: float) -> torch.Tensor:
        if p == 0.0:
            return out
        mask = torch.empty(out.shape[0], 1, 1, dtype=out.dtype, device=out.device).bernoulli_(1 - p)
        return out * (mask / (1 - p))

    for i, layer in enumerate(_layers(model)):
        attention, mlp = (part.branch for part in layer.parts)
        p = rate * i / (depth - 1)
        if sequential:
            x = x + dropped(attention(x), p)
            x = x + dropped(mlp(x), p)
        else:
            a = dropped(attention(x), p)
            x = x + (a + dropped(mlp(x), p))
    return x


@pytest.mark.parametrize("field, num_sets", [("parallel", 4), ("parallel", 1), ("split", 2)])
def test_drop_path_is_the_discrete_stochastic_depth_with_unit_steps(device, field, num_sets):
    """With one Euler (parallel) or Lie-Trotter (split) step per layer, ``drop_path`` is the discrete stack's
    stochastic depth with the linear rule, mask for mask (the same random numbers): max |Δ| = 0. With one shared set
    the rate still rises with the layer, read from depth-time."""
    model = _model(device, field=field, num_sets=num_sets, drop_path=0.3).train()
    images = _images(device, batch=16)
    torch.manual_seed(7)
    ours = _encoded(model, images)
    torch.manual_seed(7)
    hand = _hand_stochastic_depth(model, images, 0.3, sequential=field == "split")
    assert (ours - hand).abs().max().item() == 0.0
    assert not torch.equal(ours, _encoded(model.eval(), images))  # some branch was dropped in training


def test_drop_path_and_dropout_are_off_in_evaluation(device):
    """In evaluation mode the regularised models are the plain one with the same weights."""
    plain = _model(device, field="parallel").eval()
    images = _images(device)
    for settings in (dict(drop_path=0.5), dict(dropout=0.5)):
        model = _model(device, field="parallel", **settings)
        assert model.state_dict().keys() == plain.state_dict().keys()
        model.load_state_dict(plain.state_dict())
        assert torch.equal(model.eval()(images), plain(images))
        torch.manual_seed(3)
        assert not torch.equal(model.train()(images), plain(images))


@pytest.mark.cpu_only("a property of the wrapper's arithmetic, on any device the same")
def test_stochastic_depth_rule_and_expectation():
    """The linear rule ``p(t) = p_max · min(⌊t⌋, D-1) / (D-1)``; kept rows are scaled by ``1 / (1 - p)``, dropped ones
    are 0; the mean over many samples is the branch's output."""
    wrapper = StochasticDepth(torch.nn.Identity(), 0.4, depth=5)
    assert [wrapper.drop_probability(t) for t in (0.0, 0.99, 1.0, 2.5, 4.0, 5.0)] == [0.0, 0.0, 0.1, 0.2, 0.4, 0.4]
    assert StochasticDepth(torch.nn.Identity(), 0.4, depth=1).drop_probability(0.0) == 0.0
    x = torch.ones(20000, 3, dtype=torch.float64)
    torch.manual_seed(0)
    out = wrapper(torch.tensor(4.0), x)
    assert set(out[:, 0].unique().tolist()) == {0.0, 1 / 0.6}
    assert (out[:, 0] == out[:, 2]).all()  # one draw per sample
    assert abs(out.mean().item() - 1.0) < 4 * (0.4 / 0.6 / 20000) ** 0.5  # within 4 standard errors
    assert torch.equal(wrapper.eval()(torch.tensor(4.0), x), x)


@pytest.mark.cpu_only("argument checks, before any tensor is made")
def test_bad_settings_raise():
    with pytest.raises(ValueError, match="norm must be one of"):
        ViT(**SMALL, norm="sandwich")
    with pytest.raises(ValueError, match="drop_path reads the layer"):
        ViT(**SMALL, field="composed", drop_path=0.1)
    with pytest.raises(ValueError, match="no increments"):
        ViT(**SMALL, field="parallel", norm="post")
    with pytest.raises(ValueError, match="probability"):
        ViT(**SMALL, field="parallel", drop_path=1.0)
    with pytest.raises(ValueError, match="probability"):
        ViT(**SMALL, field="parallel", dropout=-0.1)
    with pytest.raises(ValueError, match="dropout"):
        ViT(**SMALL, field=torch.nn.Linear(16, 16), dropout=0.1)
    with pytest.raises(ValueError, match="per-sample times"):
        StochasticDepth(torch.nn.Identity(), 0.1, depth=3)(torch.zeros(2), torch.ones(2, 3))
