"""ComposedField (OT-Transformer) and the N-ODE Transformer: what one Euler step equals, exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from neuralode_tf import ContinuousDepth, solve
from neuralode_tf.fields import BlockIncrementField, ComposedField
from neuralode_tf.models import NODETransformer, TextClassifier, stack_encoder
from neuralode_tf.nn import AttentionBranch, MLPBranch
from tests._problems import tokens


def _blocks(
    depth: int, dim: int = 16, attention_only: bool = False, device: torch.device | str = "cpu"
) -> list[tuple[nn.Module, ...]]:
    torch.manual_seed(0)
    return [
        (AttentionBranch(dim, 2).double().to(device),)
        if attention_only
        else (AttentionBranch(dim, 2).double().to(device), MLPBranch(dim).double().to(device))
        for _ in range(depth)
    ]


def _discrete(blocks, x):
    """The discrete pre-norm stack: x + G(x), then + F(.), block after block."""
    for branches in blocks:
        for branch in branches:
            x = x + branch(x)
    return x


def _one_euler_step(field, x):
    return solve(field, x, [0.0, 1.0], method="euler", steps=1).y1


def test_composed_with_inner_residuals_is_the_transformer_plus_an_outer_skip(device):
    blocks, x = _blocks(3, device=device), tokens(device=device)
    norm = nn.LayerNorm(16).double().to(device)
    field = ComposedField(blocks, final_norm=norm)
    assert (field(torch.tensor(0.0), x) - norm(_discrete(blocks, x))).abs().max().item() == 0.0
    step = _one_euler_step(field, x)
    assert (step - (x + norm(_discrete(blocks, x)))).abs().max().item() <= 1e-12
    assert (step - norm(_discrete(blocks, x))).abs().max().item() > 0.1  # never the discrete transformer


def test_composed_without_inner_residuals_is_the_plain_composition_of_branches(device):
    blocks, x = _blocks(2, device=device), tokens(device=device)
    (g1, f1), (g2, f2) = blocks
    field = ComposedField(blocks, inner_residuals=False)
    assert (_one_euler_step(field, x) - (x + f2(g2(f1(g1(x)))))).abs().max().item() <= 1e-12


def test_paper_statement_holds_without_inner_residuals_for_one_branch(device):
    """Kan et al.: 'a single Euler step with T = 1 recovers the discrete transformer' — true for one
    attention-only block without inner residuals; with them (the released code, the presets) it is 2x + G(x),
    and so is the N-ODE Transformer of that block (eq. 12: no fully-connected layer loses its skip)."""
    blocks, x = _blocks(1, attention_only=True, device=device), tokens(device=device)
    without = _one_euler_step(ComposedField(blocks, inner_residuals=False), x)
    assert (without - _discrete(blocks, x)).abs().max().item() == 0.0
    with_skips = _one_euler_step(ComposedField(blocks), x)  # 2x + G(x)
    assert (with_skips - (x + _discrete(blocks, x))).abs().max().item() <= 1e-12
    node = _one_euler_step(BlockIncrementField(blocks[0]), x)
    assert (node - with_skips).abs().max().item() == 0.0
    two_branches = _blocks(1, device=device)
    assert (
        _one_euler_step(ComposedField(two_branches, inner_residuals=False), x) - _discrete(two_branches, x)
    ).abs().max() > 0.1


def test_composed_accepts_whole_blocks_and_shared_sets(device):
    (g, f), x = _blocks(1, device=device)[0], tokens(device=device)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.g, self.f = g, f

        def forward(self, x):
            x = x + self.g(x)
            return x + self.f(x)

    whole = ComposedField([Block(), Block()])
    assert (whole(0.0, x) - ComposedField([(g, f), (g, f)])(0.0, x)).abs().max().item() == 0.0
    assert sum(p.numel() for p in whole.parameters()) == sum(p.numel() for p in [*g.parameters(), *f.parameters()])
    with pytest.raises(ValueError, match="whole modules, whose skips cannot be removed"):
        ComposedField([Block()], inner_residuals=False)
    with pytest.raises(TypeError, match="got one Block; wrap it"):
        ComposedField(Block())
    with pytest.raises(ValueError, match="at least one block"):
        ComposedField([])


def test_node_transformer_chains_one_ode_per_block(device):
    blocks, x = _blocks(3, device=device), tokens(device=device)
    model = NODETransformer(blocks, steps=4)
    expected = x
    for g, f in blocks:
        expected = solve(BlockIncrementField((g, f)), expected, [0.0, 1.0], method="euler", steps=4).y1
    assert (model(x) - expected).abs().max().item() <= 1e-12
    assert model.stats.nfe == 3 * 4 and model.stats.n_accepted == 12
    h = 0.25
    g, f = blocks[0]
    y = x
    for _ in range(4):  # BlockIncrementField is F(x + G(x)): the block without its outer (MLP) skip
        y = y + h * f(y + g(y))
    assert (model.odes[0](x) - y).abs().max().item() <= 1e-12


def test_stack_encoder_readings_and_defaults(device):
    sets = _blocks(2, device=device)
    composed = stack_encoder("composed", 2, sets, steps=20)
    assert isinstance(composed, ContinuousDepth) and composed.t1 == 1.0 and composed.solve_options["method"] == "euler"
    split = stack_encoder("split", 2, sets)
    assert split.t1 == 2.0 and split.solve_options["method"] == "lie_trotter"
    x = tokens(device=device)
    assert (split(x) - _discrete(sets, x)).abs().max().item() <= 1e-12
    shared = stack_encoder("composed", 4, sets[:1])  # 4 blocks from one parameter set
    assert len(shared.field.blocks) == 4 and sum(p.numel() for p in shared.parameters()) == sum(
        p.numel() for m in sets[0] for p in m.parameters()
    )
    with pytest.raises(ValueError, match="needs the parameter sets"):
        stack_encoder("composed", 2)


@pytest.mark.parametrize("field", ["composed", "node"])
def test_text_classifier_ot_fields_ignore_padding(field, device):
    torch.manual_seed(0)
    model = TextClassifier(50, 3, dim=16, num_heads=2, depth=2, field=field, steps=3, transport_cost=1.0)
    model = model.eval().to(device)
    tokens_ = torch.randint(1, 50, (2, 6)).to(device)
    padded = torch.cat([tokens_, torch.zeros(2, 5, dtype=torch.long, device=device)], dim=1)
    logits, cost = model(tokens_), _cost(model)
    assert (model(padded) - logits).abs().max().item() <= 1e-5
    assert abs(_cost(model) - cost) <= 1e-6 and cost > 0


def _cost(model: nn.Module) -> float:
    from neuralode_tf.continuous import regularization

    return regularization(model).item()
