from tests._hf_zoo import Specimen

ZOO = {
    "phi": Specimen(
        "PhiConfig",
        "Phi",
        dict(num_key_value_heads=2, qk_layernorm=True, partial_rotary_factor=0.5),
        reading="parallel",
        order_steps=4,  # its per-head LayerNorms of 8 features of queries and keys of size ~0.3 make it stiff
    ),
    "phi3": Specimen(
        "Phi3Config",
        "Phi3",
        dict(num_key_value_heads=2, sliding_window=4, partial_rotary_factor=0.5, bos_token_id=1, eos_token_id=2),
        window=4,
    ),
}
"""Phi: the parallel block of one LayerNorm, grouped-query attention (2 key/value heads for 4 query heads), per-head
LayerNorms of queries and keys, rotary positions on half of each head's features, biases everywhere (the LM head's
too). Phi-3: the fused ``qkv_proj`` of 4 query and 2 key/value heads, the fused ``gate_up_proj``, a sliding window
shorter than the sequence, rotary positions on half of each head's features."""
