"""depth_trajectory: the states of a model's one solve at any depth, at no more field evaluations than its forward."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from neuralode_tf.dynamics.trajectories import depth_trajectory, find_depth_module
from neuralode_tf.models import CausalLM, Seq2Seq, TextClassifier
from neuralode_tf.models.frontends.text import PAD
from neuralode_tf.numerics import InvalidTimesError
from tests._huggingface import LAYERS, inputs, max_diff, model


@contextmanager
def _counting_calls(module: nn.Module) -> Iterator[Counter[str]]:
    """Counts the forward calls of every submodule of ``module`` (the field's parts, branches, norms, linears)."""
    calls: Counter[str] = Counter()
    handles = [
        sub.register_forward_hook(lambda *_, name=name: calls.update([name])) for name, sub in module.named_modules()
    ]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def _catching_output(module: nn.Module) -> Iterator[list[torch.Tensor]]:
    outputs: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _, __, output: outputs.append(output))
    try:
        yield outputs
    finally:
        handle.remove()


@pytest.mark.cpu_only("float64 comparison with Hugging Face's own discrete forward, on tiny random-weight models")
@pytest.mark.parametrize("padding", ["none", "right"])
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_states_at_integer_depths_are_hugging_face_hidden_states(family, padding):
    """``x(k)`` for ``k = 0..L`` is HF's ``hidden_states[k]`` (float64, <= 1e-10; measured <= 5e-16). GPT-2 and LLaMA
    apply the final norm to the last entry, so ``N(x(L))`` is compared there; BERT (post-norm) has none. With
    padding only the real tokens are compared."""
    from neuralode_tf.models import from_transformers

    hf_model = model(family)
    converted = from_transformers(hf_model)
    ids, mask = inputs(family, padding, torch.device("cpu"))
    with torch.no_grad():
        trajectory = depth_trajectory(converted, list(range(LAYERS + 1)), ids, mask)
        hidden = hf_model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        norm = converted.family.final_norm(converted.base)
        ours = [*trajectory.states[:-1], trajectory.states[-1] if norm is None else norm(trajectory.states[-1])]
    assert (norm is None) == (family == "bert")
    assert len(hidden) == LAYERS + 1 and trajectory.states.shape == (LAYERS + 1, *ids.shape, hidden[0].shape[-1])
    real = None if mask is None else mask.bool()
    errors = [max_diff(a, b, real) for a, b in zip(ours, hidden, strict=True)]
    assert max(errors) <= 1e-10, errors
    assert trajectory.stats is not None and trajectory.stats.nfe_dense == 0
    assert trajectory.t.tolist() == list(range(LAYERS + 1))


