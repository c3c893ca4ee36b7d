"""The analytic FLOP counter: hand counts, the closed-form transformer count, and Wang et al.'s Table 5."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from neuralode_tf.flops import FlopCounter, seq2seq_flops
from neuralode_tf.models import Seq2Seq
from neuralode_tf.nn import AttentionBranch, EvolvingAttentionBranch, MLPBranch
from paper_repro.claims._evolving_costs import evolving_table5_costs


def test_one_layer_matches_a_hand_count(device):
    attention, mlp = AttentionBranch(8, 2).to(device), MLPBranch(8, 12).to(device)
    x = torch.randn(1, 5, 8, device=device)  # n = 5 tokens, d = 8, 2 heads of 4
    with FlopCounter() as flops, torch.no_grad():
        mlp(x + attention(x))
    # qkv 2*5*8*24 = 1920, output projection 2*5*8*8 = 640, MLP 2*5*8*12 + 2*5*12*8 = 1920
    assert flops.by_operation["linear"] == 1920 + 640 + 1920
    # scores 2 heads * 2*5*5*4 = 400, their application to the values 400
    assert flops.by_operation["attention"] == 800
    assert flops.total == 5280


def test_evolving_branch_adds_its_head_convolution(device):
    branch = EvolvingAttentionBranch(8, 2, alpha=0.5, beta=0.5, kernel_size=3).to(device)
    x = torch.randn(1, 5, 8, device=device)
    with FlopCounter() as flops, torch.no_grad():
        branch(x, branch.initial_logits(x))
    # initial_logits: qkv 1920 + scores 400; forward: qkv 1920 + scores 400, convolution over the
    # (2 heads, 5, 5) map with a 2 -> 2 channel 3x3 kernel 2*(2*5*5)*2*9 = 1800, softmax @ V 400, proj 640
    assert flops.by_operation["linear"] == 1920 + 1920 + 640
    assert flops.by_operation["matmul"] == 400 + 400 + 400
    assert flops.by_operation["convolution"] == 1800


class _Products(nn.Module):
    """Only operations whose FLOPs torch's own counter has on every build and device: linear, matmul, bmm, conv.

    (On XLA it misses ``einsum``, which XLA lowers without a ``bmm``.)
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 10)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.weight = nn.Parameter(torch.randn(10, 7))

    def forward(self, x: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        h = self.linear(x) @ self.weight  # (2, 5, 7)
        g = torch.bmm(h, h.transpose(1, 2))  # (2, 5, 5)
        return g.sum() + self.conv(image).sum()


def test_agrees_with_torch_flop_counter_on_products(device):
    model = _Products().to(device)
    x, image = torch.randn(2, 5, 6, device=device), torch.randn(2, 3, 6, 6, device=device)
    with FlopCounter() as ours, torch.no_grad():
        model(x, image)
    with FlopCounterMode(display=False) as theirs, torch.no_grad():
        model(x, image)
    # linear, @ weight, bmm (batch 2, 5 rows each), then the convolution (2 images, 4 x 36 outputs)
    by_hand = 2 * (2 * 5 * 6 * 10 + 2 * 5 * 10 * 7 + 2 * 5 * 7 * 5) + 2 * 2 * 4 * 36 * 3 * 9
    assert ours.total == theirs.get_total_flops() == by_hand


def test_einsum_and_broadcast_products_match_hand_counts(device):
    x, w = torch.randn(2, 3, 4, 5, device=device), torch.randn(5, 6, device=device)
    t = torch.randn(5, 2, 3, device=device)
    with FlopCounter() as flops:
        x @ w  # 24 rows of (5 x 6)
        torch.einsum("...iD,Dht->...hit", x, t)  # ellipsis (2, 3), i 4, D 5, h 2, t 3
        torch.mv(w.T, torch.randn(5, device=device))  # not a counted operation
        torch.randn(7, device=device) @ torch.randn(7, 3, device=device)  # a 1-D left operand: (1 x 7) @ (7 x 3)
    assert flops.by_operation == {"matmul": 2 * 24 * 5 * 6 + 2 * 7 * 3, "einsum": 2 * 6 * 4 * 5 * 2 * 3}


def test_seq2seq_flops_is_the_closed_form_transformer_count(device):
    d, hidden, heads, layers, src, tgt, vocab = 16, 24, 2, 2, 7, 5, 30
    model = Seq2Seq(vocab, dim=d, num_heads=heads, encoder_depth=layers, decoder_depth=layers, mlp_hidden=hidden)
    model = model.to(device)
    mlp = 2 * 2 * d * hidden
    encoder_layer = src * (2 * 4 * d * d + mlp) + 2 * 2 * src * src * d
    self_attention = tgt * 2 * 4 * d * d + 2 * 2 * tgt * tgt * d
    cross_attention = tgt * 2 * 2 * d * d + src * 2 * 2 * d * d + 2 * 2 * tgt * src * d
    decoder_layer = self_attention + cross_attention + tgt * mlp
    assert seq2seq_flops(model, src, tgt) == layers * (encoder_layer + decoder_layer)


def test_seq2seq_flops_counts_every_field_evaluation(device):
    # steps over the whole depth [0, 2]: 4 Lie-Trotter steps evaluate every branch twice per layer
    discrete = Seq2Seq(30, dim=16, num_heads=2, encoder_depth=2, decoder_depth=2).to(device)
    two_steps = Seq2Seq(30, dim=16, num_heads=2, encoder_depth=2, decoder_depth=2, steps=4).to(device)
    assert seq2seq_flops(two_steps) == 2 * seq2seq_flops(discrete)


@pytest.mark.cpu_only("evolving_table5_costs builds its paper-size models on the CPU; the counter runs on devices")
def test_table5_costs_next_to_the_paper():
    costs = evolving_table5_costs()
    # Parameters without embeddings and output projection; the EA models add 18 convolutions (encoder
    # self-, decoder self- and encoder-decoder attention, 6 layers each) of 8 * 8 * 9 + 8 parameters.
    assert costs["Lite"][:2] == (2_483_200, 2_483_200 + 18 * 584) == (2_483_200, 2_493_712)
    assert costs["Base"][:2] == (44_140_544, 44_140_544 + 18 * 584) == (44_140_544, 44_151_056)
    paper = {"Lite": (2.48, 2.49), "Base": (44.14, 44.15)}  # millions, as Table 5 prints them
    assert {name: (round(p0 / 1e6, 2), round(p1 / 1e6, 2)) for name, (p0, p1, _, _) in costs.items()} == paper
    (_, _, lite, lite_ea), (_, _, base, base_ea) = costs["Lite"], costs["Base"]
    assert (lite, base) == (157_824_000, 2_675_589_120)
    assert round(base / 1e9, 2) == 2.68  # the paper's 2.68G, at its printed precision
    # Lite: 0.31% under the paper's 158.31M: HAT's profiler also counts the layer norms and
    # element-wise products (about 0.49M FLOPs here), which we leave out.
    assert round(lite / 1e6, 2) == 157.82 and round(100 * (158.31e6 - lite) / 158.31e6, 2) == 0.31
    # EA: 18 convolutions 8 -> 8 channels, 3x3, on 30 x 30 maps, and the initial maps A^0 of the ODE
    # state (one more qkv projection and Q K^T for each of the 3 evolving branches of the first layers).
    convolutions = 18 * 2 * 8 * 30 * 30 * 8 * 9
    initial_maps = {d: 3 * (2 * 30 * 3 * d * d + 2 * 30 * 30 * d) for d in (160, 512)}
    assert lite_ea == lite + convolutions + initial_maps[160] == 191_174_400
    assert base_ea == base + convolutions + initial_maps[512] == 2_838_574_080
    # The paper prints 163.46M and 2.70G. The discrete network (no initial maps) has 176.49M and 2.69G:
    # its convolutions alone add 11.8% to Lite, against the paper's +3.3% (163.46M / 158.31M).
    assert (round((lite + convolutions) / 1e6, 2), round((base + convolutions) / 1e9, 2)) == (176.49, 2.69)


def test_errors_name_what_is_wrong(device):
    with pytest.raises(TypeError, match="needs an encoder-decoder with 'encode'"):
        seq2seq_flops(nn.Linear(3, 3).to(device))
    with pytest.raises(ValueError, match="lengths must be >= 1"):
        seq2seq_flops(Seq2Seq(30, dim=16, num_heads=2, encoder_depth=1, decoder_depth=1).to(device), 0, 5)
    a = torch.randn(2, 3, device=device)
    with pytest.raises(NotImplementedError, match="einsum of two operands"), FlopCounter():
        torch.einsum("ij,jk,kl->il", a, a.T, a)
