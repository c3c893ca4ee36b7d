"""Wang et al. (2021), Table 3's FLOPs column: the GLUE backbones and what evolving attention adds to them.

Counted as Table 5 counts (§4.3, HAT's convention, :class:`~neuralode_tf.flops.FlopCounter`: matrix products,
attention and convolutions, 2 per multiply-add) on one sequence of :data:`LENGTH` tokens, GLUE's usual maximum
length (the paper states none: our choice). The backbone is the Hugging Face model of the paper's size with random
weights (nothing is downloaded; no count depends on the weights); what evolving attention adds is eq. 4's one
``3 × 3`` convolution over the heads' ``LENGTH × LENGTH`` logit maps per attention, ``2 · LENGTH² · H² · 9`` FLOPs,
in each of the ``L`` layers (as Table 3's parameter rows count it), in each attention of T5's encoder and decoder
(self-attention of both, the decoder's cross-attention).
"""

from __future__ import annotations

import torch
from torch import nn

from neuralode_tf.flops import FlopCounter

__all__ = ["bert_base_flops", "bert_large_flops", "roberta_large_flops", "t5_base_flops"]

LENGTH = 128


def _convolution_flops(heads: int) -> int:
    """FLOPs of one ``3 × 3`` convolution from ``heads`` to ``heads`` channels on a ``LENGTH × LENGTH`` map."""
    convolution = nn.Conv2d(heads, heads, 3, padding=1)
    with FlopCounter() as counter, torch.no_grad():
        convolution(torch.zeros(1, heads, LENGTH, LENGTH))
    return counter.total


def _backbone_flops(model: nn.Module, **inputs: torch.Tensor) -> int:
    with FlopCounter() as counter, torch.no_grad():
        model(**inputs)
    return counter.total


def _row(backbone: int, maps: int, heads: int) -> str:
    """``"22.3G → 22.8G (+0.5G: 12 × 42.5M)"``: backbone, with evolving attention, and the difference."""
    per_map = _convolution_flops(heads)
    extra = maps * per_map
    return (
        f"{backbone / 1e9:.1f}G → {(backbone + extra) / 1e9:.1f}G (+{extra / 1e9:.1f}G: {maps} × {per_map / 1e6:.1f}M)"
    )


def _encoder(config_class: str, model_class: str, **config: int) -> str:
    import transformers

    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).eval()
    ids = torch.zeros(1, LENGTH, dtype=torch.long)
    return _row(_backbone_flops(model, input_ids=ids), config["num_hidden_layers"], config["num_attention_heads"])


def bert_base_flops() -> str:
    return _encoder("BertConfig", "BertModel", num_hidden_layers=12, num_attention_heads=12)


def bert_large_flops() -> str:
    large = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    return _encoder("BertConfig", "BertModel", **large)


def roberta_large_flops() -> str:
    large = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    return _encoder("RobertaConfig", "RobertaModel", **large)


def t5_base_flops() -> str:
    """T5-Base (d = 768, 12 + 12 layers, 12 heads) on ``LENGTH`` source and ``LENGTH`` target tokens: ``3 · 12``
    attention maps (encoder self, decoder self, decoder cross)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.T5Config(d_model=768, d_ff=3072, num_layers=12, num_heads=12, d_kv=64)
    model = transformers.T5Model(config).eval()
    ids = torch.zeros(1, LENGTH, dtype=torch.long)
    return _row(_backbone_flops(model, input_ids=ids, decoder_input_ids=ids), 3 * 12, 12)
