"""Wang et al. (2021), Evolving Attention: the exact claims, recomputed from the library.

Table 5's models are those of ``_evolving_costs.table5_models``, counted as
``_evolving_costs.evolving_table5_costs`` counts them (parameters without embeddings and output
projection; :func:`~neuralode_tf.flops.seq2seq_flops` on a 30 + 30-token pair). :func:`table5` also
splits the EA models' extra FLOPs by source: the convolutions of eq. 4, and the initial logit maps
``A^0`` that the ODE state computes before the first block (``EvolvingAttentionBranch.initial_logits``,
called once per evolving branch of the first encoder and decoder layers), which the discrete network
does not compute. The identities run on the ablation models of the ``ea_vit_digits`` preset, built on
a one-example placeholder of the digits' shape (nothing is read).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from neuralode_tf.flops import FlopCounter, seq2seq_flops
from neuralode_tf.models import Seq2Seq
from neuralode_tf.nn import AttentionBranch, EvolvingAttentionBranch
from neuralode_tf.train import EA_VARIANTS, PRESETS

from ._evolving_costs import non_embedding_parameters, table5_models
from ._evolving_glue_flops import bert_base_flops, bert_large_flops, roberta_large_flops, t5_base_flops  # noqa: F401
from ._evolving_resnet import (  # noqa: F401  (Table 1's counts, named by the ledger's compute keys)
    aa_flops,
    aa_parameters,
    ea_aa_flops,
    ea_aa_parameters,
    ea_extra_flops,
    resnet_flops,
    resnet_parameters,
)
from ._ot_transformer import placeholder

LENGTH = 30  # HAT's pseudo sample: 30 source and 30 target tokens (§4.3)


@dataclass(frozen=True)
class Costs:
    """One Table 5 pair: parameters and FLOPs of the vanilla and EA model, the EA FLOPs by source."""

    parameters: int
    ea_parameters: int
    flops: int
    ea_flops: int
    convolutions: int  # FLOPs of the EA model's convolutions (eq. 4)
    initial_logits: int  # FLOPs of the initial maps A^0 (EvolvingAttentionBranch.initial_logits)
    initial_maps: int  # how many initial maps the forward pass computes
    conv_modules: int  # how many convolutions the EA model has
    conv_parameters: tuple[int, ...]  # the distinct parameter counts of one convolution

    @property
    def other(self) -> int:
        """Extra EA FLOPs that are neither convolution nor initial maps (0 if the split is complete)."""
        return self.ea_flops - self.flops - self.convolutions - self.initial_logits


def _counting_initial_logits(branch: EvolvingAttentionBranch, record: list[int]) -> Callable:
    """``branch.initial_logits``, counting the FLOPs of each call into ``record``."""
    method = branch.initial_logits

    def counted(*args, **kwargs):
        with FlopCounter() as counter:
            out = method(*args, **kwargs)
        record.append(counter.total)
        return out

    return counted


@functools.cache
def table5() -> dict[str, Costs]:
    """The Table 5 pairs (``"Lite"``, ``"Base"``), counted in one forward pass each."""
    costs = {}
    for name, (vanilla, evolving) in table5_models().items():
        branches = [m for m in evolving.modules() if isinstance(m, EvolvingAttentionBranch)]
        initial: list[int] = []
        for branch in branches:
            branch.initial_logits = _counting_initial_logits(branch, initial)
        try:
            with FlopCounter() as outer:  # sees what seq2seq_flops' own counter sees
                ea_flops = seq2seq_flops(evolving, LENGTH, LENGTH)
        finally:
            for branch in branches:
                del branch.initial_logits
        costs[name] = Costs(
            parameters=non_embedding_parameters(vanilla),
            ea_parameters=non_embedding_parameters(evolving),
            flops=seq2seq_flops(vanilla, LENGTH, LENGTH),
            ea_flops=ea_flops,
            convolutions=outer.by_operation["convolution"],
            initial_logits=sum(initial),
            initial_maps=len(initial),
            conv_modules=len(branches),
            conv_parameters=tuple(sorted({sum(p.numel() for p in b.conv.parameters()) for b in branches})),
        )
    return costs


def _mega(n: int) -> str:
    return f"{n / 1e6:.2f}M"


def _giga(n: int) -> str:
    return f"{n / 1e9:.2f}G"


_PRINTED = {"Lite": _mega, "Base": _giga}  # Table 5's units: Lite in M, Base in G, two decimals


def lite_parameters() -> str:
    return _mega(table5()["Lite"].parameters)


def lite_ea_parameters() -> str:
    return _mega(table5()["Lite"].ea_parameters)


def base_parameters() -> str:
    return _mega(table5()["Base"].parameters)


def base_ea_parameters() -> str:
    return _mega(table5()["Base"].ea_parameters)


def lite_flops() -> str:
    return _mega(table5()["Lite"].flops)


def lite_ea_flops() -> str:
    return _mega(table5()["Lite"].ea_flops)


def base_flops() -> str:
    return _giga(table5()["Base"].flops)


def base_ea_flops() -> str:
    return _giga(table5()["Base"].ea_flops)


def _without_initial_logits(name: str) -> str:
    costs = table5()[name]
    return _PRINTED[name](costs.ea_flops - costs.initial_logits)


def lite_ea_flops_without_initial_logits() -> str:
    return _without_initial_logits("Lite")


def base_ea_flops_without_initial_logits() -> str:
    return _without_initial_logits("Base")


def _extra_flops(name: str) -> str:
    """The EA model's extra FLOPs and their sources, at the paper's precision."""
    costs, printed = table5()[name], _PRINTED[name]
    extra = costs.ea_flops - costs.flops
    parts = [
        f"{printed(costs.convolutions)} convolutions",
        f"{printed(costs.initial_logits)} initial logits ({costs.initial_maps} maps; {costs.initial_logits / extra:.0%})",
    ]
    if costs.other:
        parts.append(f"{printed(costs.other)} other")
    return f"+{printed(extra)} = " + " + ".join(parts)


def lite_extra_flops() -> str:
    return _extra_flops("Lite")


def base_extra_flops() -> str:
    return _extra_flops("Base")


def lite_relative_extra_flops() -> str:
    """§5.3: EA-Transformer-Lite's FLOPs over Transformer-Lite's, with and without the initial maps."""
    costs = table5()["Lite"]
    with_maps = 100 * (costs.ea_flops / costs.flops - 1)
    without = 100 * ((costs.ea_flops - costs.initial_logits) / costs.flops - 1)
    return f"{with_maps:.0f}% ({without:.0f}% without the initial logits)"


def extra_parameters() -> str:
    """The EA models' extra parameters, as ``convolutions × parameters each``, if Lite and Base agree."""
    texts = set()
    for costs in table5().values():
        extra = costs.ea_parameters - costs.parameters
        each = costs.conv_parameters[0]
        if len(costs.conv_parameters) == 1 and extra == costs.conv_modules * each:
            texts.add(f"{costs.conv_modules} × {each} = {extra:,}")
        else:
            texts.add(f"{extra:,} (convolutions: {costs.conv_modules} of {list(costs.conv_parameters)})")
    return texts.pop() if len(texts) == 1 else " / ".join(sorted(texts))