def _padded_tokens(lengths: list[int], width: int, vocab: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(1, vocab, (len(lengths), width), generator=generator)
    padding = torch.arange(width) >= torch.tensor(lengths)[:, None]
    return tokens.masked_fill(padding, PAD).to(device)


def test_causal_lm_trajectory_costs_the_forward_solve_and_ends_at_the_encoder_output(device):
    """Reading ``x(0), ..., x(3)`` calls every module of the field exactly as often as the forward does (and nothing
    more: ``nfe_dense == 0``); ``x(0)`` is the embedding and ``x(3)`` the encoder's output (max-abs 0 measured)."""
    lm = CausalLM(50, 16, 3, 2, block_size=8).eval().to(device)
    tokens = torch.randint(0, 50, (2, 8), device=device)
    with torch.no_grad(), _counting_calls(lm.encoder.field) as calls, _catching_output(lm.encoder) as outputs:
        lm(tokens)
        forward_calls, forward_nfe = dict(calls), lm.encoder.stats.nfe
        calls.clear()
        trajectory = depth_trajectory(lm, torch.arange(4.0), tokens)
        embedding = lm.embeddings(tokens)
    assert forward_calls and dict(calls) == forward_calls
    assert trajectory.stats.nfe == forward_nfe == 6 and trajectory.stats.nfe_dense == 0
    assert max_diff(trajectory.states[-1], outputs[0]) <= 1e-6
    assert max_diff(trajectory.states[0], embedding) == 0.0
    assert len(outputs) == 1  # the trajectory's forward stopped before the encoder ran


def test_a_depth_inside_a_step_costs_at_most_two_slopes(device):
    """Between block boundaries the state is the dense output: two slope evaluations for the step ``[1, 2]``."""
    lm = CausalLM(50, 16, 3, 2, block_size=8).eval().to(device)
    tokens = torch.randint(0, 50, (2, 8), device=device)
    with torch.no_grad():
        trajectory = depth_trajectory(lm, [1.25, 1.5, 2.0], tokens)
        at_blocks = depth_trajectory(lm, [1.0, 2.0], tokens).states
    assert trajectory.stats.nfe_dense == 2 and trajectory.stats.nfe == 6
    assert max_diff(trajectory.states[-1], at_blocks[-1]) == 0.0
    assert max_diff(trajectory.states[1], at_blocks[0]) > 1e-3  # not a node: somewhere between blocks 1 and 2


def test_text_classifier_trajectory_costs_the_forward_solve(device):
    classifier = TextClassifier(30, 3, dim=16, num_heads=2, depth=3).eval().to(device)
    tokens = _padded_tokens([6, 2], 6, 30, device)
    with (
        torch.no_grad(),
        _counting_calls(classifier.encoder.field) as calls,
        _catching_output(classifier.encoder) as outputs,
    ):
        classifier(tokens)
        forward_calls = dict(calls)
        calls.clear()
        trajectory = depth_trajectory(classifier, [0.0, 3.0], tokens)
    assert forward_calls and dict(calls) == forward_calls
    assert max_diff(trajectory.states[-1], outputs[0]) <= 1e-6
    assert torch.equal(trajectory.conditioning["key_padding_mask"], tokens.eq(PAD))


def test_padding_reaches_the_solve_and_its_dense_output(device):
    """A right-padded batch gives its real tokens the states each sequence has alone, unpadded, at block boundaries
    and between them (the dense output's slopes see the mask too); float32, <= 1e-5 (measured 2.4e-7). The encoder is
    bidirectional, so without the mask the real tokens' states differ."""
    net = TextClassifier(40, 3, dim=16, num_heads=2, depth=2).eval().to(device)
    lengths = [7, 3, 5]
    tokens = _padded_tokens(lengths, 7, 40, device)
    times = [0.0, 0.5, 1.0, 1.75, 2.0]
    with torch.no_grad():
        batch = depth_trajectory(net, times, tokens, tokens.eq(PAD)).states
        alone = [depth_trajectory(net, times, tokens[row : row + 1, :n]).states for row, n in enumerate(lengths)]
        unmasked = depth_trajectory(net, times, tokens, torch.zeros_like(tokens, dtype=torch.bool)).states
    errors = [max_diff(batch[:, row : row + 1, :n], states) for row, (n, states) in enumerate(zip(lengths, alone))]
    assert max(errors) <= 1e-5, errors
    assert max_diff(unmasked[-1, 1, :3], alone[1][-1, 0]) > 1e-2


def test_a_causal_lm_passes_its_padding_mask_to_the_solve(device):
    lm = CausalLM(40, 16, 2, 2, block_size=8).eval().to(device)
    tokens = _padded_tokens([7, 3], 7, 40, device)
    with torch.no_grad():
        trajectory = depth_trajectory(lm, [2.0], tokens, key_padding_mask=tokens.eq(PAD))
        outputs = lm.encoder(lm.embeddings(tokens), key_padding_mask=tokens.eq(PAD))
    assert torch.equal(trajectory.conditioning["key_padding_mask"], tokens.eq(PAD))
    assert max_diff(trajectory.states[0], outputs) <= 1e-6


def test_the_decoder_of_a_seq2seq_is_read_by_name(device):
    """Two depth modules: the default is refused naming both; ``depth_module="decoder"`` reads the decoder, with the
    memory the model passes it, and ends at the decoder's output."""
    net = Seq2Seq(30, dim=16, num_heads=2, encoder_depth=2, decoder_depth=3).eval().to(device)
    src, tgt = _padded_tokens([5, 3], 5, 30, device), _padded_tokens([4, 4], 4, 30, device)
    with pytest.raises(ValueError, match="several ContinuousDepth.*'encoder', 'decoder'"):
        depth_trajectory(net, [0.0], src, tgt)
    with torch.no_grad(), _catching_output(net.decoder) as outputs:
        net(src, tgt)
        trajectory = depth_trajectory(net, [0.0, 1.5, 3.0], src, tgt, depth_module="decoder")
    assert set(trajectory.conditioning) >= {"memory", "memory_key_padding_mask"}
    assert max_diff(trajectory.states[-1], outputs[0]) <= 1e-6
    assert find_depth_module(net, net.encoder) is net.encoder


def test_wrong_depth_times_and_modules_are_refused_and_the_hook_is_removed(device):
    lm = CausalLM(50, 16, 3, 2, block_size=8).to(device)
    tokens = torch.randint(0, 50, (1, 4), device=device)
    refused = {
        "outside the span": ([-0.5, 1.0], r"within the depth module's \[t0, t1\] = \[0, 3\]; got \[-0.5\]"),
        "past the end": (torch.tensor([3.5]), r"got \[3.5\]"),
        "not finite": ([float("nan")], "finite"),
        "2-D": (torch.zeros(2, 2), r"1-D .* shape \(2, 2\)"),
        "empty": ([], "empty"),
    }
    for times, message in refused.values():
        with pytest.raises(InvalidTimesError, match=message):
            depth_trajectory(lm, times, tokens)
    with pytest.raises(ValueError, match="holds no ContinuousDepth module"):
        depth_trajectory(nn.Linear(2, 2).to(device), [0.0], torch.zeros(1, 2, device=device))
    with pytest.raises(ValueError, match="no ContinuousDepth named 'blocks'.*'encoder'"):
        depth_trajectory(lm, [0.0], tokens, depth_module="blocks")
    with pytest.raises(ValueError, match="tokens"):  # the model's own error, raised before its encoder
        depth_trajectory(lm, [0.0], tokens + 100)
    assert not lm.encoder._forward_pre_hooks
    assert depth_trajectory(lm, [3.0], tokens).states.shape == (1, 1, 4, 16)
