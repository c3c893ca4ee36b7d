"""The zoo of small random-weight Hugging Face models that ``tests/test_hf_families.py`` checks family by family.

Each module of ``tests/hf_zoo`` declares ``ZOO``, a dict of named :class:`Specimen` (one config of one family); this
module gathers them, builds the models (nothing is downloaded) and says which positions a comparison covers.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from tests import hf_zoo
from tests._huggingface import hf_zeroes_blind_queries, transformers

VOCAB, DIM, LAYERS, HEADS, TOKENS = 97, 32, 3, 4, 10


@dataclass(frozen=True)
class Specimen:
    """One config of one family.

    Attributes:
        config_class: The transformers config class (``"GemmaConfig"``).
        prefix: The model classes' prefix (``"Gemma"``: ``GemmaModel``, ``GemmaForCausalLM``, ...).
        kwargs: Config keywords beyond the common small sizes (vocabulary 97, d = 32, 3 blocks, 4 heads).
        encoder: A bidirectional encoder (LM head ``*ForMaskedLM``), else a decoder (``*ForCausalLM``).
        reading: The default reading of its blocks: ``"split"`` (Lie-Trotter) or ``"parallel"`` (Euler).
        window: The sliding window of its layers (``None``: none), for the positions transformers 4 compares.
        pad: The padding id its inputs use at padded positions.
        float64: The tolerance of a float64 comparison (``1e-10``; larger only where Hugging Face computes part of
            the block in float32 whatever the model's dtype, said in ``why``).
        why: The reason for a tolerance other than ``1e-10``.
        float64_overrides: Config overrides for a float64 model (e.g. an eager experts kernel).
        common: Override the common config keywords' names (``{"hidden_size": "n_embd"}``).
        tasks: The heads it has besides the LM head, compared too.
        smooth: Config overrides for the fitted orders and the adjoint check where the config's own field has jumps
            (Mixtral: every expert routed; OPT: GELU for ReLU) or starts stiff (ELECTRA, ALBERT: larger weights).
        rk4_steps: RK4's steps per block for its fitted order, fewer where a float32 rounding inside the blocks of a
            float64 model (Gemma's, OLMo's norms compute in float32) stops the error falling at about 2e-7.
        eager_blind: Hugging Face runs it with its eager attention under transformers 5 (Gemma 2), which gives a
            query that sees no key the mean of the values in float32 and NaN in float64 (its mask minimum becomes
            ``-inf`` in its float32 softmax, and the NaN spreads through the row by ``0 · NaN``): the comparisons
            leave out such queries as under transformers 4, and in float64 the sequences that hold one.
        order_steps: Multiplies the steps per block of the fitted orders (and of their reference) for a stiff
            field, whose usual steps lie before the asymptotic regime (OPT-350m: its post-LN relaxation ``N(x) - x``
            acts on un-normalised embeddings of size about 0.02, a Lipschitz constant of about ``1 / σ(x)``).
    """

    config_class: str
    prefix: str
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    encoder: bool = False
    reading: str = "split"
    window: int | None = None
    pad: int = 0
    float64: float = 1e-10
    why: str = ""
    float64_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    common: dict[str, str] = dataclasses.field(default_factory=dict)
    tasks: tuple[str, ...] = ("sequence_classification", "base")
    smooth: dict[str, Any] = dataclasses.field(default_factory=dict)
    order_steps: int = 1
    rk4_steps: tuple[int, ...] = (4, 8, 16)
    eager_blind: bool = False

    @property
    def lm_task(self) -> str:
        return "masked_lm" if self.encoder else "causal_lm"


def _gather() -> dict[str, Specimen]:
    zoo: dict[str, Specimen] = {}
    for info in sorted(pkgutil.iter_modules(hf_zoo.__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{hf_zoo.__name__}.{info.name}")
        clash = set(zoo) & set(module.ZOO)
        assert not clash, f"tests/hf_zoo/{info.name}.py names {clash} again"
        zoo.update(module.ZOO)
    return zoo


ZOO = _gather()
DECODERS = [name for name, specimen in ZOO.items() if not specimen.encoder]
CLASS_SUFFIX = {
    "causal_lm": "ForCausalLM",
    "masked_lm": "ForMaskedLM",
    "sequence_classification": "ForSequenceClassification",
    "base": "Model",
}


def skip_if_absent(name: str) -> None:
    """Skip, with the reason, a family that the installed transformers lacks."""
    if not hasattr(transformers(), ZOO[name].config_class):
        pytest.skip(f"{ZOO[name].config_class} is not in transformers {transformers().__version__}")


def config(name: str, **overrides: Any) -> Any:
    skip_if_absent(name)
    specimen = ZOO[name]
    common: dict[str, Any] = dict(
        vocab_size=VOCAB,
        hidden_size=DIM,
        intermediate_size=2 * DIM,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        pad_token_id=specimen.pad,
        initializer_range=0.05,
        num_labels=3,
    )
    common = {specimen.common.get(key, key): value for key, value in common.items() if specimen.common.get(key) != ""}
    return getattr(transformers(), specimen.config_class)(**{**common, **specimen.kwargs, **overrides})


def model(name: str, task: str | None = None, *, dtype: torch.dtype = torch.float64, **overrides: Any) -> Any:
    """A random-weight model (seed 0) of specimen ``name`` with the head of ``task`` (default: its LM head), in eval
    mode."""
    specimen = ZOO[name]
    if dtype == torch.float64:
        overrides = {**specimen.float64_overrides, **overrides}
    cfg = config(name, **overrides)
    class_name = specimen.prefix + CLASS_SUFFIX[task or specimen.lm_task]
    if not hasattr(transformers(), class_name):
        pytest.skip(f"{class_name} is not in transformers {transformers().__version__}")
    torch.manual_seed(0)
    hf_class = getattr(transformers(), class_name)
    return hf_class(cfg).to(dtype).eval()


def two_blocks(name: str) -> dict[str, int]:
    """The config override for a model of two blocks."""
    return {ZOO[name].common.get("num_hidden_layers", "num_hidden_layers"): 2}


def inputs(name: str, padding: str, device: torch.device, batch: int = 3) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token ids (the specimen's padding id at padded positions) and Hugging Face's ``attention_mask`` (1 = real):
    ``"none"``, ``"right"`` or ``"left"`` padding, sequences of 10, 7 and 4 real tokens."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(2, VOCAB, (batch, TOKENS), generator=generator)
    if padding == "none":
        return ids.to(device), None
    lengths = torch.tensor([TOKENS, 7, 4, 9, 2, 5, 8, 3][:batch])
    positions = torch.arange(TOKENS)
    real = positions < lengths[:, None] if padding == "right" else positions >= TOKENS - lengths[:, None]
    return ids.masked_fill(~real, ZOO[name].pad).to(device), real.long().to(device)


def compared(name: str, mask: torch.Tensor | None, dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
    """Positions ``(B, n)`` compared: all (``None``) under transformers 5, else those whose query sees a real key
    (causally and within the sliding window for a decoder): transformers 4 gives a query that sees none other values,
    and so does transformers 5's eager attention (``Specimen.eager_blind``: in float64 the whole sequence)."""
    specimen = ZOO[name]
    if mask is None or (hf_zeroes_blind_queries() and not specimen.eager_blind):
        return None
    n = mask.shape[-1]
    i = torch.arange(n, device=mask.device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=mask.device)
    if not specimen.encoder:
        allowed = i[:, None] >= i[None, :]
    if specimen.window is not None:
        allowed = allowed & (i[:, None] - i[None, :] < specimen.window)
    seen = (allowed[None] & mask.bool()[:, None, :]).any(-1)
    if specimen.eager_blind and dtype == torch.float64 and hf_zeroes_blind_queries():
        return seen & seen.all(-1, keepdim=True)
    return seen
