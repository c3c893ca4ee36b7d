"""The language model a user trains (issue 37): the training benchmark's three models are one model
(``benchmarks/lm_training.py``), the benchmarks run, the speed paths of generation keep their meaning, and the
benchmarks page quotes the recorded runs."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks import generation, lm_training
from neuralode_tf import ContinuousDepth
from neuralode_tf.fields import SplitField
from neuralode_tf.models import _generation, from_transformers
from neuralode_tf.models.converters.huggingface import _model as converted_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TINY = lm_training.QUICK["tiny"]


@pytest.fixture
def hf_extra() -> None:
    """The tests that build Hugging Face's GPT-2 (the ``hf`` extra) skip without it."""
    pytest.importorskip("transformers")


def test_the_benchmarks_three_gpts_are_one_model(device, hf_extra):
    """``CausalLM``'s default reading, the benchmark's plain GPT and ``GPT2LMHeadModel``, with the weights the
    benchmark copies across: the same loss and the same gradients to float32 rounding, so the timing compares
    three implementations of one model."""
    models = lm_training._models(TINY, device)
    data = lm_training._data(TINY, device)
    assert max(lm_training._same_loss(models, *data).values()) <= 1e-6
    for name in ("gpt", "causal_lm"):
        lm_training._loss(name, models[name], *data).backward()
    for ours, plain in zip(models["causal_lm"].parameters(), models["gpt"].parameters(), strict=True):
        assert ours.shape == plain.shape
        torch.testing.assert_close(ours.grad, plain.grad, rtol=1e-4, atol=1e-6)
    hf = models["hf_gpt2"].config  # what the benchmark's docstring and the benchmarks page say of it
    assert hf._attn_implementation == "sdpa" and hf.activation_function == "gelu"
    dropouts = [m.p for model in models.values() for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert all(p == 0.0 for p in dropouts)  # no dropout in any of them
    assert models["gpt"].head.weight is models["gpt"].embed.weight  # the tied head


@pytest.mark.cpu_only("times training steps and measures process memory on the CPU")
def test_the_training_benchmark_writes_its_rows(tmp_path, monkeypatch, hf_extra):
    """``--quick --no-compile``: every competitor timed and measured, ratios against the plain GPT, the targets
    judged; compilation skipped with the reason. (Memory in this process: the fresh process is the next test's.)"""
    monkeypatch.setattr(
        lm_training,
        "_peak",
        lambda size, model, compiled, device: lm_training._memory_case(
            dict(size=size, model=model, compiled=compiled, device=device.type)
        ),
    )
    out = tmp_path / "lm.json"
    monkeypatch.setattr("sys.argv", ["lm_training", "--quick", "--no-compile", "--out", str(out)])
    lm_training.main()
    results = json.loads(out.read_text())
    (row,) = results["rows"]
    assert row["compile_skipped"] == "not asked for (--no-compile)" and not row["compiled"]
    others = {f"{name} eager" for name in ("causal_lm", "causal_lm_ot", "hf_gpt2")}
    assert set(row["ratio"]) == set(row["fastest_ratio"]) == set(row["memory_ratio"]) == others
    assert all(len(times) == 3 for times in row["rounds"].values())
    assert max(row["same_loss"].values()) <= 1e-6
    assert set(results["met"]) == {"tiny eager time", "tiny eager memory"}
    assert results["targets"] == {"time": 1.03, "memory": 1.05}


@pytest.mark.cpu_only("reads the resident memory of a fresh CPU process")
def test_the_memory_case_runs_in_a_fresh_process(hf_extra):
    bytes_ = lm_training._peak("tiny", "causal_lm", False, torch.device("cpu"))
    assert isinstance(bytes_, int) and bytes_ >= 0


@pytest.mark.cpu_only("times generation on the CPU")
def test_the_generation_benchmark_against_hugging_face_writes_its_rows(monkeypatch, hf_extra):
    monkeypatch.setattr(generation, "HF_SIZES", {"tiny": dict(n_embd=32, n_layer=2, n_head=2)})
    row = generation._hf_row("tiny", new=4, repeats=1)
    assert row["same_tokens"] and set(row["ms_per_token"]) == {"hf", "converted"} and row["ratio"] > 0


def test_greedy_sampling_takes_the_first_most_likely_token_and_draws_nothing(device):
    """``top_k=1`` is Hugging Face's greedy search (argmax, the first of equals) at any temperature, and leaves
    the generator as it was; ``top_k=2`` still samples from it."""
    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0], [5.0, -1.0, 2.0, 5.0]], device=device)
    generator = torch.Generator(device).manual_seed(0)
    state = generator.get_state()
    for temperature in (0.1, 1.0, 7.0):
        picked = _generation.sample_next(logits, temperature, 1, generator)
        assert picked.tolist() == [[1], [0]]
    assert torch.equal(generator.get_state(), state)
    _generation.sample_next(logits, 1.0, 2, generator)
    assert not torch.equal(generator.get_state(), state)


