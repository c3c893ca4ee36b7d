"""Cached against uncached generation with :class:`~neuralode_tf.models.CausalLM`: the KV cache's speed-up.

**Model.** d = 128, 4 layers of 4 heads, learned positions, block 512 (so that no window slides), the split
reading solved with ``rk4`` (2 steps per layer: 8 steps on ``[0, 4]``, 32 field evaluations per forward) or
``euler`` (one step per layer: the parallel blocks of Zhong et al.), weights as initialised (seed 0).

**Competitors.** For each method and batch (1 and 8), ``generate`` of :data:`NEW_TOKENS` tokens after a prompt of
:data:`PROMPT` tokens, greedily (``top_k=1``): ``cached`` (``cache=True``: each step solves the new token alone,
reading the earlier tokens' keys and values per step, stage and layer) and ``uncached`` (``cache=False``: each
step solves the whole context). Both run in one process: ``--repeats`` rounds of one
call of each in a shuffled order (:func:`benchmarks.harness.rounds`), after a warm-up generation of
:data:`WARMUP_TOKENS` tokens each. The two must generate the same tokens
(``same_tokens``; the cached logits equal the recomputed ones up to rounding, ``tests/test_causal_lm.py``).

**Output** (``--out``, default ``benchmarks/results/generation_<device>.json``): ``date``, ``command``, ``setup``
and ``rows``, one per method and batch: ``method``, ``batch``, ``repeats``, ``rounds`` (competitor: seconds per
round), ``seconds`` (competitor: median), ``tokens_per_second`` (competitor: new tokens of the whole batch per
second, from the median), ``speedup`` (``time(uncached) / time(cached)`` of the medians, above 1: the cache is
faster), ``speedup_paired`` (the median over rounds of the ratio within a round, which cancels slow spells of a
shared machine, :func:`benchmarks.harness.paired_ratios`) and ``same_tokens``.

**Against Hugging Face** (``--huggingface``, on the CPU, its own output ``benchmarks/results/generation_hf_cpu.json``):
a ``GPT2LMHeadModel`` with random weights (seed 0, GPT-2's vocabulary of 50257, SDPA attention) at the sizes of
:data:`HF_SIZES` (d = 256 with 4 blocks, the conversion benchmark's; GPT-2 124M's d = 768 with 12 blocks), and its
conversion ``from_transformers(model)`` (one Lie-Trotter step per block, the same weights): ``converted.generate(
prompt, n, top_k=1)`` (KV-cached) against ``model.generate(prompt, max_new_tokens=n, do_sample=False,
use_cache=True)`` (greedy, Hugging Face's cache; no end-of-sequence token, so both make ``n`` tokens), batch 1,
a :data:`PROMPT`-token prompt, :data:`HF_NEW_TOKENS` new tokens (``--quick``: 16), ``--repeats`` rounds (default
10) after one warm-up generation each. Rows: ``name``, ``config``, ``rounds``, ``seconds``, ``ms_per_token``
(medians over the new tokens), ``ratio`` (the median over rounds of converted / Hugging Face, per token),
``same_tokens`` and ``met`` (target :data:`HF_TARGET`: ``ratio <= 1.10``).

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.generation`` (``--quick``: 64 new tokens; ``--huggingface``: the
comparison with Hugging Face only). One thread: on a busy machine two OpenMP threads spin against other processes
and a step's time varies tenfold.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.harness import provenance, rounds
from neuralode_tf.models import CausalLM

DIM, DEPTH, HEADS, VOCAB, BLOCK = 128, 4, 4, 65, 512
PROMPT, NEW_TOKENS, QUICK_TOKENS, WARMUP_TOKENS = 16, 256, 64, 8
METHODS = {"rk4": dict(method="rk4", steps=2 * DEPTH), "euler": dict(method="euler")}
BATCHES = (1, 8)
HF_SIZES = {"gpt2 d256": dict(n_embd=256, n_layer=4, n_head=4), "gpt2 124M": dict(n_embd=768, n_layer=12, n_head=12)}
HF_VOCAB, HF_NEW_TOKENS, HF_QUICK_TOKENS, HF_TARGET = 50257, 64, 16, 1.10


def _model(method: str, device: torch.device) -> CausalLM:
    torch.manual_seed(0)
    model = CausalLM(VOCAB, DIM, DEPTH, HEADS, block_size=BLOCK, **METHODS[method])
    return model.to(device).eval()


def _generation(
    model: CausalLM, prompt: torch.Tensor, new: int, cache: bool, out: list[torch.Tensor]
) -> Callable[[], None]:
    def run() -> None:
        out.append(model.generate(prompt, new, top_k=1, cache=cache))

    return run


def _row(method: str, batch: int, new: int, device: torch.device, repeats: int) -> dict:
    """Time cached against uncached generation for one method and batch: one row of the results."""
    model = _model(method, device)
    prompt = torch.randint(0, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(1)).to(device)
    outputs: dict[str, list[torch.Tensor]] = {"cached": [], "uncached": []}
    for cache in (True, False):  # the warm-up: a short generation of each (a full one costs minutes uncached)
        model.generate(prompt, WARMUP_TOKENS, top_k=1, cache=cache)
    steps = {name: _generation(model, prompt, new, name == "cached", outputs[name]) for name in outputs}
    samples = rounds(steps, repeats=repeats, warmup=0)
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    same = all(torch.equal(a, b) for a, b in zip(outputs["cached"], outputs["uncached"]))
    return {
        "method": method,
        "batch": batch,
        "repeats": repeats,
        "rounds": samples,
        "seconds": seconds,
        "tokens_per_second": {name: batch * new / t for name, t in seconds.items()},
        "speedup": seconds["uncached"] / seconds["cached"],
        "speedup_paired": statistics.median(u / c for u, c in zip(samples["uncached"], samples["cached"])),
        "same_tokens": same,
    }


def _hf_row(name: str, new: int, repeats: int) -> dict:
    """The converted GPT-2's cached greedy generation against Hugging Face's, per token: one row."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from neuralode_tf.models import from_transformers

    config = GPT2Config(
        vocab_size=HF_VOCAB, bos_token_id=None, eos_token_id=None, pad_token_id=0,
        attn_implementation="sdpa", **HF_SIZES[name],
    )  # fmt: skip
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(config).eval()
    converted = from_transformers(hf)
    prompt = torch.randint(1, HF_VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    outputs: dict[str, torch.Tensor] = {}

    def huggingface() -> None:
        with torch.no_grad():
            outputs["hf"] = hf.generate(
                prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new, do_sample=False, use_cache=True
            )

    def ours() -> None:
        outputs["converted"] = converted.generate(prompt, new, top_k=1)

    samples = rounds({"hf": huggingface, "converted": ours}, repeats=repeats, warmup=1)
    seconds = {key: statistics.median(values) for key, values in samples.items()}
    ratio = statistics.median(c / h for c, h in zip(samples["converted"], samples["hf"]))
    return {
        "name": name,
        "config": HF_SIZES[name],
        "rounds": samples,
        "seconds": seconds,
        "ms_per_token": {key: 1e3 * value / new for key, value in seconds.items()},
        "ratio": ratio,
        "same_tokens": torch.equal(outputs["hf"], outputs["converted"]),
        "met": ratio <= HF_TARGET,
    }


def _huggingface(quick: bool, repeats: int, out: Path | None) -> None:
    new = HF_QUICK_TOKENS if quick else HF_NEW_TOKENS
    print(f"converted GPT-2 / Hugging Face greedy generation with a cache, {new} new tokens, batch 1, cpu")
    rows = []
    for name in HF_SIZES:
        row = _hf_row(name, new, repeats)
        rows.append(row)
        ms = row["ms_per_token"]
        print(
            f"  {name:<10} hf {ms['hf']:6.2f} ms/token  converted {ms['converted']:6.2f} ms/token  "
            f"ratio {row['ratio']:.3f}x  same tokens {row['same_tokens']}"
        )
    import transformers

    setup = dict(vocab_size=HF_VOCAB, prompt=PROMPT, new_tokens=new, batch=1, repeats=repeats, device="cpu")
    setup.update(threads=torch.get_num_threads(), torch=torch.__version__, transformers=transformers.__version__)
    results = {**provenance("benchmarks.generation"), "setup": setup}
    results.update(target=f"converted / hf time per token <= {HF_TARGET}", rows=rows)
    path = out or Path(__file__).parent / "results" / "generation_hf_cpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    print(f"wrote {path}")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TOKENS} new tokens instead of {NEW_TOKENS}")
    parser.add_argument("--huggingface", action="store_true", help="only the comparison with Hugging Face's generate")
    parser.add_argument("--repeats", type=int, help="timed rounds per row (at least 3; default 3, --huggingface 10)")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/generation_<device>.json)")
    args = parser.parse_args()
    repeats = args.repeats if args.repeats is not None else 10 if args.huggingface else 3
    if repeats < 3:
        parser.error("--repeats must be at least 3")
    if args.huggingface:
        _huggingface(args.quick, repeats, args.out)
        return
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or Path(__file__).parent / "results" / f"generation_{device.type}.json"
    new = QUICK_TOKENS if args.quick else NEW_TOKENS
    print(f"CausalLM generation, d={DIM}, {DEPTH} layers, {HEADS} heads, prompt {PROMPT}, {new} new tokens, {device}")
    print("speed-up = time(uncached) / time(cached), above 1: the KV cache is faster")
    header = f"{'cached s':>11}{'uncached s':>12}{'speed-up':>10}{'paired':>10}{'same tokens':>13}"
    print(f"  {'method':<8}{'batch':>6}{header}")
    rows = []
    for method in METHODS:
        for batch in BATCHES:
            row = _row(method, batch, new, device, repeats)
            rows.append(row)
            seconds = row["seconds"]
            print(
                f"  {method:<8}{batch:>6}{seconds['cached']:>11.3f}{seconds['uncached']:>12.3f}"
                f"{row['speedup']:>9.2f}x{row['speedup_paired']:>9.2f}x{row['same_tokens']!s:>13}"
            )
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    setup = dict(dim=DIM, depth=DEPTH, num_heads=HEADS, vocab_size=VOCAB, block_size=BLOCK, prompt=PROMPT)
    setup.update(new_tokens=new, methods=METHODS, threads=torch.get_num_threads(), device=device_name)
    setup.update(torch=torch.__version__, warmup_tokens=WARMUP_TOKENS, competitors=["cached", "uncached"])
    results = {**provenance("benchmarks.generation"), "setup": setup, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
