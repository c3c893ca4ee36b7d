from tests._hf_zoo import Specimen

ZOO = {
    "mixtral": Specimen(
        "MixtralConfig",
        "Mixtral",
        dict(num_key_value_heads=2, sliding_window=4, num_local_experts=4, num_experts_per_tok=2),
        window=4,
        # transformers 5's default experts kernel (torch._grouped_mm) takes no float64: its eager experts do
        float64_overrides=dict(experts_implementation="eager"),
        smooth=dict(num_experts_per_tok=4),  # top-2 of 4 jumps where two experts swap rank
    ),
}
"""Grouped-query attention (2 key/value heads for 4 query heads), a sliding window shorter than the sequence, 4
experts routed top-2. Its experts mix with float32 router weights in both versions, but the MoE module is the
model's own, so a float64 model is compared to 1e-10 like the others."""