def test_converted_generation_checks_the_cache_once(device, monkeypatch, hf_extra):
    """A converted decoder's ``generate`` checks that its solves can be cached once, not at every token (the walk
    over its modules cost about a millisecond a token), and still refuses what the cache cannot serve."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2, attn_implementation="sdpa")
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(config).to(device).eval()
    converted = from_transformers(hf)
    calls = []
    check = converted_model.check_cacheable
    monkeypatch.setattr(converted_model, "check_cacheable", lambda model: (calls.append(1), check(model)))
    prompt = torch.randint(0, 50, (2, 3), generator=torch.Generator().manual_seed(0)).to(device)
    tokens = converted.generate(prompt, 6, top_k=1)
    assert len(calls) == 1
    with torch.no_grad():
        expected = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, do_sample=False, pad_token_id=0
        )
    assert torch.equal(tokens, expected[:, : tokens.shape[1]])
    converted.encoder.set_solve_options(method="dopri5")
    with pytest.raises(ValueError, match="adaptive"):
        converted.generate(prompt, 2, top_k=1)


class _Recorder(nn.Module):
    """A branch whose ``bind`` is an instance attribute (not a method of its class)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[object] = []
        self.bind = lambda *, key_padding_mask=None: self.seen.append(key_padding_mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def test_a_bind_set_on_the_instance_is_still_called(device):
    """``bind_calls`` looks ``bind`` up on the class and in the instance's own attributes (not through
    ``nn.Module.__getattr__``), so a ``bind`` assigned to a module is called as before."""
    recorder = _Recorder()
    encoder = ContinuousDepth(SplitField(recorder, nn.Linear(4, 4)), method="lie_trotter").to(device)
    mask = torch.zeros(2, 3, dtype=torch.bool, device=device)
    encoder(torch.randn(2, 3, 4, device=device), key_padding_mask=mask)
    encoder(torch.randn(2, 3, 4, device=device))
    assert recorder.seen[0] is mask and recorder.seen[1] is None


def _recorded(name: str) -> dict:
    path = RESULTS / f"{name}_cpu.json"
    if not path.is_file():
        pytest.skip(f"no recorded {name} benchmark beside this suite")
    return json.loads(path.read_text())


@pytest.mark.cpu_only("reads recorded CPU benchmarks")
def test_the_benchmarks_page_quotes_the_recorded_training_and_generation_ratios():
    """The page's training table is the recorded run's (each row: CausalLM's time and memory over the plain GPT's,
    Hugging Face's, and the transport cost's), its verdicts follow from the numbers, and its generation ratios are
    the recorded ones."""
    page = " ".join((ROOT / "docs" / "guide" / "benchmarks.md").read_text().split())
    results = _recorded("lm_training")
    for row in results["rows"]:
        for mode in ("eager", "compiled") if row["compiled"] else ("eager",):
            cells = [row["size"], mode]
            for name in ("causal_lm", "hf_gpt2", "causal_lm_ot"):
                key = f"{name} {mode}"
                cells += [f"{row['ratio'][key]:.3f}x", f"{row['memory_ratio'][key]:.3f}x"]
            assert "| " + " | ".join(cells) + " |" in page, cells
            ours, verdict = f"causal_lm {mode}", f"{row['size']} {mode}"
            assert results["met"][f"{verdict} time"] == (row["ratio"][ours] <= 1.03)
            assert results["met"][f"{verdict} memory"] == (row["memory_ratio"][ours] <= 1.05)
        assert max(row["same_loss"].values()) <= 1e-5
    hf = _recorded("generation_hf")
    for row in hf["rows"]:
        assert row["same_tokens"]
        quoted = f"{row['name']}: {row['ms_per_token']['converted']:.2f} against {row['ms_per_token']['hf']:.2f} ms"
        assert quoted in page and f"{row['ratio']:.3f}x" in page
        assert row["met"] == (row["ratio"] <= 1.10)
        assert math.isclose(
            row["ratio"], statistics.median(c / h for c, h in zip(row["rounds"]["converted"], row["rounds"]["hf"]))
        )


@pytest.mark.cpu_only("reads no device: arithmetic on benchmark results")
def test_the_side_by_side_rows_of_the_language_models():
    """Time and memory over the plain GPT's are the recorded paired ratios; over Hugging Face's, their quotient."""
    from benchmarks.side_by_side import language_model_rows

    keys = [f"{name} {mode}" for name in ("gpt", "causal_lm", "hf_gpt2") for mode in ("eager", "compiled")]
    training = {
        "rows": [
            {
                "config": {"dim": 128, "depth": 4},
                "compiled": True,
                "seconds": dict.fromkeys(keys, 0.5),
                "peak_bytes": dict.fromkeys(keys, 2**20),
                "ratio": {"causal_lm eager": 1.02, "causal_lm compiled": 1.01, "hf_gpt2 eager": 1.05},
                "memory_ratio": {"causal_lm eager": 0.99},
            }
        ]
    }
    generation_hf = {"rows": [{"name": "gpt2 d256", "ms_per_token": {"converted": 5.0, "hf": 5.5}, "ratio": 0.9}]}
    table = {(row.ours, row.alternative, row.unit): row.ratio for row in language_model_rows(training, generation_hf)}
    step = "`CausalLM` training step, 4 layers, d = 128"
    assert table[step, "plain GPT (nanoGPT block)", "ms"] == 1.02
    assert table[step, "plain GPT (nanoGPT block)", "MiB"] == 0.99
    assert table[step, "`GPT2LMHeadModel`", "ms"] == pytest.approx(1.02 / 1.05)
    assert (
        table["`torch.compile(CausalLM)` training step, 4 layers, d = 128", "`torch.compile` of the plain GPT", "ms"]
        == 1.01
    )
    assert (
        table[
            "converted GPT-2 d256 cached greedy `generate`, per token", "Hugging Face `generate` with its cache", "ms"
        ]
        == 0.9
    )
    assert len(table) == 5 and language_model_rows(None, None) == []


def test_greedy_sampling_refuses_nan_logits(device):
    """A NaN logit leaves no most likely token: greedy sampling raises, as a draw does, rather than pick one."""
    logits = torch.tensor([[0.0, float("nan"), 2.0]], device=device)
    with pytest.raises(ValueError, match="NaN"):
        _generation.sample_next(logits, 1.0, 1, None)
