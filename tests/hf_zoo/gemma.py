from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

from tests._hf_zoo import Specimen


def _transformers_4() -> bool:
    try:
        return Version(version("transformers")).major < 5
    except PackageNotFoundError:  # the zoo's tests skip
        return False


ZOO = {
    "gemma": Specimen(
        "GemmaConfig",
        "Gemma",
        dict(num_key_value_heads=2, head_dim=12),
        rk4_steps=(1, 2, 4),  # its RMSNorms compute in float32 whatever the dtype: errors stop at about 2e-7
    ),
    "gemma2": Specimen(
        "Gemma2Config",
        "Gemma2",
        dict(
            num_key_value_heads=2,
            head_dim=12,
            query_pre_attn_scalar=20,
            initializer_range=0.2,
            attn_logit_softcapping=2.0,
            final_logit_softcapping=3.0,
            sliding_window=4,
        ),
        window=4,
        float64=1e-5,
        why="Gemma 2's RMSNorms compute in float32, and so does the softmax of its eager attention (transformers 5's "
        "default for it) whatever the dtype",
        # transformers 4.52's default sdpa drops the cap: the uncapped field is stiffer
        rk4_steps=(8, 16, 32) if _transformers_4() else (4, 8, 16),
        eager_blind=True,
        order_steps=2,  # its logits of ~3.5 (uncapped under transformers 4.52's sdpa) make it stiff
    ),
}
"""Gemma: grouped-query attention (2 key/value heads for 4 query heads), a head size of 12 for d = 32 and 4 heads,
``(1 + w)`` RMSNorms, GeGLU, embeddings scaled by ``sqrt(d)``. Gemma 2: the same with sandwich norms, a query scale
``20^{-1/2}`` (``query_pre_attn_scalar``) other than ``d_h^{-1/2}``, weights of scale 0.2 so that the attention logits
reach about 3.5 and the final logits about 5, capped at 2 and 3 (both caps bend them), and a window of 4 on layers 0
and 2. Under transformers 4.52 its default ``sdpa`` attention ignores the attention cap (``tests/test_hf_gemma.py``)."""
