"""Training a language model: :class:`~neuralode_tf.models.CausalLM` against the GPT a user would otherwise train.

**Models**, at each size of :data:`SIZES` (small: 4 layers, d = 128, 4 heads, batch 8; medium: 6 layers, d = 384,
6 heads, batch 4; both 256 tokens, a 65-character vocabulary, float32):

* ``gpt``: a plain GPT written below (:class:`PlainGPT`, the nanoGPT block): learned positions, pre-LN blocks
  ``x + attn(LN(x))`` (causal ``scaled_dot_product_attention``) and ``x + MLP(LN(x))`` (4d, exact GELU), a final
  LN and a head tied to the embedding, biases everywhere, no dropout. The baseline of every ratio.
* ``causal_lm``: ``CausalLM`` with the same configuration and its default reading (``field="split"``, one
  Lie-Trotter Euler step per layer: the discrete GPT). The benchmark copies its weights into the other two and
  checks, once per size, that the three losses agree to float32 rounding (``same_loss``); otherwise the
  timing would compare different models.
* ``causal_lm_ot``: the same ``CausalLM`` with ``transport_cost=1.0``; its step adds the regularisation to the
  loss. The splitting evaluates the whole field once more per step for the energy (``KineticEnergy``), so it
  costs about one more forward of the stack: its ratio is the transport cost's overhead, stated, not a target.
* ``hf_gpt2``: Hugging Face's ``GPT2LMHeadModel`` of the same sizes (``attn_implementation="sdpa"``, exact GELU,
  dropout 0), with the same weights.

**Step**: forward, cross-entropy loss (plus the transport cost), backward, ``AdamW.step()``, ``zero_grad()``.
Each model runs eager and as ``torch.compile(model)`` (the whole model, default mode; the loss and optimiser
stay eager), a separate copy with its own optimiser. The four eager steps of a size, then the four compiled ones,
run in one process: ``--warmup`` untimed steps each (compilation included), then ``--repeats`` (40) rounds of one
step of each in a shuffled order (:func:`benchmarks.harness.rounds`; one mode per round keeps a round short, so
that a slow spell of the machine falls on the whole round). ``ratio`` is the median over rounds of
``time(model) / time(gpt)`` within the round, eager against eager and compiled against compiled (the harness's
``paired_ratios`` statistic).

**Peak memory**: on the CPU, which keeps no allocator statistics, the growth of the peak resident set size
during one step, in a fresh process per model and mode (:func:`benchmarks.harness.peak_rss_in_subprocess`, glibc
told to return freed memory at once, so the size follows the live tensors: activations, gradients and
temporaries; the parameters and AdamW's moments exist before the step), after two steps; on a GPU
``torch.cuda.max_memory_allocated`` over one step (:func:`benchmarks.harness.cuda_peak_of`).

**Targets** (:data:`TARGETS`): ``causal_lm`` at most 1.03x the plain GPT's step time, eager and compiled, and
at most 1.05x its peak memory.

**Output** (``--out``, default ``benchmarks/results/lm_training_<device>.json``): ``date``, ``command``,
``setup``, ``targets``, ``rows`` (one per size: ``size``, ``config``, ``same_loss`` (max |loss - gpt's loss|),
``compiled`` and ``compile_skipped`` (the reason, or ``null``), ``rounds`` (competitor: seconds per round),
``seconds`` (medians), ``ratio``, ``ratio_quartiles`` (the first and third quartiles of the per-round ratios: the
noise), ``fastest_ratio`` (of the fastest rounds, the least disturbed), ``peak_bytes``, ``memory_ratio``) and
``met`` (target: bool, from ``ratio`` and ``memory_ratio``).

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.lm_training`` (``--quick``: a tiny size, 3 rounds, a smoke run;
``--no-compile``: eager only).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.harness import cuda_peak_of, peak_rss_in_subprocess, provenance, rounds, rss_growth_of
from neuralode_tf import regularization
from neuralode_tf.models import CausalLM

VOCAB, TRANSPORT_COST = 65, 1.0
SIZES = {
    "small": dict(dim=128, depth=4, heads=4, batch=8, tokens=256),
    "medium": dict(dim=384, depth=6, heads=6, batch=4, tokens=256),
}
QUICK = {"tiny": dict(dim=32, depth=2, heads=2, batch=2, tokens=32)}
TARGETS = {"time": 1.03, "memory": 1.05}


class _Attention(nn.Module):
    """``W_o · causal-MHA(LN(x))``: one fused q/k/v projection, heads through SDPA."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        batch, n, dim = x.shape
        q, k, v = (z.view(batch, n, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln(x)).split(dim, -1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, n, dim))


