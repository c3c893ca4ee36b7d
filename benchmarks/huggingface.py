"""Hugging Face conversion: the converted model against the Hugging Face model it was read from.

**Speed.** GPT-2, LLaMA, Qwen3 and Gemma 2 (grouped-query attention, 8 heads over 2 key/value heads; Qwen3's
per-head query/key norms; Gemma 2's capped attention logits) at d = 256, 4 blocks, batch 4 of 128 tokens, float32,
``eval()``, under ``torch.no_grad()``; Hugging Face with ``attn_implementation="sdpa"`` (Gemma 2: ``"eager"``, which
transformers 5 runs it with, ``sdpa`` having no logit cap), the converted model at its default solve (one
Lie-Trotter step per block), once without a mask and once with an ``attention_mask`` that right-pads half the batch.
Both run in one process, ``--warmup`` untimed calls each, then ``--repeats`` rounds of one forward of each in a
shuffled order (:func:`benchmarks.harness.rounds`); ``ratio = median(converted) / median(hf)`` and ``paired_ratio``,
the median of the per-round ratios (:func:`benchmarks.harness.paired_ratios`'s statistic), and ``fastest_ratio``,
that of the fastest rounds (on a machine that other work slows now and then, the least disturbed). Target: ratio
<= 1.10.

**Exactness.** Every family of ``neuralode_tf.models.converters.huggingface`` (:data:`EXACTNESS`: GPT-2, LLaMA, Mistral
with a
sliding window, Qwen2, Qwen3 (head size 24 for d = 64 and 4 heads), Gemma, Gemma 2, Mixtral, StarCoder2, Falcon (three
blocks), OPT (pre- and post-LN), OLMo, OLMo 2, Phi, Phi-3, StableLM, GPT-NeoX parallel and sequential, GPT-J, BERT,
RoBERTa, ELECTRA, ALBERT, DistilBERT; their LM heads), d = 64, 2 blocks, 32 tokens, batch 3, random weights: the max-abs
difference between the converted model's and the Hugging Face model's outputs per dtype and padding (none, right, left),
with the size of the outputs, over every position (a padded decoder query that sees no key, left of the text or past a
sliding window, has zero attention weights in both), but for Gemma 2, which Hugging Face runs with its eager attention:
its padded rows are left out (its eager path gives such a query the mean of the values, or NaN in float64), and its
float64 rows hold float32 rounding (its softmax runs in float32).

**Output** (``--out``, default ``benchmarks/results/huggingface_cpu.json``): ``date``, ``command``, ``setup``,
``targets``, ``rows`` (one per speed case: ``name``, ``config``, ``batch``, ``tokens``, ``masked``, ``rounds``
(competitor: seconds per round), ``seconds`` (medians), ``ratio``, ``paired_ratio``, ``fastest`` (minima),
``fastest_ratio``) and ``exactness`` (family ->
dtype -> padding -> max-abs difference, and ``scale``: max-abs output).

Run: ``OMP_NUM_THREADS=2 python -m benchmarks.huggingface``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import provenance, rounds
from neuralode_tf.models import from_transformers

TARGETS = "converted / hf forward time <= 1.10 (float32, eval, no_grad, one Lie-Trotter step per block)"
SPEED = {
    "gpt2": ("GPT2LMHeadModel", dict(n_embd=256, n_layer=4, n_head=4, n_positions=256)),
    "llama": (
        "LlamaForCausalLM",
        dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2),
    ),
    "qwen3": (
        "Qwen3ForCausalLM",
        dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2),
    ),
    "gemma2": (
        "Gemma2ForCausalLM",
        dict(
            hidden_size=256,
            intermediate_size=688,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=32,
            attn_implementation="eager",  # what transformers 5 runs it with: sdpa cannot cap the logits
        ),
    ),
}
BATCH, TOKENS, VOCAB = 4, 128, 1000
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
EXACTNESS = {
    "gpt2": ("GPT2LMHeadModel", dict(n_embd=64, n_layer=2, n_head=4, n_positions=64)),
    "llama": ("LlamaForCausalLM", dict(SMALL, num_key_value_heads=2)),
    "mistral": ("MistralForCausalLM", dict(SMALL, num_key_value_heads=2, sliding_window=8)),
    "qwen2": ("Qwen2ForCausalLM", dict(SMALL, num_key_value_heads=2)),
    "qwen3": ("Qwen3ForCausalLM", dict(SMALL, num_key_value_heads=2, head_dim=24)),
    "gpt_neox": ("GPTNeoXForCausalLM", dict(SMALL, rotary_pct=0.25)),
    "gpt_neox_sequential": ("GPTNeoXForCausalLM", dict(SMALL, use_parallel_residual=False)),
    "gptj": ("GPTJForCausalLM", dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64)),
    "gemma": ("GemmaForCausalLM", dict(SMALL, num_key_value_heads=2, head_dim=24)),
    "gemma2": (
        "Gemma2ForCausalLM",
        dict(SMALL, num_key_value_heads=2, sliding_window=8, attn_logit_softcapping=2.0, attn_implementation="eager"),
    ),
    "olmo": ("OlmoForCausalLM", dict(SMALL, num_key_value_heads=2, clip_qkv=0.05)),
    "olmo2": ("Olmo2ForCausalLM", dict(SMALL, num_key_value_heads=2)),
    "phi": ("PhiForCausalLM", dict(SMALL, qk_layernorm=True, partial_rotary_factor=0.5)),
    "phi3": ("Phi3ForCausalLM", dict(SMALL, num_key_value_heads=2)),
    "stablelm": ("StableLmForCausalLM", dict(SMALL, num_key_value_heads=2, use_qkv_bias=True)),
    "stablelm_parallel": ("StableLmForCausalLM", dict(SMALL, num_key_value_heads=4, use_parallel_residual=True)),
    "mixtral": (
        "MixtralForCausalLM",
        dict(SMALL, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, experts_implementation="eager"),
    ),
    "starcoder2": ("Starcoder2ForCausalLM", dict(SMALL, num_key_value_heads=2, sliding_window=8)),
    "falcon": ("FalconForCausalLM", dict(SMALL, parallel_attn=True, multi_query=True)),
    "falcon_grouped": ("FalconForCausalLM", dict(SMALL, new_decoder_architecture=True, num_kv_heads=2)),
    "falcon_sequential": ("FalconForCausalLM", dict(SMALL, parallel_attn=False, multi_query=False)),
    "opt": ("OPTForCausalLM", dict(SMALL, ffn_dim=128, word_embed_proj_dim=64)),
    "opt_post_norm": ("OPTForCausalLM", dict(SMALL, ffn_dim=128, word_embed_proj_dim=48, do_layer_norm_before=False)),
    "bert": ("BertForMaskedLM", dict(SMALL)),
    "roberta": ("RobertaForMaskedLM", dict(SMALL, pad_token_id=1)),
    "electra": ("ElectraForMaskedLM", dict(SMALL, embedding_size=32)),
    "albert": ("AlbertForMaskedLM", dict(SMALL, embedding_size=32)),
    "distilbert": ("DistilBertForMaskedLM", dict(dim=64, hidden_dim=128, n_layers=2, n_heads=4)),
}

EAGER = {"gemma2": "its eager attention's softmax runs in float32 whatever the dtype"}
"""Families Hugging Face runs with its eager attention: compared on unpadded sequences, and in float64 to the
float32 rounding the reason names."""


def _model(class_name: str, kwargs: dict[str, Any], dtype: torch.dtype) -> Any:
    import transformers

    model_class = getattr(transformers, class_name)
    config = model_class.config_class(
        **{"vocab_size": VOCAB, "pad_token_id": 0, "attn_implementation": "sdpa", **kwargs}
    )
    torch.manual_seed(0)
    return model_class(config).to(dtype).eval()


def _output(model: Any, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask)
    logits = getattr(out, "logits", None)
    return out.last_hidden_state if logits is None else logits


def _speed_row(name: str, masked: bool, repeats: int, warmup: int) -> dict:
    class_name, kwargs = SPEED[name]
    hf_model = _model(class_name, kwargs, torch.float32)
    converted = from_transformers(hf_model)
    ids = torch.randint(1, VOCAB, (BATCH, TOKENS), generator=torch.Generator().manual_seed(0))
    mask = None
    if masked:
        mask = torch.ones_like(ids)
        mask[BATCH // 2 :, TOKENS // 2 :] = 0

    def hf() -> None:
        with torch.no_grad():
            _output(hf_model, ids, mask)

    def ode() -> None:
        with torch.no_grad():
            converted(ids, mask)

    samples = rounds({"hf": hf, "converted": ode}, repeats=repeats, warmup=warmup)
    seconds = {key: statistics.median(values) for key, values in samples.items()}
    paired = statistics.median(a / b for a, b in zip(samples["converted"], samples["hf"]))
    fastest = {key: min(values) for key, values in samples.items()}
    row = {"name": name, "config": kwargs, "batch": BATCH, "tokens": TOKENS, "masked": masked}
    return {
        **row,
        "rounds": samples,
        "seconds": seconds,
        "ratio": seconds["converted"] / seconds["hf"],
        "paired_ratio": paired,
        "fastest": fastest,
        "fastest_ratio": fastest["converted"] / fastest["hf"],
    }


def _exactness() -> dict[str, dict]:
    """family -> dtype -> padding -> max-abs difference over every position, and ``scale``."""
    table: dict[str, dict] = {}
    ids = torch.randint(2, VOCAB, (3, 32), generator=torch.Generator().manual_seed(1))
    real = {"none": torch.ones_like(ids, dtype=torch.bool)}
    lengths = torch.tensor([32, 20, 9])[:, None]
    real["right"], real["left"] = torch.arange(32) < lengths, torch.arange(32) >= 32 - lengths
    for family, (class_name, kwargs) in EXACTNESS.items():
        table[family] = {}
        for dtype in (torch.float64, torch.float32):
            hf_model = _model(class_name, kwargs, dtype)
            converted = from_transformers(hf_model)
            row: dict[str, float] = {}
            for padding, mask in real.items():
                pad = kwargs.get("pad_token_id", 0)
                with torch.no_grad():
                    expected = _output(hf_model, ids.masked_fill(~mask, pad), None if padding == "none" else mask)
                    got = converted(ids.masked_fill(~mask, pad), None if padding == "none" else mask)
                if family in EAGER:  # the unpadded sequences: Hugging Face's eager path is no reference elsewhere
                    got, expected = got[mask.all(-1)], expected[mask.all(-1)]
                row[padding] = float((got - expected).abs().max())
                row["scale"] = max(row.get("scale", 0.0), float(expected.abs().max()))
            table[family][str(dtype).removeprefix("torch.")] = row
    return table



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds per case (at least 3)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls of each competitor first")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/huggingface_cpu.json)")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3")
    import transformers

    print(f"converted vs Hugging Face forward, float32, eval, no_grad; batch {BATCH} x {TOKENS} tokens; {TARGETS}")
    print(f"  {'case':<16}{'hf s':>9}{'converted s':>13}{'ratio':>8}{'paired':>8}{'fastest':>9}")
    rows = []
    for name in SPEED:
        for masked in (False, True):
            row = _speed_row(name, masked, args.repeats, args.warmup)
            rows.append(row)
            case = f"{name}{' masked' if masked else ''}"
            seconds = row["seconds"]
            ratios = f"{row['ratio']:>8.3f}{row['paired_ratio']:>8.3f}{row['fastest_ratio']:>9.3f}"
            print(f"  {case:<16}{seconds['hf']:>9.4f}{seconds['converted']:>13.4f}{ratios}")
    exactness = _exactness()
    print("\nexactness: max-abs difference from the Hugging Face output (every position), and output scale")
    print(f"  {'family':<22}{'dtype':<9}{'none':>10}{'right':>10}{'left':>10}{'scale':>8}")
    for family, dtypes in exactness.items():
        for dtype, row in dtypes.items():
            cells = "".join(f"{row[p]:>10.1e}" for p in ("none", "right", "left"))
            print(f"  {family:<22}{dtype:<9}{cells}{row['scale']:>8.2f}")
    setup = {"threads": torch.get_num_threads(), "device": "cpu", "torch": torch.__version__}
    setup.update(transformers=transformers.__version__, warmup=args.warmup, repeats=args.repeats, dtype="float32")
    results = {**provenance("benchmarks.huggingface"), "setup": setup, "targets": TARGETS}
    out = args.out or Path(__file__).parent / "results" / "huggingface_cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**results, "rows": rows, "exactness": exactness}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