def _bert_extra_parameters(dim: int, heads: int, layers: int) -> str:
    """What eq. 4's convolutions (3x3, heads as channels, one per layer) add to a BERT encoder."""
    count = lambda module: sum(p.numel() for p in module.parameters())
    per_layer = count(EvolvingAttentionBranch(dim, heads)) - count(AttentionBranch(dim, heads))
    return f"+{layers * per_layer / 1e6:.1f}M ({layers} × {per_layer:,} = {layers * per_layer:,})"


def bert_base_extra_parameters() -> str:
    return _bert_extra_parameters(768, 12, 12)


def bert_large_extra_parameters() -> str:
    return _bert_extra_parameters(1024, 16, 24)


def _identical(gap: float) -> str:
    return "identical" if gap == 0.0 else f"max |Δ| = {gap:.2g}"


def _digits_model(variant: str) -> nn.Module:
    """One ablation model of ``ea_vit_digits`` (d = 48, 4 heads, 4 blocks), float64, in eval mode."""
    shape = placeholder("digits", "image", torch.zeros(1, 1, 8, 8), 10)
    return PRESETS["ea_vit_digits"].build_model(shape, EA_VARIANTS["ea_vit_digits"][variant]).double().eval()


def _images() -> torch.Tensor:
    return torch.rand(16, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


def no_convolution_ignores_the_convolution() -> str:
    """Table 2's "w/o Convolution" (β = 0): the logits do not change when every convolution's weights do."""
    torch.manual_seed(0)
    model, images = _digits_model("no_convolution"), _images()
    with torch.no_grad():
        before = model(images)
        for branch in (m for m in model.modules() if isinstance(m, EvolvingAttentionBranch)):
            for p in branch.conv.parameters():
                p.normal_(0.0, 10.0)
        return _identical((model(images) - before).abs().max().item())


def no_skip_ignores_the_previous_maps() -> str:
    """Table 2's "w/o Skip Connection" (α = 0): the logits do not change when every block is given random
    maps instead of the previous block's (and of the initial map ``A^0``)."""
    torch.manual_seed(0)
    model, images = _digits_model("no_skip"), _images()
    branches = [m for m in model.modules() if isinstance(m, EvolvingAttentionBranch)]
    noise = torch.Generator().manual_seed(2)
    calls = []

    def with_random_maps(forward: Callable) -> Callable:
        def forward_on_noise(x, prev_logits, *args, **kwargs):
            calls.append(1)
            random = 10 * torch.randn(prev_logits.shape, generator=noise, dtype=prev_logits.dtype)
            return forward(x, random, *args, **kwargs)

        return forward_on_noise

    with torch.no_grad():
        before = model(images)
        for branch in branches:
            branch.forward = with_random_maps(branch.forward)
        after = model(images)
    if len(calls) != len(branches):
        raise RuntimeError(f"{len(calls)} blocks read a map, expected {len(branches)}")
    return _identical((after - before).abs().max().item())


def decoder_receptive_field() -> str:
    """Fig. 3(b): how many entries of the previous map one logit of decoder self-attention reads (3x3)."""
    torch.manual_seed(0)
    branch = EvolvingAttentionBranch(8, 2, alpha=1.0, beta=1.0, causal=True).double()  # logits = ReLU(Conv(A))
    with torch.no_grad():
        branch.conv.bias.fill_(1e3)  # keeps the ReLU on its linear side
    x = torch.randn(1, 10, 8, dtype=torch.float64)
    previous = torch.randn(1, 2, 10, 10, dtype=torch.float64, requires_grad=True)
    _, logits = branch(x, previous)
    logits[0, 0, 6, 4].backward()  # query 6, key 4: away from the map's edges
    return str(int(previous.grad.abs().sum((0, 1)).ne(0).sum()))


def decoder_never_sees_later_tokens() -> str:
    """§3.5, Fig. 3: with its shifted convolutions, an EA decoder's outputs up to a position do not change
    when later target tokens do."""
    torch.manual_seed(0)
    model = Seq2Seq(30, dim=16, num_heads=2, encoder_depth=2, decoder_depth=2, field="evolving").double().eval()
    tokens = torch.Generator().manual_seed(3)
    src, tgt = torch.randint(3, 30, (2, 6), generator=tokens), torch.randint(3, 30, (2, 8), generator=tokens)
    changed = tgt.clone()
    changed[:, 5:] = (tgt[:, 5:] - 3 + 1) % 27 + 3  # every later token replaced
    with torch.no_grad():
        memory, src_pad = model.encode(src)
        logits, other = model.decode(tgt, memory, src_pad), model.decode(changed, memory, src_pad)
    if (logits[:, 5:] - other[:, 5:]).abs().max() == 0:
        raise RuntimeError("changing the later tokens changed nothing: the check would be vacuous")
    return _identical((logits[:, :5] - other[:, :5]).abs().max().item())