class _MLP(nn.Module):
    """``W_2 · GELU(W_1 · LN(x))``, 4d wide."""

    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(self.ln(x))))


class PlainGPT(nn.Module):
    """The GPT a user writes (nanoGPT's layout): ``x = E[tokens] + P``, per block ``x += attn(x); x += mlp(x)``,
    logits ``LN(x) E^T``. Its parameters come in ``CausalLM``'s order, with its shapes."""

    def __init__(self, vocab: int, dim: int, depth: int, heads: int, block: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(nn.ModuleList([_Attention(dim, heads), _MLP(dim)]) for _ in range(depth))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) + self.positions(torch.arange(tokens.shape[1], device=tokens.device))
        for attention, mlp in self.blocks:  # type: ignore[misc]
            x = x + attention(x)
            x = x + mlp(x)
        return self.head(self.ln(x))


def _models(size: dict, device: torch.device) -> dict[str, nn.Module]:
    """The four models of one size, with ``causal_lm``'s weights (GPT-2's initialisation, seed 0) in all."""
    from transformers import GPT2Config, GPT2LMHeadModel

    dim, depth, heads, block = size["dim"], size["depth"], size["heads"], size["tokens"]
    torch.manual_seed(0)
    ours = CausalLM(VOCAB, dim, depth, heads, block_size=block)
    ot = CausalLM(VOCAB, dim, depth, heads, block_size=block, transport_cost=TRANSPORT_COST)
    plain = PlainGPT(VOCAB, dim, depth, heads, block)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=block, n_embd=dim, n_layer=depth, n_head=heads, activation_function="gelu",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, attn_implementation="sdpa",
    )  # fmt: skip
    hf = GPT2LMHeadModel(config)
    weights = list(ours.state_dict().values())
    with torch.no_grad():
        for target in (ot, plain):
            for source, parameter in zip(weights, target.state_dict().values(), strict=True):
                parameter.copy_(source)
        for (name, parameter), source in zip(hf.state_dict().items(), weights, strict=True):
            conv1d = ".h." in name and parameter.ndim == 2  # GPT-2's Conv1D holds W transposed
            parameter.copy_(source.T if conv1d else source)
    models = {"gpt": plain, "causal_lm": ours, "causal_lm_ot": ot, "hf_gpt2": hf}
    return {name: model.to(device).train() for name, model in models.items()}


def _data(size: dict, device: torch.device) -> tuple[Tensor, Tensor]:  # tokens and the next ones, seed 1
    ids = torch.randint(0, VOCAB, (size["batch"], size["tokens"] + 1), generator=torch.Generator().manual_seed(1))
    return ids[:, :-1].to(device), ids[:, 1:].to(device)


def _loss(name: str, model: nn.Module, tokens: Tensor, targets: Tensor) -> Tensor:
    out = model(tokens)
    logits = out.logits if name == "hf_gpt2" else out
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return loss + regularization(model).to(loss) if name == "causal_lm_ot" else loss


