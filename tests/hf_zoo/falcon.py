from tests._hf_zoo import Specimen

_PARALLEL = dict(reading="parallel", common={"intermediate_size": ""})

ZOO = {
    "falcon": Specimen("FalconConfig", "Falcon", dict(parallel_attn=True, multi_query=True, bias=False), **_PARALLEL),
    "falcon_grouped": Specimen(
        "FalconConfig",
        "Falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, bias=True, ffn_hidden_size=64),
        **_PARALLEL,
    ),
    "falcon_one_norm": Specimen(
        "FalconConfig",
        "Falcon",
        dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1),
        **_PARALLEL,
    ),
    "falcon_sequential": Specimen(
        "FalconConfig",
        "Falcon",
        dict(parallel_attn=False, multi_query=False, bias=True),
        common={"intermediate_size": ""},
    ),
}
"""Falcon-7B's parallel multi-query block with one norm, Falcon-40B's grouped block with two norms (and with one), the
old sequential block."""
