from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

from tests._hf_zoo import Specimen


def _builds_head_norms() -> bool:
    """transformers 4.52 cannot build StableLM with ``qk_layernorm``: its ``_init_weights`` zeroes the bias of every
    LayerNorm, which the per-head LayerNorms lack (``tests/test_hf_phi.py`` builds one there around it)."""
    try:
        return Version(version("transformers")).major >= 5
    except PackageNotFoundError:  # the zoo's tests skip
        return True


_FEATURES = dict(num_key_value_heads=2, partial_rotary_factor=0.5, qk_layernorm=_builds_head_norms(), use_qkv_bias=True)

ZOO = {
    "stablelm": Specimen("StableLmConfig", "StableLm", _FEATURES),
    "stablelm_parallel": Specimen(
        "StableLmConfig", "StableLm", dict(_FEATURES, use_parallel_residual=True), reading="parallel"
    ),
}
"""StableLM's sequential block and its parallel one (``use_parallel_residual``), each with grouped-query attention
(2 key/value heads for 4 query heads), per-head query and key LayerNorms (transformers 5), query/key/value biases and
rotary positions on half of each head's features."""