def _step(name: str, model: nn.Module, tokens: Tensor, targets: Tensor) -> Callable[[], None]:
    """One training step of ``model`` (compiled or not), with an AdamW of its own."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        _loss(name, model, tokens, targets).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def _same_loss(models: dict[str, nn.Module], tokens: Tensor, targets: Tensor) -> dict[str, float]:
    """max |loss(model) - loss(gpt)| with the same weights (the OT model: its loss without the cost)."""
    with torch.no_grad():
        losses = {name: _loss(name if name == "hf_gpt2" else "gpt", m, tokens, targets) for name, m in models.items()}
    return {name: float((loss - losses["gpt"]).abs()) for name, loss in losses.items() if name != "gpt"}


def _compile_problem(device: torch.device) -> str | None:  # why torch.compile cannot run here, or None
    try:
        torch.compile(nn.Linear(2, 2).to(device))(torch.ones(1, 2, device=device)).sum().backward()
    except Exception as error:  # noqa: BLE001 - any failure means: skip, with the reason recorded
        return f"torch.compile failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return None


def _memory_case(case: dict) -> int:
    """Peak memory of one step (``--memory-case``): bytes, in this fresh process."""
    device = torch.device(case["device"])
    size = (SIZES | QUICK)[case["size"]]
    model = _models(size, device)[case["model"]]
    step = _step(case["model"], torch.compile(model) if case["compiled"] else model, *_data(size, device))
    step()  # AdamW's moments, compilation; then a second step before the measured one (rss_growth_of's warm-up)
    if device.type == "cuda":
        step()
        return cuda_peak_of(step)
    return rss_growth_of(step, warmup=True)


def _peak(size_name: str, model: str, compiled: bool, device: torch.device) -> int:
    case = dict(size=size_name, model=model, compiled=compiled, device=device.type)
    if device.type == "cuda":
        return _memory_case(case)
    try:
        return peak_rss_in_subprocess("benchmarks.lm_training", case, release_freed=True)
    except subprocess.CalledProcessError as error:  # say why, and try a fresh process once more
        print(f"memory case {case} failed, once more:\n{error.stderr[-2000:]}", file=sys.stderr)
        return peak_rss_in_subprocess("benchmarks.lm_training", case, release_freed=True)


def _row(size_name: str, size: dict, device: torch.device, repeats: int, warmup: int, compile_skipped: str | None):
    models, data = _models(size, device), _data(size, device)
    row: dict = {"size": size_name, "config": size, "same_loss": _same_loss(models, *data)}
    samples: dict[str, list[float]] = {}
    for mode in ["eager"] + ([] if compile_skipped else ["compiled"]):  # rounds of one mode: short, so well paired
        steps = {}
        for name, model in models.items():
            copied = copy.deepcopy(model)  # its own parameters and optimiser per mode
            steps[f"{name} {mode}"] = _step(name, torch.compile(copied) if mode == "compiled" else copied, *data)
        samples.update(rounds(steps, repeats=repeats, warmup=warmup))
    peaks = {key: _peak(size_name, key.split()[0], key.endswith("compiled"), device) for key in samples}
    ratio, spread, fastest, memory = {}, {}, {}, {}
    for key in samples:
        baseline = "gpt " + key.split()[1]
        if key != baseline:
            per_round = [a / b for a, b in zip(samples[key], samples[baseline])]
            ratio[key] = statistics.median(per_round)
            spread[key] = [statistics.quantiles(per_round, n=4)[i] for i in (0, 2)] if repeats > 1 else per_round * 2
            fastest[key] = min(samples[key]) / min(samples[baseline])
            memory[key] = peaks[key] / peaks[baseline] if peaks[baseline] > 0 else None  # (a tiny step: noise)
    row.update(compiled=not compile_skipped, compile_skipped=compile_skipped, rounds=samples)
    row.update(seconds={key: statistics.median(values) for key, values in samples.items()}, ratio=ratio)
    row.update(ratio_quartiles=spread, fastest_ratio=fastest, peak_bytes=peaks, memory_ratio=memory)
    return row


def _met(rows: list[dict]) -> dict[str, bool]:
    met = {}
    for row in rows:
        for mode in ("eager", "compiled") if row["compiled"] else ("eager",):
            met[f"{row['size']} {mode} time"] = row["ratio"][f"causal_lm {mode}"] <= TARGETS["time"]
            memory = row["memory_ratio"][f"causal_lm {mode}"]
            met[f"{row['size']} {mode} memory"] = memory is not None and memory <= TARGETS["memory"]
    return met



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one tiny size, 3 rounds: a smoke run")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--repeats", type=int, default=40, help="timed rounds per size and mode")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per competitor (compilation included)")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/lm_training_<device>.json)")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:
        print(_memory_case(json.loads(args.memory_case)))
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or Path(__file__).parent / "results" / f"lm_training_{device.type}.json"
    sizes, repeats = (QUICK, 3) if args.quick else (SIZES, args.repeats)
    skipped = "not asked for (--no-compile)" if args.no_compile else _compile_problem(device)
    rows = []
    for name, size in sizes.items():
        row = _row(name, size, device, repeats, args.warmup, skipped)
        rows.append(row)
        print(f"{name} {size}: same loss to {max(row['same_loss'].values()):.1e}")
        for key, ratio in row["ratio"].items():
            low, high = row["ratio_quartiles"][key]
            memory = "n/a" if row["memory_ratio"][key] is None else f"{row['memory_ratio'][key]:.3f}x"
            print(f"  {key:<22} time {ratio:6.3f}x (quartiles {low:.3f}-{high:.3f})  memory {memory}")
    import transformers

    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    setup = dict(vocab_size=VOCAB, transport_cost=TRANSPORT_COST, repeats=repeats, warmup=args.warmup)
    setup.update(threads=torch.get_num_threads(), device=device_name, torch=torch.__version__)
    setup.update(transformers=transformers.__version__)
    results = {**provenance("benchmarks.lm_training"), "setup": setup}
    results.update(targets=TARGETS, rows=rows, met=_met(rows))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"met: {results['met']}\nwrote {out}")


if __name__ == "__main__":
    main()
