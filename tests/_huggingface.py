"""Small random-weight Hugging Face models for the conversion tests (nothing is downloaded), and the comparison."""

from __future__ import annotations

from typing import Any

import pytest
import torch

VOCAB, DIM, LAYERS, HEADS, TOKENS = 97, 32, 3, 4, 10
PAD = 0

FAMILIES = {
    # name: (config class, model class prefix, config keyword arguments)
    "gpt2": ("GPT2Config", "GPT2", dict(n_embd=DIM, n_layer=LAYERS, n_head=HEADS, n_positions=64)),
    "llama": ("LlamaConfig", "Llama", dict(num_key_value_heads=2, tie_word_embeddings=True)),
    "mistral": ("MistralConfig", "Mistral", dict(num_key_value_heads=2, sliding_window=4)),
    "qwen2": (
        "Qwen2Config",
        "Qwen2",
        dict(num_key_value_heads=2, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ),
    "qwen3": (
        "Qwen3Config",
        "Qwen3",
        dict(num_key_value_heads=2, head_dim=12, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoX", dict(rotary_pct=0.5)),
    "gpt_neox_sequential": ("GPTNeoXConfig", "GPTNeoX", dict(use_parallel_residual=False)),
    "bert": ("BertConfig", "Bert", {}),
    "roberta": ("RobertaConfig", "Roberta", dict(pad_token_id=1)),
}
"""GQA (2 key/value heads for 4 query heads), tied embeddings (GPT-2, LLaMA, GPT-NeoX's untied), a sliding window
shorter than the sequence (Mistral on every layer, Qwen2 and Qwen3 on layers 1-2), partial rotary (GPT-NeoX), a
head size other than d / H (Qwen3: 12 for d = 32 and 4 heads) with per-head query/key norms (Qwen3)."""

ENCODERS = ("bert", "roberta")
HEADS_OF = {
    "causal_lm": lambda prefix: "GPT2LMHeadModel" if prefix == "GPT2" else f"{prefix}ForCausalLM",
    "masked_lm": lambda prefix: f"{prefix}ForMaskedLM",
    "sequence_classification": lambda prefix: f"{prefix}ForSequenceClassification",
    "base": lambda prefix: f"{prefix}Model",
}


def transformers() -> Any:
    return pytest.importorskip("transformers")


def config(family: str, **overrides: Any) -> Any:
    config_class, _, kwargs = FAMILIES[family]
    common: dict[str, Any] = dict(vocab_size=VOCAB, pad_token_id=PAD, initializer_range=0.05, num_labels=3)
    if family != "gpt2":
        common.update(hidden_size=DIM, intermediate_size=2 * DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS)
    return getattr(transformers(), config_class)(**{**common, **kwargs, **overrides})


def model(family: str, task: str | None = None, *, dtype: torch.dtype = torch.float64, seed: int = 0, **overrides):
    """A random-weight model of ``family`` with the head of ``task`` (default: the family's LM head), in eval mode."""
    task = task or ("masked_lm" if family in ENCODERS else "causal_lm")
    name = HEADS_OF[task](FAMILIES[family][1])
    torch.manual_seed(seed)
    return getattr(transformers(), name)(config(family, **overrides)).to(dtype).eval()


def two_blocks(family: str) -> dict[str, int]:
    """The config override for a model of two blocks."""
    return {"n_layer": 2} if family == "gpt2" else {"num_hidden_layers": 2}


def inputs(family: str, padding: str, device: torch.device, batch: int = 3) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token ids (padding ids at padded positions) and Hugging Face's ``attention_mask`` (1 = real): ``"none"``,
    ``"right"`` or ``"left"`` padding, with sequences of 10, 7 and 4 real tokens."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(2, VOCAB, (batch, TOKENS), generator=generator)
    if padding == "none":
        return ids.to(device), None
    lengths = torch.tensor([TOKENS, 7, 4, 9, 2, 5, 8, 3][:batch])
    positions = torch.arange(TOKENS)
    real = positions < lengths[:, None] if padding == "right" else positions >= TOKENS - lengths[:, None]
    pad = 1 if family == "roberta" else PAD
    return ids.masked_fill(~real, pad).to(device), real.long().to(device)


def hf_output(hf_model: Any, ids: torch.Tensor, mask: torch.Tensor | None, **kwargs: Any) -> torch.Tensor:
    out = hf_model(input_ids=ids, attention_mask=mask, **kwargs)
    logits = getattr(out, "logits", None)
    return out.last_hidden_state if logits is None else logits


WINDOW = {"mistral": 4, "qwen2": 4, "qwen3": 4}


def hf_zeroes_blind_queries() -> bool:
    """Whether the installed transformers gives a query that sees no key zero attention weights, as the converted
    models do (transformers 5, through torch's ``scaled_dot_product_attention``). transformers 4.52 gives it other
    values (the oldest-versions session compares the other positions only)."""
    from packaging.version import Version

    return Version(transformers().__version__).major >= 5


def compared(family: str, mask: torch.Tensor | None) -> torch.Tensor | None:
    """Positions ``(B, n)`` at which the converted model must equal the installed Hugging Face model: every position
    (``None``) under :func:`hf_zeroes_blind_queries`, else those whose query sees some real key (causal and within
    the sliding window for a decoder)."""
    if mask is None or hf_zeroes_blind_queries():
        return None
    n, window = mask.shape[-1], None if family in ENCODERS else WINDOW.get(family)
    i = torch.arange(n, device=mask.device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=mask.device)
    if family not in ENCODERS:
        allowed = i[:, None] >= i[None, :]
    if window is not None:
        allowed = allowed & (i[:, None] - i[None, :] < window)
    return (allowed[None] & mask.bool()[:, None, :]).any(-1)


def max_diff(a: torch.Tensor, b: torch.Tensor, where: torch.Tensor | None = None) -> float:
    difference = (a - b).detach().abs()
    return float((difference if where is None else difference[where]).max())


def save_tiny_bert(folder: Any, words: list[str]) -> Any:
    """Write what ``save_pretrained`` writes to ``folder``: a random ``BertModel`` (d=32, 2 blocks, 4 heads, seed 0)
    and a WordPiece tokenizer whose vocabulary is BERT's specials and ``words``. Returns ``folder``."""
    lib = transformers()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(specials + words) + "\n", encoding="utf-8")
    lib.BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    bert = lib.BertConfig(
        vocab_size=len(specials) + len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
    )
    torch.manual_seed(0)
    lib.BertModel(bert).save_pretrained(folder)
    return folder
