from tests._hf_zoo import Specimen

# ReLU's kink makes the field only piecewise smooth: the fitted orders use GELU
_OPT = dict(common={"intermediate_size": "ffn_dim"}, smooth=dict(activation_function="gelu"))

ZOO = {
    "opt": Specimen("OPTConfig", "OPT", dict(word_embed_proj_dim=32), **_OPT),
    "opt_projected": Specimen("OPTConfig", "OPT", dict(word_embed_proj_dim=24, enable_bias=False), **_OPT),
    "opt_post_norm": Specimen(
        "OPTConfig",
        "OPT",
        dict(word_embed_proj_dim=24, do_layer_norm_before=False),
        order_steps=32,
        rk4_steps=(8, 16, 32),
        **_OPT,
    ),
}
"""OPT with learned positions offset by 2 (counted from the attention mask), pre-LN blocks with and without
``project_in``/``project_out`` (embedding width 24) and biases; OPT-350m's post-LN blocks."""
