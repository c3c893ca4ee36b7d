from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

from tests._hf_zoo import Specimen


def _logits_in_float32() -> bool:
    """transformers 4's ``GPTJForCausalLM`` returns its logits cast to float32 whatever the model's dtype (5 does not):
    a float64 model's logits then differ from the converted model's float64 ones by their float32 rounding."""
    try:
        return Version(version("transformers")).major < 5
    except PackageNotFoundError:  # the zoo's tests skip
        return False


_RENAMES = dict(hidden_size="n_embd", num_hidden_layers="n_layer", num_attention_heads="n_head")

ZOO = {
    "gptj": Specimen(
        "GPTJConfig",
        "GPTJ",
        dict(rotary_dim=4, n_positions=64, bos_token_id=1, eos_token_id=2),
        reading="parallel",
        common={**_RENAMES, "intermediate_size": "n_inner"},
        float64=1e-6 if _logits_in_float32() else 1e-10,
        why="transformers 4's GPTJForCausalLM casts its logits to float32 whatever the model's dtype",
    ),
}
"""GPT-J: the parallel block of one LayerNorm, rotary positions in the interleaved layout on 4 of each head's 8
channels (partial rotary), projections without bias, an LM head with a bias. Under transformers 4.52 its eager
attention computes the logits in float32, which the reading reproduces (its own test module checks transformers 5's
eager attention)."""
