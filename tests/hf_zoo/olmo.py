from tests._hf_zoo import Specimen

ZOO = {
    "olmo": Specimen(
        "OlmoConfig",
        "Olmo",
        dict(num_key_value_heads=2, clip_qkv=0.05),
        rk4_steps=(2, 4, 8),  # its LayerNorms compute in float32: errors stop at about 2e-7
        smooth=dict(clip_qkv=None),  # the clip's kinks
    ),
    "olmo2": Specimen(
        "Olmo2Config",
        "Olmo2",
        dict(num_key_value_heads=2),
        # the norm on a branch's output has a Jacobian of about 1 / rms(branch), large for small random weights
        smooth=dict(initializer_range=1.0),
    ),
}
"""OLMo: parameter-free LayerNorms (computed in float32 whatever the dtype: a rounding floor for the fitted orders),
grouped-query attention, projections clipped at 0.05 (the random projections reach about 0.2, so the clip bites);
OLMo 2: RMSNorms on the branch outputs and on the whole query/key projections."""
